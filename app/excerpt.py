"""A run's output within a byte budget, for a reader that cannot scroll: a coding agent.

Agents cut long output blind — the last 20 lines, the first MiB — and the seed's diagnostic
was lost that way, behind the end of a 7,000-line config dump. :func:`excerpt` picks the
lines that matter instead, and says what it left out and how to read it:

1. lines matching the caller's ``grep`` (what it is looking for), first;
2. errors and tracebacks (app/outline.py's ``line_style``), with the two lines before each;
3. the last lines of each stream (where a crash or a summary is): the last three, then the
   last ones outside a dump;
4. rare lines: a line whose shape (its digits taken out) appears at most twice in the run —
   a diagnostic among 166,000 lines of "step N loss X" is one;
5. the first lines outside a dump, then the other lines that are not part of a dump or a
   repeated warning (outline.FoldDetector), latest first — a diagnostic between two dumps.

Dumps and repeats are never spent on: each is said as one fold ("7,000 lines of
JSON/config: Qwen3Config {", lines 12–7011). A probe's record lines are left out (they come
back parsed, as records). Every shown line has its 1-based number; ``left_out`` counts the
rest and ``read_more`` says how to get them (``run_output``: a range, a grep, a stream).

The budget is bytes of the excerpt's JSON (each line's text, number and stream), default
:data:`DEFAULT_BUDGET`; a line longer than :data:`LINE_CAP` characters is cut and says so.
Memory stays bounded whatever the run's size: only the candidates are kept while reading.
"""

from __future__ import annotations

import bisect
import json
import re
from collections import deque
from dataclasses import dataclass
from typing import Any

from ..sessions import Store
from ..sessions.output_index import OutputLine
from .outline import Fold, FoldDetector, line_style, record_line

_ERROR_HINTS = re.compile(r'rror|xception|Traceback|File "|FATAL|FAILED|Killed|fault|Interrupt|Exit|ailure|Timeout')
_DIGITS = str.maketrans("0123456789", "##########")  # a line's shape: its digits taken out
_KEEP_TEMPLATES = 50_000  # distinct line shapes counted (a log of unique lines stops counting there)
_RARE = 2  # a shape seen at most this often is a line worth showing (the diagnostic among 166,000 log lines)


def _is_error(text: str) -> bool:
    """An error or a traceback line (outline.line_style's), a substring test first: a log of
    a million lines costs one scan of each, not five regular expressions."""
    return _ERROR_HINTS.search(text) is not None and line_style(text) in ("error", "traceback")

__all__ = ["DEFAULT_BUDGET", "LINE_CAP", "MAX_BUDGET", "MIN_BUDGET", "excerpt"]

DEFAULT_BUDGET = 12_000  # bytes of JSON: about 3,000 tokens
MIN_BUDGET, MAX_BUDGET = 1_000, 200_000
LINE_CAP = 600  # characters of one line shown
TAIL = 25  # last lines of each stream (those outside a dump)
LAST = 3  # the very last lines of each stream, dump or not
HEAD = 5
CONTEXT = 2  # lines kept before an error
_KEEP_ERRORS = 400  # error lines remembered while reading (first ones and last ones)
_KEEP_PLAIN = 4_000  # other lines remembered (the latest)
_BLOCK = 10_000


@dataclass
class _Line:
    n: int  # 0-based over the merged output
    stream: str
    text: str
    utf8: bool = True  # False: the line's bytes are not UTF-8 (U+FFFD in text; run_output has them in base64)

    def shown(self) -> dict[str, Any]:
        text = self.text.rstrip("\n")
        out: dict[str, Any] = {"n": self.n + 1, "stream": self.stream}
        if not self.utf8:
            out["utf8"] = False
        if len(text) > LINE_CAP:
            out["text"] = text[:LINE_CAP]
            out["cut"] = f"+{len(text) - LINE_CAP:,} characters (run_output has the whole line)"
        else:
            out["text"] = text
        return out


def _size(item: dict[str, Any]) -> int:
    return len(json.dumps(item, ensure_ascii=False).encode()) + 2


class _Scan:
    """One pass over a run's lines, keeping only the candidates of each tier (memory bounded
    whatever the run's size): matches, errors with their context, each stream's tail, rare
    lines, the head and the other plain lines, and the folds (dumps, repeats)."""

    def __init__(self, pattern: re.Pattern[str] | None) -> None:
        self.pattern = pattern
        self.detector = FoldDetector()
        self.folds: list[Fold] = []
        self.matches: list[_Line] = []
        self.match_count = 0
        self.errors_first: list[_Line] = []
        self.errors_last: deque[_Line] = deque(maxlen=_KEEP_ERRORS)
        self.before: deque[_Line] = deque(maxlen=CONTEXT)
        self.context: dict[int, _Line] = {}
        self.tails: dict[str, deque[_Line]] = {"stdout": deque(maxlen=TAIL), "stderr": deque(maxlen=TAIL)}
        self.head: list[_Line] = []
        self.plain: deque[_Line] = deque(maxlen=_KEEP_PLAIN)
        self.shapes: dict[str, int] = {}
        self.first_of: dict[str, _Line] = {}  # a shape's first line while it is still rare
        self.records = 0
        self._starts: list[int] = []

    def feed(self, block: list[OutputLine]) -> None:
        self.folds += self.detector.feed(ln.text.rstrip("\n") for ln in block)
        for ln in block:
            if record_line(ln.text.rstrip("\n")) is not None:
                self.records += 1
                continue
            self._line(_Line(ln.number, ln.stream, ln.text, ln.raw is None))

    def _line(self, line: _Line) -> None:
        text = line.text
        self.tails[line.stream].append(line)
        if self.pattern is not None and self.pattern.search(text):
            self.match_count += 1
            if len(self.matches) < 2_000:
                self.matches.append(line)
        if _is_error(text):
            for prev in self.before:
                self.context.setdefault(prev.n, prev)
            (self.errors_first if len(self.errors_first) < _KEEP_ERRORS else self.errors_last).append(line)
        elif text.strip():
            shape = text[:200].translate(_DIGITS)
            seen = self.shapes.get(shape)
            if seen is not None:
                self.shapes[shape] = seen + 1
                if seen + 1 > _RARE:
                    self.first_of.pop(shape, None)
            elif len(self.shapes) < _KEEP_TEMPLATES:
                self.shapes[shape] = 1
                self.first_of[shape] = line
            if len(self.head) < HEAD:
                self.head.append(line)
            else:
                self.plain.append(line)
        self.before.append(line)

    def finish(self) -> None:
        self.folds += self.detector.finish()
        self.folds.sort(key=lambda f: f.start)
        self._starts = [f.start for f in self.folds]

    def folded(self, n: int) -> Fold | None:
        i = bisect.bisect_right(self._starts, n) - 1
        return self.folds[i] if i >= 0 and self.folds[i].start <= n < self.folds[i].end else None

    def errors_in_order(self) -> list[_Line]:
        """Each error with its context, the first errors and the last ones before the middle ones."""
        with_context = []
        for line in [*self.errors_first, *self.errors_last]:
            with_context += [self.context[k] for k in range(line.n - CONTEXT, line.n) if k in self.context]
            with_context.append(line)
        return with_context[: 8 * (CONTEXT + 1)] + list(reversed(with_context[8 * (CONTEXT + 1):]))


class _Picker:
    """The lines chosen within the budget, tier by tier; the last chosen gives back first."""

    GAP_ALLOWANCE = 40  # the omission marker a shown line may open (the last ones give back what is over)

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.chosen: dict[int, _Line] = {}
        self.taken: list[int] = []  # in the order chosen: the last is the first to give back
        self.used = 0

    def take(self, lines: list[_Line], cap: int) -> bool:
        """Add *lines* in order while the budget and this tier's *cap* allow; False once full."""
        spent = 0
        for line in lines:
            if line.n in self.chosen:
                continue
            size = _size(line.shown()) + self.GAP_ALLOWANCE
            if self.used + size > self.budget or spent + size > cap:
                return False
            self.chosen[line.n] = line
            self.taken.append(line.n)
            self.used += size
            spent += size
        return True

    def fit(self, total: int, folds: list[Fold]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The shown lines and the items with their gaps said, within the budget: over by the
        gaps' words, the line chosen last goes back."""
        while True:
            shown = [self.chosen[n].shown() for n in sorted(self.chosen)]
            items = _with_gaps(shown, total, folds)
            if sum(_size(i) for i in items) <= self.budget or not self.taken:
                return shown, items
            self.chosen.pop(self.taken.pop())


def excerpt(store: Store, run: int, budget: int = DEFAULT_BUDGET, grep: str | None = None) -> dict[str, Any]:
    """The lines of *run* that matter, within *budget* bytes; see the module's words."""
    budget = max(MIN_BUDGET, min(int(budget), MAX_BUDGET))
    pattern = re.compile(grep) if grep else None
    summary = store.output_summary(run)
    total = summary["lines"]["stdout"] + summary["lines"]["stderr"]
    scan = _Scan(pattern)
    for start in range(0, total, _BLOCK):
        scan.feed(store.lines(run, start, _BLOCK))
    scan.finish()
    pick = _Picker(budget)
    pick.take(scan.matches, budget)
    pick.take(scan.errors_in_order(), budget * 6 // 10)
    for stream in ("stderr", "stdout"):  # its very last lines, then its last ones outside a dump
        last = list(reversed(scan.tails[stream]))
        pick.take(last[:LAST] + [ln for ln in last[LAST:] if scan.folded(ln.n) is None], budget // 5)
    rare = sorted((ln for ln in scan.first_of.values() if scan.folded(ln.n) is None), key=lambda ln: -ln.n)
    pick.take(rare, budget * 3 // 10)
    pick.take([ln for ln in scan.head if scan.folded(ln.n) is None or ln.n == 0], budget)
    pick.take([ln for ln in reversed(scan.plain) if scan.folded(ln.n) is None], budget)
    shown, items = pick.fit(total, scan.folds)
    return _said(run, budget, total, scan, pick, shown, items, grep)


def _said(run: int, budget: int, total: int, scan: _Scan, pick: _Picker, shown: list[dict[str, Any]],
          items: list[dict[str, Any]], grep: str | None) -> dict[str, Any]:
    """The excerpt as its reader gets it: the items, what was left out and how to read it."""
    folds = scan.folds
    left_out = total - len(shown) - scan.records
    out: dict[str, Any] = {
        "budget_bytes": budget,
        "bytes": sum(_size(i) for i in items),
        "lines_total": total,
        "lines_shown": len(shown),
        "record_lines": scan.records,
        "left_out": left_out,
        "lines": items,
        "folds": [{"lines": [f.start + 1, f.end], "what": f.label} for f in folds[:20]],
    }
    if len(folds) > 20:
        out["folds_more"] = len(folds) - 20
    if scan.pattern is not None:
        out["grep"] = {"pattern": grep, "matched": scan.match_count,
                       "shown": sum(1 for m in scan.matches if m.n in pick.chosen)}
    odd = sum(1 for i in items if i.get("utf8") is False)
    if odd:
        out["not_utf8"] = (f"{odd} shown line{'s' * (odd != 1)} not UTF-8 (shown with U+FFFD): run_output(run_id={run}, "
                           "start=N, count=1) gives the exact bytes in base64; `sleuth output RUN --raw` writes them all")
    if left_out > 0:
        out["read_more"] = (f"{left_out:,} line(s) are not shown (none is lost): run_output(run={run}, start=N, count=K) "
                            f"reads any range, run_output(run={run}, grep='REGEX') finds lines, stream='stderr' one stream")
    return out


def _with_gaps(shown: list[dict[str, Any]], total: int, folds: list[Fold]) -> list[dict[str, Any]]:
    """The shown lines with the gaps between them, each said: how many lines, which folds."""
    items: list[dict[str, Any]] = []
    prev = 0
    for item in shown:
        if item["n"] - 1 > prev:
            items.append(_gap(prev, item["n"] - 1, folds))
        items.append(item)
        prev = item["n"]
    if prev < total:
        items.append(_gap(prev, total, folds))
    return items


def _gap(after: int, upto: int, folds: list[Fold]) -> dict[str, Any]:
    """Lines after+1 .. upto (1-based, inclusive) left out, and the folds among them."""
    inside = [f for f in folds if f.start < upto and f.end > after]
    gap: dict[str, Any] = {"omitted": [after + 1, upto], "count": upto - after}
    if inside:
        gap["folds"] = [f"{f.label} (lines {f.start + 1}–{f.end})" for f in inside[:3]]
        if len(inside) > 3:
            gap["folds"].append(f"… and {len(inside) - 3} more")
    return gap

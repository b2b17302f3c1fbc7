"""The outline of a run's output for the viewer: which lines fold into one row (a JSON or
config dump, a repeated warning), how display rows map to line numbers, and how a line is
shown (carriage-return progress collapsed, tracebacks and errors marked).

Pure code, no Textual: :class:`FoldDetector` is fed lines in order (it may be fed from a
worker thread, block by block, while a run is still going) and returns the folds it closed;
:class:`Outline` holds the folds and maps rows ↔ lines with bisection, so a run of ten
million lines costs only its folds in memory.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Fold", "FoldDetector", "Outline", "display_text", "line_style", "record_line"]

MIN_DUMP_LINES = 8  # shorter blocks stay as they are
MAX_DUMP_LINES = 1_000_000  # an opener that never closes is not a dump
MIN_REPEATS = 3
MAX_PERIOD = 3  # a warning with its source line is a period of 2


@dataclass(frozen=True)
class Fold:
    start: int  # first line (inclusive)
    end: int  # last line + 1
    kind: str  # "dump" | "repeat"
    label: str

    @property
    def size(self) -> int:
        return self.end - self.start


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_DUMP_LINE = re.compile(
    r"""^\s*(?:
        "[^"]*"\s*:                 # "key": ...
      | [\]\}\)]+[,;]?\s*$          # closers
      | "[^"]*",?\s*$               # a string item
      | [-+]?[\d.]+(?:[eE][-+]?\d+)?,?\s*$   # a number item
      | (?:true|false|null|None|True|False),?\s*$
      | [A-Za-z_][\w.-]*\s*[:=]     # key: value / key = value (YAML, Python reprs)
      | [\[\{\(]\s*$                # an opener alone
    )""",
    re.X,
)


def _depth_delta(text: str) -> int:
    bare = _STRINGS.sub('""', text)
    return sum(bare.count(c) for c in "{[(") - sum(bare.count(c) for c in "}])")


class FoldDetector:
    """Finds folds in a stream of lines fed in order; keeps only a few lines of state."""

    def __init__(self) -> None:
        self.fed = 0
        # an open dump: start line, bracket depth, its first line
        self._dump: tuple[int, int, str] | None = None
        # an open repeat: start line, period, the cycle's first line; and the last few lines
        self._repeat: tuple[int, int, str] | None = None
        self._recent: list[str] = []

    def feed(self, texts: Iterable[str]) -> list[Fold]:
        out: list[Fold] = []
        for text in texts:
            n = self.fed
            self.fed += 1
            self._line(n, text, out)
            self._recent.append(text)
            if len(self._recent) > 2 * MAX_PERIOD:
                del self._recent[0]
        return out

    def finish(self) -> list[Fold]:
        """The run ended: close what is open (a dump that never closed is not folded)."""
        out: list[Fold] = []
        self._close_repeat(self.fed, out)
        self._dump = None
        return out

    # ---------------------------------------------------------------- internals

    def _line(self, n: int, text: str, out: list[Fold]) -> None:
        stripped = text.rstrip()
        if self._dump is not None:
            start, depth, first = self._dump
            if (not _DUMP_LINE.match(stripped) and stripped) or n - start > MAX_DUMP_LINES:
                self._dump = None  # not a dump after all: the lines stay as they are
            else:
                depth += _depth_delta(stripped)
                if depth <= 0:
                    self._dump = None
                    size = n + 1 - start
                    if size >= MIN_DUMP_LINES:
                        out.append(Fold(start, n + 1, "dump", f"{size:,} lines of JSON/config: {first.strip()[:60]}"))
                else:
                    self._dump = (start, depth, first)
                return
        if stripped.endswith(("{", "[")) and _depth_delta(stripped) > 0:
            self._close_repeat(n, out)
            self._dump = (n, _depth_delta(stripped), stripped)
            return
        self._repeats(n, text, out)

    def _repeats(self, n: int, text: str, out: list[Fold]) -> None:
        recent = self._recent
        if self._repeat is not None:
            period = self._repeat[1]
            if len(recent) >= period and recent[-period] == text:
                return
            self._close_repeat(n, out)
        for period in range(1, MAX_PERIOD + 1):
            # lines n-2p+1 .. n are two equal cycles of p lines
            if len(recent) >= 2 * period - 1 and recent[-period] == text and text.strip():
                if all(recent[-k] == recent[-k - period] for k in range(1, period)):
                    self._repeat = (n - 2 * period + 1, period, recent[-(2 * period - 1)])
                    return

    def _close_repeat(self, n: int, out: list[Fold]) -> None:
        if self._repeat is None:
            return
        start, period, first = self._repeat
        self._repeat = None
        cycles = (n - start) // period
        if cycles >= MIN_REPEATS:
            more = f" (+{period - 1} line{'s' if period > 2 else ''})" if period > 1 else ""
            out.append(Fold(start, start + cycles * period, "repeat", f"{_gist(first)}{more}  ×{cycles}"))


_GIST = re.compile(r"\b[A-Z]\w*(?:Warning|Error)\b.*")


def _gist(line: str) -> str:
    """A warning's category and message, without the long path before it."""
    m = _GIST.search(line)
    return (m.group(0) if m else line.strip())[:120]


class Outline:
    """Folds over a run's lines; rows are what the viewer shows (a collapsed fold is one row)."""

    def __init__(self) -> None:
        self.folds: list[Fold] = []  # sorted, non-overlapping
        self._starts: list[int] = []
        self.expanded: set[int] = set()  # starts of open folds
        self._rows: list[int] = []  # row of each collapsed fold
        self._hidden: list[int] = []  # lines hidden before each collapsed fold
        self._collapsed: list[Fold] = []
        self._collapsed_starts: list[int] = []
        self._hidden_total = 0

    def add(self, folds: Iterable[Fold]) -> None:
        new = sorted(folds, key=lambda f: f.start)
        if not new:
            return
        if self.folds and new[0].start < self.folds[-1].end:
            self.folds = sorted(self.folds + new, key=lambda f: f.start)
            self._starts = [f.start for f in self.folds]
            self._reindex()
            return
        # the usual case, a scan moving forward: extend the indexes, no rebuild
        for f in new:
            self.folds.append(f)
            self._starts.append(f.start)
            self._collapsed.append(f)
            self._collapsed_starts.append(f.start)
            self._rows.append(f.start - self._hidden_total)
            self._hidden.append(self._hidden_total)
            self._hidden_total += f.size - 1

    def _reindex(self) -> None:
        self._collapsed = [f for f in self.folds if f.start not in self.expanded]
        self._collapsed_starts = [f.start for f in self._collapsed]
        self._rows, self._hidden = [], []
        hidden = 0
        for f in self._collapsed:
            self._rows.append(f.start - hidden)
            self._hidden.append(hidden)
            hidden += f.size - 1
        self._hidden_total = hidden

    def fold_at(self, line: int) -> Fold | None:
        """The fold that holds *line*, open or not."""
        i = bisect.bisect_right(self._starts, line) - 1
        if i >= 0 and self.folds[i].start <= line < self.folds[i].end:
            return self.folds[i]
        return None

    def toggle(self, fold: Fold) -> None:
        self.expanded ^= {fold.start}
        self._reindex()

    def expand_around(self, line: int) -> bool:
        """Open the fold that hides *line* (a search hit); True if one was opened."""
        fold = self.fold_at(line)
        if fold is not None and fold.start not in self.expanded and line != fold.start:
            self.toggle(fold)
            return True
        return False

    def rows(self, total_lines: int) -> int:
        """Rows for *total_lines* lines (folds only ever cover lines already seen)."""
        return max(total_lines - self._hidden_total, 0)

    def at_row(self, row: int) -> tuple[int, Fold | None]:
        """(line, fold) shown at *row*: fold is set when the row is a collapsed fold."""
        i = bisect.bisect_right(self._rows, row) - 1
        if i < 0:
            return row, None
        f = self._collapsed[i]
        if row == self._rows[i]:
            return f.start, f
        return row + self._hidden[i] + f.size - 1, None

    def row_of(self, line: int) -> int:
        """The row that shows *line* (the fold's row if a collapsed fold hides it)."""
        i = bisect.bisect_right(self._collapsed_starts, line) - 1
        if i < 0:
            return line
        f = self._collapsed[i]
        if line < f.end:
            return self._rows[i]
        return line - self._hidden[i] - (f.size - 1)


_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):")
_FRAME = re.compile(r'^\s+File "[^"]*", line \d+')
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure|Failed|Timeout)\b(?::|$)")
_ERRORISH = re.compile(r"\b(?:ERROR|FATAL|FAILED|Error:|error:|CUDA error|Segmentation fault|Killed)\b")
_WARNING = re.compile(r"\b\w*Warning\b|\bWARNING\b|\bwarn\(")


_RECORD = re.compile(r"^@@sleuth:[0-9a-f]+ ")


def record_line(text: str) -> str | None:
    """The JSON of a probe's record line (``@@sleuth:<nonce> {...}``), else None."""
    m = _RECORD.match(text)
    return text[m.end() :] if m else None


def line_style(text: str) -> str:
    """'record', 'error', 'traceback', 'warning' or '' for one line (as shown)."""
    if _RECORD.match(text):
        return "record"
    if _TRACEBACK.match(text) or _EXCEPTION.match(text):
        return "error"
    if _FRAME.match(text):
        return "traceback"
    if _ERRORISH.search(text):
        return "error"
    if _WARNING.search(text):
        return "warning"
    return ""


def display_text(text: str) -> tuple[str, int]:
    """What a terminal would show of *text*: the last carriage-return segment, and how many
    earlier updates it replaced (a progress bar's 200 redraws become one line)."""
    if "\r" not in text:
        return text, 0
    parts = text.split("\r")
    shown = next((p for p in reversed(parts) if p), "")
    return shown, sum(1 for p in parts if p) - 1

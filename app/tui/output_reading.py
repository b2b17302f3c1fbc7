"""The output view's reads of the session store, without Textual: the lines on screen in
cached blocks, the fold scan of a run (also while it is written) and the search with its
hit count — the scan and the search each on a read-only connection of their own, called from
a thread worker and answering through plain callbacks."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...sessions import OutputLine, Store
from ..outline import Fold, FoldDetector, display_text

__all__ = ["BLOCK", "CACHE_BLOCKS", "SCAN_BLOCK", "LineBlocks", "count_hits", "find_hit", "lines_in", "scan_folds"]

BLOCK = 256  # lines read from the store at a time
CACHE_BLOCKS = 64  # at most this many blocks kept: memory does not grow with the run
SCAN_BLOCK = 2_000  # lines per step of the fold scan (~20 ms of the GIL)


def lines_in(summary: dict[str, Any], stream: str | None) -> int:
    """The lines of one stream, or of both, in a run's output summary."""
    lines = summary["lines"]
    return lines[stream] if stream else lines["stdout"] + lines["stderr"]


class LineBlocks:
    """A run's lines as read from the store, BLOCK at a time; the CACHE_BLOCKS used last kept."""

    def __init__(self) -> None:
        self._blocks: OrderedDict[int, list[OutputLine]] = OrderedDict()

    def clear(self) -> None:
        self._blocks.clear()

    def drop_last(self, total: int) -> None:
        """Forget the block that holds the last of *total* lines (a live run's last line may still grow)."""
        self._blocks.pop(max(total - 1, 0) // BLOCK, None)

    def _block(self, number: int, read: Callable[[int, int], list[OutputLine]]) -> list[OutputLine]:
        if number in self._blocks:
            self._blocks.move_to_end(number)
            return self._blocks[number]
        lines = read(number * BLOCK, BLOCK)
        self._blocks[number] = lines
        if len(self._blocks) > CACHE_BLOCKS:
            self._blocks.popitem(last=False)
        return lines

    def line(self, number: int, read: Callable[[int, int], list[OutputLine]]) -> OutputLine | None:
        """Line *number*; *read(start, count)* reads a block that is not kept."""
        block = self._block(number // BLOCK, read)
        index = number - (number // BLOCK) * BLOCK
        if index < len(block) and block[index].number == number:
            return block[index]
        return next((ln for ln in block if ln.number == number), None)


def scan_folds(session: Path, run: int, stream: str | None, *, cancelled: Callable[[], bool],
               busy: Callable[[], bool], found: Callable[[list[Fold]], None]) -> None:
    """Feed *run*'s lines to a :class:`FoldDetector`, SCAN_BLOCK at a time, until the run is
    complete and read or *cancelled*; the folds go to *found* as they are detected. While
    *busy* (the user moves, searches) the scan waits."""
    detector = FoldDetector()
    with Store.open(session, readonly=True) as ro:
        while not cancelled():
            summary = ro.output_summary(run)
            total = lines_in(summary, stream)
            # a live run's last line may still grow: leave it for the next round
            ready = total if summary["complete"] else max(total - 1, 0)
            while detector.fed < ready and not cancelled():
                while busy() and not cancelled():
                    time.sleep(0.05)
                count = min(SCAN_BLOCK, ready - detector.fed)
                texts = [display_text(ln.text)[0] for ln in ro.lines(run, detector.fed, count, stream=stream)]
                if not texts:
                    break
                folds = detector.feed(texts)
                if folds:
                    found(folds)
            if summary["complete"] and detector.fed >= total:
                folds = detector.finish()
                if folds:
                    found(folds)
                return
            time.sleep(0.2)


def find_hit(
    session: Path, run: int, stream: str | None, term: str, start: int, backwards: bool, ignore_case: bool
) -> tuple[int | None, bool]:
    """(the next line with *term* after line *start*, or before it *backwards*; whether the
    search wrapped around the run's end)."""
    with Store.open(session, readonly=True) as ro:
        if backwards:
            line = ro.find(run, term, start, stream=stream, backwards=True, ignore_case=ignore_case)
            wrapped = line is None
            if wrapped:
                line = ro.find(run, term, 1 << 62, stream=stream, backwards=True, ignore_case=ignore_case)
        else:
            line = ro.find(run, term, start + 1, stream=stream, ignore_case=ignore_case)
            wrapped = line is None
            if wrapped:
                line = ro.find(run, term, 0, stream=stream, ignore_case=ignore_case)
    return line, wrapped


def count_hits(session: Path, run: int, stream: str | None, term: str, line: int, ignore_case: bool,
               budget_s: float = 1.0) -> tuple[int, int, bool]:
    """(ordinal of the hit on *line*, lines with a hit, whether there are more than counted):
    the header's "3/17". Each find resumes where the last stopped: one pass over the run,
    cut short after *budget_s* (then "3/500+")."""
    end = time.monotonic() + budget_s
    count = ordinal = 0
    at = 0
    with Store.open(session, readonly=True) as ro:
        while True:
            found = ro.find(run, term, at, stream=stream, ignore_case=ignore_case)
            if found is None:
                return ordinal, count, False
            count += 1
            if found <= line:
                ordinal = count
            at = found + 1
            if time.monotonic() > end and found > line:
                return ordinal, count, True

"""Reading a run's stored output line by line, the one way every front end does: `sleuth
output` (app/session_cli.py), the MCP tool `run_output` (app/mcp_server/runs.py). The store
reads any window of a huge run at the same cost; this walks it in blocks and filters."""

from __future__ import annotations

import re
from collections.abc import Iterator

from .output_index import OutputIndex, OutputLine

__all__ = ["BLOCK_LINES", "line_total", "matching_lines"]

BLOCK_LINES = 10_000  # lines read from the store at a time


def line_total(store: OutputIndex, run: int, stream: str | None = None) -> int:
    """How many lines the run's output has: of *stream*, or of both."""
    counts: dict[str, int] = store.output_summary(run)["lines"]
    return counts[stream] if stream else sum(counts.values())


def matching_lines(store: OutputIndex, run: int, start: int = 0, stream: str | None = None,
                   pattern: re.Pattern[str] | None = None) -> Iterator[OutputLine]:
    """The run's output lines from line *start* (0-based; of *stream*, else both as they came),
    each an :class:`OutputLine`; with *pattern*, only the lines whose text (without its newline) it
    matches. A consumer that has its page stops iterating; nothing past it is read."""
    total = line_total(store, run, stream)
    n = start
    while n < total:
        block = store.lines(run, n, BLOCK_LINES, stream=stream)
        if not block:
            return
        for ln in block:
            n = ln.number + 1
            if pattern is None or pattern.search(ln.text.rstrip("\n")):
                yield ln

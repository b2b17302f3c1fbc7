"""The output index: a run's captured output read back from the session file's ``chunks`` and
``outputs`` tables (see sessions/store.py for the schema): summaries, bytes, windows of lines
found through the line index, and search.

``OutputIndex`` holds only the reads; :class:`sessions.store.Store` is one, on the session's
own connection (the capture writer, sessions/capture.py, fills the tables).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["OutputIndex", "OutputLine", "STREAMS"]

STREAMS = ("stdout", "stderr")  # chunks.stream is an index into this


@dataclass(frozen=True)
class OutputLine:
    number: int  # 0-based, over the run's merged output
    stream: str
    ts: float
    text: str  # the line's bytes as UTF-8, without its newline; U+FFFD where they are not UTF-8 (then see raw)
    raw: bytes | None = None  # the line's exact bytes, only when they are not UTF-8
    newline: bool = True  # False for a last line the run ended without a newline (or one still being written)


class OutputIndex:
    """The reads of captured output, over ``self.conn`` (the session file's connection)."""

    conn: sqlite3.Connection

    def output_summary(self, run: int) -> dict[str, Any]:
        row = self.conn.execute(
            "SELECT bytes, stdout_lines, stderr_lines, complete FROM outputs WHERE run = ?", (run,)
        ).fetchone()
        if row is None:
            return {"bytes": 0, "lines": {"stdout": 0, "stderr": 0}, "complete": False}
        return {"bytes": row[0], "lines": {"stdout": row[1], "stderr": row[2]}, "complete": bool(row[3])}

    def output_chunks(self, run: int) -> Iterator[tuple[str, float, bytes]]:
        for stream, ts, data in self.conn.execute(
            "SELECT stream, ts, data FROM chunks WHERE run = ? ORDER BY seq", (run,)
        ):
            yield STREAMS[stream], ts, bytes(data)

    def output_bytes(self, run: int, stream: str | None = None) -> bytes:
        return b"".join(d for s, _, d in self.output_chunks(run) if stream in (None, s))

    def line_count(self, run: int, stream: str | None = None) -> int:
        summary = self.output_summary(run)["lines"]
        return summary[stream] if stream else summary["stdout"] + summary["stderr"]

    def lines(self, run: int, start: int, count: int, stream: str | None = None) -> list[OutputLine]:
        """Lines [start, start+count) of a run's output (merged, or one stream's), read on demand.

        The line index finds the chunk where line *start* begins; only the chunks from there
        to the last wanted line are read, so any window of a huge run costs the same.
        """
        if count <= 0:
            return []
        end = start + count
        col, where, args = "line0", "", (run,)
        if stream is not None:
            col, where, args = "sline0", " AND stream = ?", (run, STREAMS.index(stream))
        first = self.conn.execute(
            f"SELECT seq FROM chunks WHERE run = ?{where} AND {col} <= ? AND nlines > 0 "
            f"ORDER BY {col} DESC, seq DESC LIMIT 1",
            (*args, start),
        ).fetchone()
        if first is None:
            return []
        rows = self.conn.execute(
            f"SELECT stream, ts, {col}, nlines, starts_mid, data FROM chunks "
            f"WHERE run = ?{where} AND seq >= ? ORDER BY seq",
            (*args, first[0]),
        )
        got: dict[int, OutputLine] = {}
        pending: dict[int, tuple[int, float, bytearray]] = {}  # stream -> a wanted line still open

        def finish(s: int, newline: bool = True) -> None:
            n, t, buf = pending.pop(s)
            got[n] = _line(n, STREAMS[s], t, bytes(buf), newline)

        for s, ts, line0, nlines, starts_mid, data in rows:
            pieces = bytes(data).split(b"\n")
            if starts_mid:
                head = pieces.pop(0)
                if s in pending:
                    pending[s][2].extend(head)
                    if pieces:  # this chunk holds the newline that ends it
                        finish(s)
                if not pieces:
                    continue
            # pieces[k] is line line0 + k; the last piece is the start of a line still open
            whole = len(pieces) - 1
            for k in range(max(start - line0, 0), min(end - line0, whole)):
                got[line0 + k] = _line(line0 + k, STREAMS[s], ts, pieces[k])
            last = line0 + whole
            if pieces[-1] and start <= last < end:
                pending[s] = (last, ts, bytearray(pieces[-1]))
            if line0 + nlines >= end and not pending:
                break
        else:
            for s in list(pending):
                finish(s, newline=False)
        return [got[n] for n in range(start, end) if n in got]

    def find(
        self, run: int, needle: str, start: int = 0, stream: str | None = None, backwards: bool = False,
        ignore_case: bool = False,
    ) -> int | None:
        """The first line at or after *start* (before it, *backwards*) that contains *needle*.

        Scans the stored chunks with ``bytes.find`` and counts newlines only where a hit is, so
        a search over a huge run reads each byte once, as grep does. Line numbers are over
        the merged output, or over one stream's lines when *stream* is given (as ``lines``).
        """
        want = needle.encode("utf-8")
        if not want or b"\n" in want:
            return None
        if ignore_case:
            want = want.lower()
        scan = _Scan(self.conn, run, stream, want, start, bytes.lower if ignore_case else bytes)
        anchor = self.conn.execute(
            f"SELECT seq FROM chunks WHERE run = ?{scan.where} AND {scan.col} <= ? ORDER BY {scan.col} DESC, seq DESC LIMIT 1",
            (*scan.args, start),
        ).fetchone()
        first_seq = anchor[0] if anchor else 0
        return scan.backwards(first_seq) if backwards else scan.forwards(first_seq)


class _Scan:
    """One search of one run's chunks for *want* (already case-folded by *fold*), from line
    *start*: the query's column (merged or one stream's line numbers) and the two directions."""

    def __init__(self, conn: sqlite3.Connection, run: int, stream: str | None, want: bytes, start: int,
                 fold: Callable[[bytes], bytes]) -> None:
        self.conn, self.run, self.stream, self.want, self.start, self.fold = conn, run, stream, want, start, fold
        self.col, self.where, self.args = "line0", "", (run,)
        if stream is not None:
            self.col, self.where, self.args = "sline0", " AND stream = ?", (run, STREAMS.index(stream))

    def opened_before(self, seq: int, s: int) -> int:
        """The number of stream s's line that a chunk starting mid-line continues."""
        row = self.conn.execute(
            f"SELECT {self.col} + nlines - 1 FROM chunks WHERE run = ? AND stream = ? AND seq < ? AND nlines > 0 "
            "ORDER BY seq DESC LIMIT 1",
            (self.run, s, seq),
        ).fetchone()
        return row[0] if row else -1

    def backwards(self, first_seq: int) -> int | None:
        """The last line before *start* with a hit (the anchor chunk is *first_seq*)."""
        col, where, args, want, start, fold = self.col, self.where, self.args, self.want, self.start, self.fold
        opened_before = self.opened_before
        # From the last chunk: a chunk after the anchor starts lines past *start*, but its
        # head (up to its first newline) may continue a line before it, so those heads are
        # read too (only them: SQLite cuts the blob at the newline).
        rows = self.conn.execute(
            f"SELECT seq, stream, {col}, nlines, starts_mid, "
            "CASE WHEN seq <= ? OR starts_mid = 0 THEN data "
            "     WHEN instr(data, x'0a') = 0 THEN data "
            "     ELSE substr(data, 1, max(instr(data, x'0a'), ?)) END "
            f"FROM chunks WHERE run = ?{where} ORDER BY seq DESC",
            (first_seq, len(want), *args),
        )
        # Chunks come newest first; a chunk's continuation of an older line can hold a lower
        # line than an older chunk's, so stop only once no older chunk can do better.
        best: int | None = None
        newer: dict[int, bytes] = {}  # stream -> head of its newer chunk, when that one starts mid-line
        keep = len(want) - 1

        def offer(line: int) -> None:
            nonlocal best
            if line < start and (best is None or line > best):
                best = line

        for seq, s, line0, nlines, starts_mid, blob in rows:
            if best is not None and best >= line0 + nlines - 1:  # this chunk's last line, and older ones' are lower
                break
            data = fold(bytes(blob))
            if keep and s in newer:  # a hit that ends in the newer chunk
                joined = data[-keep:] + newer[s]
                pos = joined.find(want)
                if pos != -1 and pos + len(want) > min(keep, len(data)):
                    last = len(data) - 1
                    carried = opened_before(seq, s) if starts_mid and data.find(b"\n") == -1 else -1
                    offer(_line_at(data, last, line0, bool(starts_mid), carried))
            pos = data.rfind(want)
            while pos != -1:
                carried = opened_before(seq, s) if starts_mid and data.find(b"\n", 0, pos) == -1 else -1
                line = _line_at(data, pos, line0, bool(starts_mid), carried)
                if line < start:
                    offer(line)
                    break
                pos = data.rfind(want, 0, pos + len(want) - 1) if pos else -1
            if keep:  # the stream's next bytes after this chunk's start (may span chunks)
                newer[s] = (data + newer.get(s, b""))[:keep]
        return best

    def forwards(self, first_seq: int) -> int | None:
        """The first line at or after *start* with a hit (the anchor chunk is *first_seq*)."""
        col, where, args, want, start, fold = self.col, self.where, self.args, self.want, self.start, self.fold
        run, stream, opened_before = self.run, self.stream, self.opened_before
        rows = self.conn.execute(
            f"SELECT seq, stream, {col}, nlines, starts_mid, data FROM chunks WHERE run = ?{where} AND seq >= ? "
            "ORDER BY seq",
            (*args, first_seq),
        )
        keep = len(want) - 1
        # Chunks come in arrival order, but a later chunk can continue a line that opened
        # earlier (a lower number): keep the lowest hit, and stop once no stream has a line
        # open that is lower than it.
        open_line: dict[int, int] = {}  # stream -> its line still open where its last chunk ended
        tail: dict[int, bytes] = {}  # stream -> its last bytes, for a hit across chunks
        streams = [STREAMS.index(stream)] if stream is not None else [0, 1]
        for s in streams:  # what each stream had open just before the anchor
            prev = self.conn.execute(
                f"SELECT seq, {col}, nlines, substr(data, -?) FROM chunks WHERE run = ? AND stream = ? AND seq < ? "
                "ORDER BY seq DESC LIMIT 1",
                (max(keep, 1), run, s, first_seq),
            ).fetchone()
            if prev is not None and not bytes(prev[3]).endswith(b"\n"):
                open_line[s] = prev[1] + prev[2] - 1 if prev[2] else opened_before(prev[0] + 1, s)
                tail[s] = fold(bytes(prev[3]))[-keep:] if keep else b""
        best: int | None = None
        for _seq, s, line0, nlines, starts_mid, blob in rows:
            data = fold(bytes(blob))
            carried = open_line.get(s, -1) if starts_mid else -1
            if starts_mid and keep and s in tail:  # a hit that starts in an earlier chunk
                joined = tail[s] + data[:keep]
                pos = joined.find(want)
                if pos != -1 and pos < len(tail[s]) and carried >= start:
                    best = carried if best is None else min(best, carried)
            pos = data.find(want)
            while pos != -1:
                line = _line_at(data, pos, line0, bool(starts_mid), carried)
                if line >= start:  # lines rise through a chunk: the first one here is its lowest
                    best = line if best is None else min(best, line)
                    break
                pos = data.find(want, pos + 1)
            if data.endswith(b"\n"):
                open_line.pop(s, None)
                tail.pop(s, None)
            else:
                open_line[s] = line0 + nlines - 1 if nlines else carried
                tail[s] = (tail.get(s, b"") + data)[-keep:] if keep else b""  # may span chunks
            if best is not None and all(n >= best for n in open_line.values()):
                break
        return best


def _line(n: int, stream: str, ts: float, data: bytes, newline: bool = True) -> OutputLine:
    """One stored line as text; bytes that are not UTF-8 are kept beside it, never lost in U+FFFD."""
    try:
        return OutputLine(n, stream, ts, data.decode("utf-8"), None, newline)
    except UnicodeDecodeError:
        return OutputLine(n, stream, ts, data.decode("utf-8", "replace"), data, newline)


def _line_at(data: bytes, pos: int, line0: int, starts_mid: bool, carried: int) -> int:
    """The line number of byte *pos* of a chunk (see the chunks table for line0/starts_mid)."""
    k = data.count(b"\n", 0, pos)
    if not starts_mid:
        return line0 + k
    return carried if k == 0 else line0 + k - 1

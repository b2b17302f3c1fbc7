"""Capture: one run's output streamed into the session store as it arrives.

Small reads are coalesced into rows of up to 1 MiB or 50 ms of output, each row carries its
line index (first line overall and within its stream, lines starting in it, whether it
starts mid-line), and rows commit in small batches; secrets are redacted on the way in
(a trailing run of token characters waits for the next chunk, so a split secret is caught).

Redaction and the inserts run in a writer thread of the capture's own, on its own SQLite
connection (WAL: one writer at a time, readers never wait), so the event loop goes on
reading the transport meanwhile: one pass over each byte, off the loop. The counts
(``lines``, ``bytes``) wait for the writer to catch up before they answer.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
import time
from typing import TYPE_CHECKING

from .output_index import STREAMS
from .store import _tune

if TYPE_CHECKING:
    from .store import Store

__all__ = ["CaptureWriter"]


class CaptureWriter:
    """Streams one run's output into the store, chunk by chunk, as it arrives."""

    COMMIT_EVERY_S = 0.1
    COMMIT_EVERY_BYTES = 8 << 20
    # Small reads are joined into one row of up to 1 MiB or 50 ms of output: a row per
    # 64 KiB read would make SQLite the bottleneck (measured: 80 MB/s vs ssh's 170).
    COALESCE_BYTES = 1 << 20
    COALESCE_S = 0.05
    CHECKPOINT_AFTER_BYTES = 16 << 20
    # Output beyond this goes through the writer thread (redaction and inserts off the loop).
    THREAD_FROM_BYTES = 1 << 20
    BATCH_BYTES = 8 << 20  # rows searched for secrets together when the writer is behind

    def __init__(self, store: Store, run: int, threaded: bool = True) -> None:
        self.store = store
        self.run = run
        self.conn = store.conn
        self._queue: queue.SimpleQueue | None = queue.SimpleQueue() if threaded else None
        self._thread: threading.Thread | None = None
        self._failed: BaseException | None = None
        self._seq = 0
        self._line0 = 0
        self._slines = [0, 0]
        self._mid = [False, False]  # does the stream's last chunk end mid-line?
        self._carry = [b"", b""]
        self._pending: list[list[bytes]] = [[], []]
        self._pending_len = [0, 0]
        self._pending_ts = [0.0, 0.0]
        self._last_write = 0.0
        self._bytes = 0
        self._uncommitted = 0
        self._last_commit = time.monotonic()
        self._in_tx = False
        self.conn.execute("INSERT OR REPLACE INTO outputs (run) VALUES (?)", (run,))

    @property
    def lines(self) -> dict[str, int]:
        """Lines stored per stream, a last line without its newline included; bytes held back
        for the redactor (see flush) that begin a line count as that line already."""
        self._drain()
        return {name: self._slines[s] + (1 if self._carry[s] and not self._mid[s] else 0)
                for s, name in ((0, "stdout"), (1, "stderr"))}

    @property
    def bytes(self) -> int:
        self._drain()
        return self._bytes

    # ---------------------------------------------------------------- the writer thread

    def _put(self, item: tuple) -> None:
        if self._queue is None:
            self._do(item)
            return
        if self._thread is None and self._bytes < self.THREAD_FROM_BYTES:
            # the first MiB (all of most probes' output) is stored and committed right here: a
            # thread of its own costs more to start than these inserts (16 of them for a fleet)
            self._do(item)
            self._commit()
            return
        if self._thread is None:
            self._commit()  # what was stored here is committed before the writer's connection takes over
            self._thread = threading.Thread(target=self._work, name=f"capture-run-{self.run}", daemon=True)
            self._thread.start()
        self._queue.put(item)

    def _work(self) -> None:
        assert self._queue is not None
        self.conn = sqlite3.connect(self.store.path, isolation_level=None, check_same_thread=False)
        _tune(self.conn)
        held: tuple | None = None
        try:
            while True:
                item, held = (held, None) if held is not None else (self._queue.get(), None)
                if item[0] == "stop":
                    self._commit()
                    item[1].set()
                    return
                try:
                    if item[0] == "data":
                        # When the writer is behind, the rows waiting are searched for secrets
                        # in one go (each search lets go of the GIL and must get it back: once
                        # for the lot, not once per row), then stored as the rows they are.
                        rows = [item]
                        size = len(item[2])
                        while size < self.BATCH_BYTES:
                            try:
                                nxt = self._queue.get_nowait()
                            except queue.Empty:
                                break
                            if nxt[0] != "data":
                                held = nxt
                                break
                            rows.append(nxt)
                            size += len(nxt[2])
                        self._store_rows(rows)
                    else:
                        self._do(item)
                except BaseException as exc:  # kept for the loop side: said at close, never lost silently
                    self._failed = self._failed or exc
                    if item[0] == "sync":
                        item[1].set()
        finally:
            self.conn.close()

    def _store_rows(self, rows: list[tuple]) -> None:
        red = self.store.redactor
        clean = len(rows) > 1 and not red.finds_any(b"".join(r[2] for r in rows))
        for _kind, s, data, ts, _exact in rows:
            self._store(s, data if clean else red.redact_bytes(data), ts)

    def _do(self, item: tuple) -> None:
        kind = item[0]
        if kind == "data":
            _kind, s, data, ts, exact = item
            self._store(s, self.store.redactor.redact_bytes(data), ts)
        elif kind == "commit":
            self._commit()
        elif kind == "sync":
            self._commit()
            item[1].set()

    def _drain(self) -> None:
        """Wait until the writer has stored and committed everything given so far."""
        if self._queue is None or self._thread is None or not self._thread.is_alive():
            return
        done = threading.Event()
        self._queue.put(("sync", done))
        done.wait()
        if self._failed is not None:
            failed, self._failed = self._failed, None
            raise failed

    def write(self, stream: str, data: bytes, ts: float | None = None) -> None:
        """Take bytes as they arrive; they reach the store within COALESCE_S (or at flush)."""
        s = STREAMS.index(stream)
        now = time.time() if ts is None else ts
        self._last_write = now
        if not self._pending[s]:
            self._pending_ts[s] = now
        self._pending[s].append(data)
        self._pending_len[s] += len(data)
        other = 1 - s
        if self._pending[other]:
            self._emit(other)  # keep the streams' order as it arrived
        if self._pending_len[s] >= self.COALESCE_BYTES or now - self._pending_ts[s] >= self.COALESCE_S:
            self._emit(s)

    def write_exact(self, stream: str, data: bytes, ts: float) -> None:
        """Store *data* as one chunk, as given (import of an export keeps chunk boundaries,
        so a second export is identical); still redacted."""
        s = STREAMS.index(stream)
        for other in (0, 1):
            if self._pending[other] or self._carry[other]:
                self._emit(other, final=True)
        self._put(("data", s, data, ts, True))

    def _emit(self, s: int, final: bool = False) -> None:
        red = self.store.redactor
        pieces = self._pending[s]
        if self._carry[s]:
            pieces.insert(0, self._carry[s])
        self._pending[s], self._pending_len[s] = [], 0
        self._carry[s] = b""
        if not final and pieces:
            # Where a secret could straddle the cut is decided within the last read when it
            # is longer than the holdback (split_safe looks no further back): only that read
            # is sliced, not the whole row (one copy of each byte instead of two).
            if len(pieces[-1]) < red.holdback:
                pieces = [b"".join(pieces)]
            last = pieces[-1]
            cut = red.split_safe(last)
            if cut < len(last):
                self._carry[s] = last[cut:]
                pieces[-1] = last[:cut]
        data = b"".join(pieces)
        if data:
            self._put(("data", s, data, self._pending_ts[s], False))

    def flush(self, final: bool = False) -> None:
        """Write what has arrived and commit. A few trailing bytes that a secret could
        continue stay held until more arrive, the stream pauses (0.5 s), or *final*."""
        idle = time.time() - self._last_write > 0.5
        for s in (0, 1):
            if self._pending[s] or (self._carry[s] and (final or idle)):
                self._emit(s, final=final or idle)
        self._put(("commit",))

    def close(self, complete: bool = True) -> dict[str, int]:
        self.flush(final=True)
        if self._thread is not None and self._queue is not None:
            done = threading.Event()
            self._queue.put(("stop", done))
            done.wait()
            self._thread.join()
            self._thread = None
            self.conn = self.store.conn
            if self._failed is not None:
                failed, self._failed = self._failed, None
                raise failed
        self.conn.execute(
            "UPDATE outputs SET bytes = ?, stdout_lines = ?, stderr_lines = ?, complete = ? WHERE run = ?",
            (self._bytes, self._slines[0], self._slines[1], int(complete), self.run),
        )
        if self._bytes > self.CHECKPOINT_AFTER_BYTES:
            self.store.checkpoint_soon()
        return self.lines

    def _store(self, s: int, data: bytes, ts: float) -> None:
        if not data:
            return
        starts_mid = self._mid[s]
        ends_mid = not data.endswith(b"\n")
        nlines = data.count(b"\n") + (1 if ends_mid else 0) - (1 if starts_mid else 0)
        if not self._in_tx:
            self.conn.execute("BEGIN")
            self._in_tx = True
        self.conn.execute(
            "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (self.run, self._seq, s, ts, self._line0, self._slines[s], nlines, int(starts_mid), data),
        )
        self._seq += 1
        self._line0 += nlines
        self._slines[s] += nlines
        self._mid[s] = ends_mid
        self._bytes += len(data)
        self._uncommitted += len(data)
        now = time.monotonic()
        if self._uncommitted >= self.COMMIT_EVERY_BYTES or now - self._last_commit >= self.COMMIT_EVERY_S:
            self._commit()

    def _commit(self) -> None:
        if self._in_tx:
            self.conn.execute(
                "UPDATE outputs SET bytes = ?, stdout_lines = ?, stderr_lines = ? WHERE run = ?",
                (self._bytes, self._slines[0], self._slines[1], self.run),
            )
            self.conn.execute("COMMIT")
            self._in_tx = False
        self._uncommitted = 0
        self._last_commit = time.monotonic()

"""The session store: one SQLite file per investigation — opening it, its schema, and the
event log. The captured output's reads (summaries, lines, search) are the output index,
sessions/output_index.py; a ``Store`` is both, on one connection.

Tables:
    meta      format marker and schema version
    events    append-only (triggers refuse UPDATE and DELETE); one row per event
    chunks    captured output exactly as it arrived: run, order, stream, time, bytes, and
              the line index of the chunk (first line number overall and within its stream,
              how many lines start in it, whether it starts mid-line)
    outputs   per run: bytes and lines per stream, whether capture finished

Each event says who wrote it (``events.author``: "ui", "cli", "mcp:<client>", …): one
session, many hands — the UI, the CLI in another terminal, a coding agent through
``sleuth mcp``. Schema 1 files (before authors) gain the column when opened for writing;
their old events say "" (not recorded).

Events commit one by one, so a writer killed at any moment leaves every committed event.
Output chunks commit in small batches (at most ``CaptureWriter.COMMIT_EVERY_S`` late).

Exceptions:
    StoreError      the file is missing, not a sleuth session, from a newer sleuth, or
                    corrupt; ``str()`` names the file and what to do
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..hypotheses import Event

if TYPE_CHECKING:
    from .capture import CaptureWriter

from .errors import StoreError
from .output_index import OutputIndex
from .redact import Redactor

__all__ = ["Store", "StoreError", "SCHEMA_VERSION", "author_as", "clean_author", "set_author"]

SCHEMA_VERSION = 2
FORMAT = "sleuth-session"

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE events (
    seq  INTEGER PRIMARY KEY,
    ts   REAL NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    author TEXT NOT NULL DEFAULT ''
);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TABLE chunks (
    run       INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    stream    INTEGER NOT NULL,
    ts        REAL NOT NULL,
    line0     INTEGER NOT NULL,
    sline0    INTEGER NOT NULL,
    nlines    INTEGER NOT NULL,
    starts_mid INTEGER NOT NULL,
    data      BLOB NOT NULL,
    PRIMARY KEY (run, seq)
);
CREATE INDEX chunks_line ON chunks (run, line0);
CREATE INDEX chunks_stream_line ON chunks (run, stream, sline0);
CREATE TABLE outputs (
    run      INTEGER PRIMARY KEY,
    bytes    INTEGER NOT NULL DEFAULT 0,
    stdout_lines INTEGER NOT NULL DEFAULT 0,
    stderr_lines INTEGER NOT NULL DEFAULT 0,
    complete INTEGER NOT NULL DEFAULT 0
);
"""


_SQLITE_MAGIC = b"SQLite format 3\x00"
_OPEN: dict[Path, int] = {}  # session files this process has a Store open on, and how many
_AUTHOR = [""]  # this process's default author (set_author); a Store may carry its own


def set_author(name: str) -> None:
    """Who this process's events are written by, unless a store is given its own (the CLI
    says "cli", the UI "ui", the MCP server "mcp:<client name>" per request)."""
    _AUTHOR[0] = clean_author(name)


@contextmanager
def author_as(name: str) -> Iterator[None]:
    """set_author for a block (a command run in-process, as tests do, leaves nothing behind)."""
    before = _AUTHOR[0]
    set_author(name)
    try:
        yield
    finally:
        _AUTHOR[0] = before


def clean_author(name: str) -> str:
    """An author as stored: printable, one line, at most 80 characters (an MCP client names
    itself: its words are not trusted to be short or plain)."""
    text = "".join(ch if ch.isprintable() else "?" for ch in str(name)).strip()
    return text[:80]


class Store(OutputIndex):
    """Open with :meth:`create` or :meth:`open`; ``readonly=True`` for replay. The event log
    is here; reading a run's output (``lines``, ``find``, …) comes from :class:`OutputIndex`."""

    def __init__(self, path: Path, conn: sqlite3.Connection, readonly: bool, redactor: Redactor) -> None:
        self.path = path
        self.conn = conn
        self.readonly = readonly
        self.redactor = redactor
        self._closed = False
        self._in_batch = False
        self.author: str | None = None  # None: the process's default (set_author)
        self._key = path.resolve()
        _OPEN[self._key] = _OPEN.get(self._key, 0) + 1
        self._has_author = True  # schema 1 read-only: the column is not there

    # ------------------------------------------------------------ opening

    @classmethod
    def create(cls, path: Path | str, redactor: Redactor | None = None) -> Store:
        path = Path(path)
        if path.exists():
            raise StoreError(f"{path}: already exists; open it instead of creating it")
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        # 64 KiB pages: output rows of up to 1 MiB take 16 pages, not 256 (measured 3x the
        # insert rate); must be set before the first table and before WAL.
        conn.execute("PRAGMA page_size=65536")
        conn.execute("PRAGMA journal_mode=WAL")
        _tune(conn)
        with conn:
            conn.execute("BEGIN")
            for statement in _split_sql(_SCHEMA):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO meta VALUES ('format', ?), ('schema', ?), ('created', ?)",
                (FORMAT, str(SCHEMA_VERSION), repr(time.time())),
            )
        return cls(path, conn, False, redactor or Redactor.from_environ())

    @classmethod
    def open(cls, path: Path | str, readonly: bool = False, redactor: Redactor | None = None) -> Store:
        path = Path(path)
        if not path.is_file():
            raise StoreError(f"{path}: no such session file")
        # Only SQLite opens the file while this process holds a connection to it: closing any
        # other descriptor of it drops the POSIX locks those connections hold (the UI's, while
        # a replay or the fold scan opens it again), and another process that closes its own
        # connection then deletes the WAL under them — they would never see another event. So
        # the magic is read only when no store of this process has the file open.
        if not _OPEN.get(path.resolve()):
            with path.open("rb") as fh:
                head = fh.read(16)
            if head != _SQLITE_MAGIC:
                raise StoreError(f"{path}: not a sleuth session (not an SQLite database); the file was left as it is")
        # Check in read-only mode first, so a file we refuse is never written to.
        probe = _connect_ro(path)
        try:
            rows = dict(probe.execute("SELECT key, value FROM meta").fetchall())
            probe.execute("SELECT count(*) FROM events").fetchone()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: not a readable sleuth session ({exc}); the file was left as it is") from None
        finally:
            probe.close()
        if rows.get("format") != FORMAT:
            raise StoreError(f"{path}: an SQLite file, but not a sleuth session; the file was left as it is")
        if int(rows.get("schema", "0")) > SCHEMA_VERSION:
            raise StoreError(f"{path}: written by a newer sleuth (schema {rows['schema']}); upgrade sleuth to open it")
        schema = int(rows.get("schema", "0"))
        if readonly:
            conn = _connect_ro(path)
        else:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            _tune(conn)
            if schema < 2:  # events gain their author; the old ones say "" (not recorded)
                _add_author_column(conn)
                schema = 2
        store = cls(path, conn, readonly, redactor or Redactor.from_environ())
        store._has_author = schema >= 2 or _has_column(conn, "events", "author")
        return store

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        left = _OPEN.get(self._key, 1) - 1
        if left > 0:
            _OPEN[self._key] = left
        else:
            _OPEN.pop(self._key, None)
        if not self.readonly:
            self.checkpoint()
        self.conn.close()

    def checkpoint(self) -> None:
        """Move the WAL into the main file. Not on the capture path: it fsyncs every byte
        (about 0.9 s per 100 MB here), so it runs when a run ends (in a thread) or at close."""
        try:
            self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.OperationalError:  # another process is writing; it will checkpoint
            pass

    def checkpoint_soon(self) -> None:
        path = self.path

        def work() -> None:
            try:
                conn = sqlite3.connect(path, isolation_level=None, timeout=1)
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                conn.close()
            except sqlite3.Error:
                pass

        threading.Thread(target=work, name="sleuth-checkpoint", daemon=True).start()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ events

    @contextmanager
    def batch(self) -> Iterator[None]:
        """The events appended inside go to disk in one commit instead of one each (a run's
        start with its flags, its end with its evidence). No await may happen inside: the
        capture writer's connection waits for the commit. What was appended is committed
        even when the block raises — as it would have been event by event."""
        if self.readonly or self._in_batch:  # nested: the outer batch commits
            yield
            return
        self.conn.execute("BEGIN IMMEDIATE")  # the write lock now: no reader to upgrade later
        self._in_batch = True
        try:
            yield
        finally:
            self._in_batch = False
            self.conn.execute("COMMIT")

    def append(self, kind: str, data: dict[str, Any], ts: float | None = None, author: str | None = None) -> Event:
        """Write one event (secrets redacted) and commit it; return it with its seq. *author*:
        who wrote it (default: this store's, else the process's: set_author)."""
        if self.readonly:
            raise StoreError(f"{self.path}: opened read-only (replay); nothing can be added")
        ts = time.time() if ts is None else ts
        kind = str(kind)  # an EventKind is stored as its plain value
        clean = self.redactor.redact_keys(data)
        dumped = json.dumps(clean, sort_keys=True, separators=(",", ":"))
        payload = self.redactor.redact_text(dumped)  # secret values anywhere in the event
        if author is None:
            author = self.author if self.author is not None else _AUTHOR[0]
        author = clean_author(author)
        cur = self.conn.execute("INSERT INTO events (ts, kind, data, author) VALUES (?, ?, ?, ?)",
                                (ts, kind, payload, author))
        return Event(int(cur.lastrowid or 0), ts, kind, clean if payload == dumped else json.loads(payload), author)

    def events(self, upto: int | None = None, after: int = 0) -> Iterator[Event]:
        """Events in order: those with after < seq ≤ upto (all when upto is None)."""
        author = "author" if self._has_author else "''"
        sql = f"SELECT seq, ts, kind, data, {author} FROM events WHERE seq > ?"
        args: tuple[Any, ...] = (after,)
        if upto is not None:
            sql += " AND seq <= ?"
            args = (after, upto)
        try:
            for seq, ts, kind, data, who in self.conn.execute(sql + " ORDER BY seq", args):
                yield Event(seq, ts, kind, json.loads(data), who or "")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: corrupt events table ({exc})") from None

    def event_count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM events").fetchone()[0])

    def last_seq(self) -> int:
        return int(self.conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])

    # ------------------------------------------------------------ output (the writer; reads: OutputIndex)

    def capture(self, run: int) -> CaptureWriter:
        from .capture import CaptureWriter  # the writer is the store's; kept in its own module
        if self.readonly:
            raise StoreError(f"{self.path}: opened read-only (replay); nothing can be captured")
        return CaptureWriter(self, run)


def _tune(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: consistent after any crash
    conn.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints happen off the capture path
    conn.execute("PRAGMA busy_timeout=5000")


def _has_column(conn: sqlite3.Connection, table: str, column: str) -> bool:
    return any(row[1] == column for row in conn.execute(f"PRAGMA table_info({table})"))


def _add_author_column(conn: sqlite3.Connection) -> None:
    """Schema 1 -> 2, in one transaction (another writer that got there first: nothing to do)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not _has_column(conn, "events", "author"):
            conn.execute("ALTER TABLE events ADD COLUMN author TEXT NOT NULL DEFAULT ''")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema'")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _connect_ro(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
    # Readers map the file: a search reads each page once, without a copy into SQLite's cache
    # (measured: Store.find 15 % faster on a 73 MB run).
    conn.execute("PRAGMA mmap_size=68719476736")
    return conn


def _split_sql(script: str) -> list[str]:
    """Statements of the schema; triggers hold ';' inside BEGIN … END."""
    out, current = [], []
    for line in script.strip().splitlines():
        current.append(line)
        text = "\n".join(current).strip()
        if text.endswith(";") and (not text.upper().startswith("CREATE TRIGGER") or text.upper().endswith("END;")):
            out.append(text)
            current = []
    return out

"""The SQLite session store: crash safety, refusal of bad files, output capture, redaction."""

from __future__ import annotations

import hashlib
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sleuth.sessions import Redactor, Store, StoreError
from sleuth.sessions.redact import is_secret_name


def test_sigkill_mid_append_leaves_every_committed_event(tmp_path):
    path = tmp_path / "s.sleuth"
    Store.create(path).close()
    writer = textwrap.dedent(
        f"""
        import sys
        from sleuth.sessions import Store
        store = Store.open({str(path)!r})
        i = 0
        while True:
            ev = store.append("note.added", {{"text": "x" * 2000, "i": i}})
            print(ev.seq, flush=True)
            i += 1
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE, text=True)
    committed = []
    deadline = time.monotonic() + 30
    while len(committed) < 300 and time.monotonic() < deadline:
        committed.append(int(proc.stdout.readline()))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rest = proc.stdout.read().split()
    committed += [int(x) for x in rest]
    assert len(committed) >= 300
    with Store.open(path, readonly=True) as store:
        seqs = [e.seq for e in store.events()]
        assert set(committed) <= set(seqs)
        assert seqs == list(range(1, len(seqs) + 1))  # no gap, nothing half-written
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with Store.open(path) as store:  # and it takes new events
        assert store.append("note.added", {"text": "after"}).seq == len(seqs) + 1


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"this is not a database at all\n" * 10, "not an SQLite database"),
        (b"SQLite format 3\x00" + b"\xff" * 4000, "not a readable sleuth session"),
    ],
)
def test_corrupt_file_is_refused_and_left_untouched(tmp_path, content, words):
    path = tmp_path / "bad.sleuth"
    path.write_bytes(content)
    before = _digest(path)
    with pytest.raises(StoreError, match=words):
        Store.open(path)
    assert _digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.sleuth"]  # no -wal / -shm left


def test_foreign_sqlite_file_is_refused(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    conn.execute("CREATE TABLE events (seq INTEGER)")
    conn.commit()
    conn.close()
    before = _digest(path)
    with pytest.raises(StoreError, match="not a sleuth session"):
        Store.open(path)
    assert _digest(path) == before


def test_events_are_append_only(tmp_path):
    with Store.create(tmp_path / "s.sleuth") as store:
        store.append("note.added", {"text": "one"})
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            store.conn.execute("UPDATE events SET kind = 'x'")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            store.conn.execute("DELETE FROM events")


def test_readonly_store_refuses_writes(tmp_path):
    Store.create(tmp_path / "s.sleuth").close()
    with Store.open(tmp_path / "s.sleuth", readonly=True) as store:
        with pytest.raises(StoreError, match="read-only"):
            store.append("note.added", {"text": "x"})


def test_capture_keeps_every_byte_and_reads_any_window(tmp_path):
    with Store.create(tmp_path / "s.sleuth", Redactor({})) as store:
        cap = store.capture(1)
        expected_out, expected_err = [], []
        # odd chunk sizes: lines split across chunks, streams interleaved
        out_text = "".join(f'  "key_{i}": {i},\n' for i in range(5000)).encode()
        err_text = "".join(f"warning {i}\n" for i in range(300)).encode()
        o = e = 0
        while o < len(out_text) or e < len(err_text):
            cap.write("stdout", out_text[o : o + 1013])
            o += 1013
            if e < len(err_text):
                cap.write("stderr", err_text[e : e + 97])
                e += 97
        cap.write("stdout", b"no newline at the end")
        lines = cap.close()
        expected_out = out_text.decode().splitlines() + ["no newline at the end"]
        expected_err = err_text.decode().splitlines()
        assert lines == {"stdout": 5001, "stderr": 300}
        assert store.output_bytes(1, "stdout") == out_text + b"no newline at the end"
        assert store.output_bytes(1, "stderr") == err_text
        got_out = [ln.text for ln in store.lines(1, 0, 10_000, stream="stdout")]
        assert got_out == expected_out
        assert [ln.text for ln in store.lines(1, 4990, 20, stream="stdout")] == expected_out[4990:]
        assert [ln.text for ln in store.lines(1, 123, 3, stream="stderr")] == expected_err[123:126]
        merged = store.lines(1, 0, 100_000)
        assert len(merged) == 5301
        assert [ln.number for ln in merged] == list(range(5301))
        assert sorted(ln.text for ln in merged) == sorted(expected_out + expected_err)
        window = store.lines(1, 2000, 50)
        assert [ln.number for ln in window] == list(range(2000, 2050))
        assert [ln.text for ln in window] == [ln.text for ln in merged[2000:2050]]
        assert store.output_summary(1)["complete"] is True


def test_secrets_never_reach_the_store(tmp_path):
    token = "hf_" + "A1b2C3d4E5" * 4
    red = Redactor({"HF_TOKEN": token, "WANDB_API_KEY": "0123456789abcdef", "HOME": "/root"})
    with Store.create(tmp_path / "s.sleuth", red) as store:
        store.append("run.finished", {"state": {"env": {"HF_TOKEN": token, "PATH": "/usr/bin"}}, "note": f"tok={token}"})
        cap = store.capture(1)
        data = f"login with {token} ok\nwandb key 0123456789abcdef\n".encode()
        for i in range(0, len(data), 7):  # split the secrets across chunks
            cap.write("stdout", data[i : i + 7])
        cap.write("stderr", b"github ghp_" + b"x" * 36 + b" done\n")
        cap.close()
    raw = (tmp_path / "s.sleuth").read_bytes()
    for wal in tmp_path.glob("s.sleuth-wal"):
        raw += wal.read_bytes()
    assert token.encode() not in raw
    assert b"0123456789abcdef" not in raw
    assert b"ghp_xxxx" not in raw
    with Store.open(tmp_path / "s.sleuth", readonly=True) as store:
        out = store.output_bytes(1, "stdout").decode()
        assert "login with <redacted:HF_TOKEN> ok" in out
        assert "wandb key <redacted:WANDB_API_KEY>" in out
        event = next(store.events())
        assert event.data["state"]["env"] == {"HF_TOKEN": "<redacted>", "PATH": "/usr/bin"}
        assert event.data["note"] == "tok=<redacted:HF_TOKEN>"


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(1 << 16, (1 << 16) + 300),
    needle=st.sampled_from([b"hf_", b"sk-", b"AKIA", b"-----BEGIN ", b"s3cr3t-value\x00x", b"\x00\x00"]),
    at=st.one_of(st.none(), st.integers(0, (1 << 16) + 300)),
    filler=st.sampled_from([b"a", b"\x00", b"hf", b"-", b"sk", b"AKI"]),
)
def test_contains_agrees_with_in_on_large_data(size, needle, at, filler):
    """The GIL-free search (libc memmem, for 64 KiB and more) finds what ``in`` finds: at the
    start, at the end, nowhere, among near misses and NUL bytes."""
    from sleuth.sessions.redact import contains

    data = (filler * size)[:size]
    if at is not None:
        at = min(at, size)
        data = data[:at] + needle + data[at:]
    assert contains(data, needle) == (needle in data)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from([
    b"hf_", b"ghp_", b"github_pat_", b"sk-", b"AKIA", b"-----BEGIN ", b"RSA ", b"PRIVATE KEY-----", b"ABCDEFGHIJKLMNOP",
    b"A1b2C3d4E5", b"x", b"_", b"-", b" ", b"\n", b"task-", b"0123456789",
]), max_size=40))
def test_token_shapes_are_replaced_as_the_whole_alternation_replaces_them(pieces):
    """Redaction runs one regex per token start present, yet replaces exactly what the one
    alternation of all shapes replaces (leftmost first), overlapping shapes included."""
    from sleuth.sessions.redact import _TOKEN_SHAPES

    data = b"".join(pieces)
    assert Redactor({}).redact_bytes(data) == _TOKEN_SHAPES.sub(b"<redacted>", data)


def test_secrets_in_large_chunks_never_reach_the_store(tmp_path):
    """Output written in big reads (the sizes a fast transport delivers) takes the memmem path;
    secrets anywhere in it, and split across two reads, are still replaced."""
    token = "hf_" + "Zz9Yy8Xx7W" * 4
    red = Redactor({"HF_TOKEN": token, "DB_PASSWORD": "correct-horse-battery"})
    line = b'{"step": 1, "loss": 0.25}\n'
    block = line * ((1 << 20) // len(line))
    out = bytearray(block)
    out[1000:1000] = f"token={token}\n".encode()
    out[len(out) // 2 : len(out) // 2] = b"password correct-horse-battery here\n"
    out += b"aws AKIA" + b"ABCDEFGHIJKLMNOP" + b" tail\n"
    data = bytes(out)
    with Store.create(tmp_path / "s.sleuth", red) as store:
        cap = store.capture(1)
        cut = 1005  # inside the token
        cap.write("stdout", data[:cut])
        for i in range(cut, len(data), 300_000):
            cap.write("stdout", data[i : i + 300_000])
        cap.close()
        stored = store.output_bytes(1, "stdout")
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("s.sleuth*"))
    for secret in (token.encode(), b"correct-horse-battery", b"AKIAABCDEFGHIJKLMNOP"):
        assert secret not in raw
    assert b"token=<redacted:HF_TOKEN>" in stored
    assert b"password <redacted:DB_PASSWORD> here" in stored
    assert b"aws <redacted> tail" in stored
    assert stored.count(b"\n") == data.count(b"\n")


def test_rows_searched_together_when_the_writer_is_behind_keep_every_secret_out(tmp_path):
    """When the writer thread falls behind, the rows waiting are searched for secrets in one
    go: a secret in any one of them still sends that row through redaction, the clean rows go
    in as they are, in order, every line counted."""

    class SlowFirst(Redactor):
        def __init__(self, secrets: dict[str, str]) -> None:
            super().__init__(secrets)
            self.batches: list[int] = []

        def redact_bytes(self, data: bytes) -> bytes:
            if not self.batches:
                time.sleep(0.3)  # the first row is slow: the next ones queue up behind it
                self.batches.append(0)
            return super().redact_bytes(data)

        def finds_any(self, data: bytes) -> bool:
            self.batches.append(len(data))
            return super().finds_any(data)

    red = SlowFirst({"WANDB_API_KEY": "0123456789abcdef"})
    line = b'{"step": 1, "loss": 0.25, "note": "plain"}\n'
    rows = []
    for i in range(12):
        row = bytearray(line * ((1 << 20) // len(line)))
        if i in (4, 9):
            row[500:500] = b"key 0123456789abcdef and " + (b"hf_" + b"Q" * 30 if i == 9 else b"") + b"\n"
        rows.append(bytes(row))
    data = b"".join(rows)
    with Store.create(tmp_path / "s.sleuth", red) as store:
        cap = store.capture(1)
        for i in range(0, len(data), 256 << 10):
            cap.write("stdout", data[i : i + (256 << 10)])
        cap.close()
        stored = store.output_bytes(1, "stdout")
    assert max(red.batches) > 2 << 20  # rows were searched together
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("s.sleuth*"))
    assert b"0123456789abcdef" not in raw and b"hf_QQQQ" not in raw
    expected = red.redact_bytes(data)
    assert stored == expected
    assert stored.count(b"<redacted:WANDB_API_KEY>") == 2 and stored.count(b"<redacted>") == 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pieces=st.lists(
        st.tuples(st.sampled_from(["stdout", "stderr"]), st.text(alphabet="ab\nX", min_size=1, max_size=12)),
        min_size=1,
        max_size=40,
    ),
    needle=st.sampled_from(["X", "aX", "Xb", "abX", "bXa", "XX"]),
    start=st.integers(0, 30),
    stream=st.sampled_from([None, "stdout", "stderr"]),
    backwards=st.booleans(),
)
@pytest.mark.slow
def test_find_agrees_with_a_scan_of_the_lines(tmp_path_factory, pieces, needle, start, stream, backwards):
    """Store.find (a byte search over chunks) gives the line a plain scan of lines() gives:
    lines split across chunks, streams interleaved, hits across chunk boundaries."""
    path = tmp_path_factory.mktemp("find") / "s.sleuth"
    with Store.create(path, Redactor({})) as store:
        cap = store.capture(1)
        for s, text in pieces:
            cap.write_exact(s, text.encode(), 0.0)  # one chunk per piece: every boundary is tested
        cap.close()
        lines = store.lines(1, 0, 10_000, stream=stream)
        if backwards:
            want = max((ln.number for ln in lines if needle in ln.text and ln.number < start), default=None)
        else:
            want = min((ln.number for ln in lines if needle in ln.text and ln.number >= start), default=None)
        got = store.find(1, needle, start, stream=stream, backwards=backwards)
        assert got == want


def test_a_batch_is_one_commit_and_keeps_what_was_appended_when_it_raises(tmp_path):
    store = Store.create(tmp_path / "s.sleuth")
    reader = sqlite3.connect(f"file:{store.path}?mode=ro", uri=True)

    def visible() -> int:
        return reader.execute("SELECT count(*) FROM events").fetchone()[0]

    with store.batch():
        store.append("note.added", {"text": "one"})
        with store.batch():  # nested: still the outer commit
            store.append("note.added", {"text": "two"})
        assert visible() == 0
    assert visible() == 2
    with pytest.raises(RuntimeError):
        with store.batch():
            store.append("note.added", {"text": "three"})
            raise RuntimeError("a bug between two events")
    assert visible() == 3  # committed as it would have been without the batch
    store.append("note.added", {"text": "four"})  # and back to one commit an event
    assert visible() == 4
    reader.close()
    store.close()


def _redact_keys_walk(obj):  # the plain recursive walk redact_keys must equal
    if isinstance(obj, dict):
        return {k: "<redacted>" if type(v) is str and type(k) is str and is_secret_name(k)
                else _redact_keys_walk(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_redact_keys_walk(v) for v in obj]
    return obj


_KEYS = st.sampled_from(["HF_TOKEN", "api_key", "password", "torch", "step", "loss", "secret_sauce", "path", "x"])
_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(_KEYS, inner, max_size=5),
    max_leaves=30,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(_JSONISH)
def test_redact_keys_replaces_exactly_what_the_plain_walk_replaces(data):
    red = Redactor({})
    assert red.redact_keys(data) == _redact_keys_walk(data)


def test_credentials_in_an_index_url_never_reach_the_store(tmp_path):
    """Issue 33: `sleuth upgrade --index-url https://user:token@host/simple` stored the URL
    verbatim in the run's parameters and its reason. The userinfo is replaced everywhere (the
    scheme and host kept, as pip shows them), in events and in output split at any byte."""
    url = "https://alice:s3cr3t-Tok3n_99@pypi.corp.example/simple"
    red = Redactor({})
    with Store.create(tmp_path / "s.sleuth", red) as store:
        store.append("run.started", {"params": {"index_url": url}, "reason": f"pip could not reach {url}"})
        data = f"Looking in indexes: {url}\nERROR: could not fetch {url}/torch/\n".encode()
        for step in (1, 5, 13):
            cap = store.capture(step)
            for i in range(0, len(data), step):
                cap.write("stdout", data[i : i + step])
            cap.close()
    raw = (tmp_path / "s.sleuth").read_bytes() + b"".join(w.read_bytes() for w in tmp_path.glob("s.sleuth-wal"))
    assert b"s3cr3t-Tok3n_99" not in raw and b"alice:" not in raw
    with Store.open(tmp_path / "s.sleuth", readonly=True) as store:
        shown = "https://<redacted:url-credentials>@pypi.corp.example/simple"
        assert next(store.events()).data["params"]["index_url"] == shown
        for step in (1, 5, 13):
            assert store.output_bytes(step, "stdout").decode() == data.decode().replace(url, shown)
    assert red.redact_text("see https://pypi.org/simple and git@github.com:x/y") == \
        "see https://pypi.org/simple and git@github.com:x/y"


SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE events (seq INTEGER PRIMARY KEY, ts REAL NOT NULL, kind TEXT NOT NULL, data TEXT NOT NULL);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TABLE chunks (run INTEGER NOT NULL, seq INTEGER NOT NULL, stream INTEGER NOT NULL, ts REAL NOT NULL,
    line0 INTEGER NOT NULL, sline0 INTEGER NOT NULL, nlines INTEGER NOT NULL, starts_mid INTEGER NOT NULL,
    data BLOB NOT NULL, PRIMARY KEY (run, seq));
CREATE TABLE outputs (run INTEGER PRIMARY KEY, bytes INTEGER NOT NULL DEFAULT 0, stdout_lines INTEGER NOT NULL DEFAULT 0,
    stderr_lines INTEGER NOT NULL DEFAULT 0, complete INTEGER NOT NULL DEFAULT 0);
INSERT INTO meta VALUES ('format', 'sleuth-session'), ('schema', '1'), ('created', '0');
INSERT INTO events (ts, kind, data) VALUES (1.0, 'investigation.created', '{"title":"old"}');
"""


def test_a_session_from_before_authors_reads_as_it_was_and_gains_them_when_written(tmp_path):
    path = tmp_path / "old.sleuth"
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA_1)
    conn.close()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with Store.open(path, readonly=True) as ro:  # replay of an old file: read, never changed
        assert [(e.kind, e.author) for e in ro.events()] == [("investigation.created", "")]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    with Store.open(path) as store:
        store.author = "mcp:claude-code"
        store.append("note.added", {"text": "hello"})
        store.append("note.added", {"text": "by hand"}, author="cli")
    with Store.open(path, readonly=True) as ro:
        assert [e.author for e in ro.events()] == ["", "mcp:claude-code", "cli"]
        assert ro.conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0] == "2"
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            sqlite3.connect(path).execute("UPDATE events SET author = 'x'")


def test_an_author_is_one_printable_line_of_at_most_80_characters(tmp_path):
    with Store.create(tmp_path / "s.sleuth") as store:
        store.author = "mcp:evil\n\x1b[2Jname" + "x" * 200
        event = store.append("note.added", {"text": "t"})
    assert "\n" not in event.author and "\x1b" not in event.author and len(event.author) == 80
    assert event.author.startswith("mcp:evil??[2Jname")


def test_an_open_store_sees_another_process_s_events_while_this_process_opens_the_file_again(tmp_path):
    """The UI holds the session open; its fold scan (a thread) opens and closes read-only stores
    of the same file; an agent's `sleuth mcp` (another process) opens, appends and closes per
    call. Reading the file's magic with a plain open()/close() in the UI's process used to
    drop its POSIX locks, and the other process's close deleted the WAL under it: the UI saw
    no event after that until reopened."""
    import threading

    path = tmp_path / "s.sleuth"
    ui = Store.create(path)
    ui.append("investigation.created", {"title": "t"})
    stop = threading.Event()

    def scan() -> None:
        while not stop.is_set():
            with Store.open(path, readonly=True) as ro:
                ro.last_seq()
            time.sleep(0.005)

    scanner = threading.Thread(target=scan)
    scanner.start()
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        from sleuth.sessions import Store
        for k in range(30):
            s = Store.open({str(path)!r})
            s.append("note.added", {{"text": str(k)}})
            s.close()
        """)])
    try:
        while writer.poll() is None:
            ui.last_seq()
            time.sleep(0.002)
    finally:
        stop.set()
        scanner.join()
    assert writer.returncode == 0
    assert ui.last_seq() == 31 and [e.data.get("text") for e in ui.events()][-1] == "29"
    ui.close()


def test_package_names_are_not_secret_names_and_secrets_still_are(tmp_path):
    """Issue 42: the filter matched TOKEN inside ``tokenizers``: its version was stored as
    <redacted> and every state read said "changed outside sleuth: tokenizers <redacted> →
    0.23.3". A credential word counts only as a word of the name; a distribution is a package
    whatever its name (google-auth); a secret's value is still replaced wherever it shows."""
    for name in ("tokenizers", "TOKENIZERS_PARALLELISM", "max_tokens", "author"):
        assert not is_secret_name(name), name
    for name in ("HF_TOKEN", "hfToken", "GITHUBTOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD",
                 "oauth_token", "Authorization", "SESSION_KEY", "private_key"):
        assert is_secret_name(name), name
    token = "hf_" + "Z9y8X7w6V5" * 4
    red = Redactor({"HF_TOKEN": token})
    with Store.create(tmp_path / "s.sleuth", red) as store:
        store.append("state.read", {"env": {"distributions": {"tokenizers": "0.23.3", "google-auth": "2.40.0",
                                                               "evil": token},
                                            "HF_TOKEN": "x" * 8, "TOKENIZERS_PARALLELISM": "false"}})
    with Store.open(tmp_path / "s.sleuth", readonly=True) as store:
        env = next(store.events()).data["env"]
    assert env["distributions"] == {"tokenizers": "0.23.3", "google-auth": "2.40.0", "evil": "<redacted:HF_TOKEN>"}
    assert env["HF_TOKEN"] == "<redacted>" and env["TOKENIZERS_PARALLELISM"] == "false"

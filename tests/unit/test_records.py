"""Typed records at the store boundary (issue 43): every event a real session holds parses into
its kind's payload (hypotheses/payloads.py) and gives back exactly the stored JSON; the fold's
typed reads (the state read's torch version, a verification's strength, an overlay) say what
the stored dicts say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sleuth.hypotheses import load_catalog
from sleuth.hypotheses.fleet import compare
from sleuth.hypotheses.hang.frames import Where
from sleuth.hypotheses.hang.rank import RankView
from sleuth.hypotheses.known import load_known
from sleuth.hypotheses.payloads import (
    PAYLOADS,
    KnownMatched,
    RunFinished,
    RunStarted,
    SymptomAdded,
    parse_payload,
)
from sleuth.hypotheses.results import (
    CacheResult,
    Fingerprint,
    FrameworkFrame,
    HangReading,
    NativeWait,
    OddRank,
    Place,
    RankRecorder,
    RankRow,
    ThreadRow,
)
from sleuth.hypotheses.stored import KnownMatch, KnownSeen, Note, Overlay, Record, StateRead, Verification
from sleuth.sessions import Investigation
from sleuth.sessions.store import Store

RACE = {"threads": 4, "race": "fx-trace", "cold_cache": True, "calls": 200, "fx_trace_errors": 37,
        "errors_total": 37, "control_fx_trace_errors": 0, "failed_trials": 3, "trials": 3, "control_failed": 0,
        "control_same_failure": 0}
CLEAN = {**RACE, "fx_trace_errors": 0, "errors_total": 0, "failed_trials": 0}
SIGNATURE = "RuntimeError: Detected that you are using FX to symbolically trace a dynamo-optimized function"


def _state(torch: str, code: str = "c0", **env: Any) -> dict[str, Any]:
    return {"env": {"python": "3.11.7", "torch": {"version": torch, "cuda": "13.0", "git_version": "08187d9e"},
                    "driver": "580.95", "distributions": {"torch": torch, "triton": "3.5.0"}, **env},
            "code": code, "caches": {"inductor": {"entries": 12}}}


def _run(inv: Investigation, probe: str, result: dict[str, Any] | None, state: dict[str, Any] | None,
         params: dict[str, Any] | None = None, kind: str = "probe", seen: dict[str, str] | None = None,
         read_before: dict[str, Any] | None = None, target: str = "local") -> int:
    check = inv.check_before_run(probe, params or {}, target, state=state if kind != "shell" else read_before)
    inv.observe_state(target, check)
    start = inv.begin_run(probe, params or {}, target, kind=kind, check=check, reason="a test" if check.flagged else None)
    records = ([{"kind": "result", **result}] if result is not None else []) + [{"kind": "done"}]
    inv.finish_run(start.run, "completed", "done record received, exit status 0", records, state,
                   {"stdout": 2, "stderr": 0}, exit_status=0, seen=seen, read_before=read_before)
    return start.run


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session written through the real code paths, holding every kind of event."""
    path = tmp_path_factory.mktemp("records") / "hunt.sleuth"
    inv = Investigation.create(path, "drafter race", load_catalog())
    inv.known = load_known()
    inv.add_symptom("fx-trace-error")
    inv.add_symptom("typo", "a typo", "taken back below")
    inv.remove_symptom("typo")
    inv.link("compile-race", "competes", "concurrent-compile")
    old = _state("2.13.0+cpu")
    first = _run(inv, "compile-race", RACE, old, seen={"pytorch#126024": SIGNATURE})
    _run(inv, "compile-race", RACE, old)  # a circular retest, run anyway
    inv.decline_run("compile-race", {}, "local", inv.check_before_run("compile-race", {}, "local", state=old))
    inv.mark_baseline(first)
    inv.add_note("the race again", about="compile-race")
    inv.record_finding("local", "cpu-build", "torch is a CPU build", first)
    inv.record_preview("lock", "model.py", "a" * 64, "b" * 64, [])
    files = [{"path": "model.py", "before_sha": "a" * 64, "after_sha": "b" * 64, "diff": "-x\n+y\n"}]
    lock = inv.record_application("lock", "local", files, hypothesis="compile-race")
    _run(inv, "compile-race", CLEAN, _state("2.13.0+cpu", code="c1"))  # under the lock: verifies it
    inv.record_revert(lock)
    inv.record_application("upgrade", "local", [], None, overlay={  # explaining none: the issue itself is asked
        "issue": "pytorch#126024", "package": "torch", "version": "2.14.1", "path": "/o", "site": "/o/site",
        "explains": [], "affected": ">=2.0,<2.14", "installed_before": "2.13.0+cpu", "install_run": 0})
    new = _state("2.14.1+cu130", code="c1")
    _run(inv, "compile-race", CLEAN, new)  # under the overlay: the entry left its range, the upgrade verified
    _run(inv, "shell", None, None, params={"cmd": "pip list"}, kind="shell", read_before=new)
    a = _run(inv, "env-fingerprint", {"has_baseline": False}, _state("2.14.1+cu130", code="c1"), target="a")
    b = _run(inv, "env-fingerprint", {"has_baseline": False}, _state("2.13.0+cpu", code="c1"), target="b")
    inv.record_fleet("nodes", "list", [{"name": "a", "target": "a"}, {"name": "b", "target": "b"}])
    inv.record_comparison(compare("nodes", "env-fingerprint", {"a": inv.state.runs[a], "b": inv.state.runs[b]}))
    inv.record_fleet_hang("nodes", {"a": a, "b": b}, {"stuck": 1, "odd_ranks": [{"rank": 1, "member": "b"}]})
    inv.remove_hypothesis("concurrent-compile")
    inv.close()
    return path


def _events(path: Path) -> list[Any]:
    with Store.open(path, readonly=True) as store:
        return list(store.events())


def test_every_stored_payload_parses_into_its_kind_and_gives_back_the_stored_json(session: Path) -> None:
    events = _events(session)
    kinds = {e.kind for e in events}
    assert kinds == set(PAYLOADS), set(PAYLOADS) - kinds  # the session holds every kind
    for e in events:
        payload = parse_payload(e.kind, e.data)
        assert isinstance(payload, PAYLOADS[e.kind])
        again = payload.to_dict()
        assert again == e.data, e.kind
        assert list(again) == list(e.data), e.kind  # printed without sort_keys, it reads the same
        assert json.dumps(again, sort_keys=True, separators=(",", ":")) == \
            json.dumps(e.data, sort_keys=True, separators=(",", ":"))
        assert e.payload == payload  # the event's own, parsed once


def test_the_store_writes_a_payload_back_byte_for_byte(session: Path, tmp_path: Path) -> None:
    """Appending to_dict() of what was read stores the same text as the original event."""
    events = _events(session)
    copy = Store.create(tmp_path / "copy.sleuth")
    try:
        for e in events:
            payload = e.payload
            assert payload is not None
            copy.append(e.kind, payload.to_dict(), ts=e.ts, author=e.author)
    finally:
        copy.close()
    with Store.open(session, readonly=True) as a, Store.open(tmp_path / "copy.sleuth", readonly=True) as b:
        rows = "SELECT seq, ts, kind, data, author FROM events ORDER BY seq"
        assert a.conn.execute(rows).fetchall() == b.conn.execute(rows).fetchall()


def test_the_fold_reads_the_typed_records(session: Path) -> None:
    inv = Investigation.replay(session)
    try:
        st_ = inv.state
        first = st_.runs[1]
        assert isinstance(first.read, StateRead)
        assert first.read.torch_version == first.read.torch_reported == "2.13.0+cpu"
        assert first.read.to_dict() == first.state  # the stored object, and the same object the callers read
        shell = next(r for r in st_.runs.values() if r.kind == "shell")
        assert shell.read is not None and shell.read.to_dict() == shell.state  # the state read just before it
        apps = list(st_.applications.values())
        for app in apps:
            assert [v.to_dict() for v in app.verified] == app.verifications
            assert all(isinstance(v, Verification) for v in app.verified)
        upgrade = next(a for a in apps if a.remedy == "upgrade")
        assert upgrade.upgrade is not None and upgrade.upgrade.to_dict() == upgrade.overlay
        assert upgrade.digest == "upgrade:torch==2.14.1@/o"
        assert any(v.issue == "pytorch#126024" for v in upgrade.verified)
        lock = next(a for a in apps if a.remedy == "lock")
        assert lock.verified and all(v.strong == v.to_dict().get("strong", True) for v in lock.verified)
        assert st_.known_matches and st_.known_left  # matched on 2.13, left on 2.14.1
        [hang] = st_.fleet_hangs
        assert (hang.fleet, hang.runs, hang.reading["stuck"]) == ("nodes", {"a": hang.run - 1, "b": hang.run}, 1)
        reading = HangReading.from_dict(hang.reading)  # the postmortem reads it typed
        assert reading.to_dict() == hang.reading and reading.odd_kinds == {1: None} and reading.verdict is None
        events = {e.seq: e for e in _events(session)}
        for kept, part in ((st_.known_matches, "matches"), (st_.known_left, "left")):  # kept typed, parsed once
            for seen in kept:
                assert isinstance(seen, KnownSeen)
                e = events[seen.seq]
                [stored] = [m for m in e.data[part] if m["id"] == seen.id]
                where = {"run": e.data["run"], "target": seen.target, "state_key": st_.runs[seen.run].state_key,
                         "seq": e.seq, "ts": e.ts}
                # what the fold kept before (the stored entry, then where it was seen), key for key, in order
                assert seen.to_dict() == {**stored, **where} and list(seen.to_dict()) == list({**stored, **where})
                assert (seen.run, seen.target, seen.source) == (e.data["run"], "local", stored.get("source"))
        assert any(m.checked for m in st_.known_matches)  # a field now, no longer kept aside
        said = st_.known_for_run(st_.known_left[0].run)
        assert said["left"] == st_.known_left and all(isinstance(m, KnownSeen) for m in said["matches"])
        [now] = st_.known_for("compile-race")  # the latest match, and that it left its range on the overlay
        assert (now.match, now.applies_now) == (st_.known_matches[-1], False)
        notes = {n.text: n for n in st_.notes}
        mine, finding = notes["the race again"], notes["sleuth, on local: torch is a CPU build"]
        assert isinstance(mine, Note) and (mine.about, mine.finding, mine.target) == ("compile-race", None, None)
        assert list(mine.to_dict()) == ["seq", "ts", "text", "about"]  # a user's note has no finding, no target
        assert (finding.finding, finding.target, finding.about) == ("cpu-build", "local", "#1")
        assert list(finding.to_dict()) == ["seq", "ts", "text", "about", "finding", "target"]
        assert [n.to_dict() for n in st_.notes] == st_.snapshot()["notes"]
        assert "torch" in inv.to_markdown()
    finally:
        inv.close()


def test_a_state_read_names_its_torch_version_once_for_every_form() -> None:
    assert StateRead.from_dict({"env": {"torch": {"version": "2.13.0+cpu", "cuda": None}}}).torch_version == "2.13.0+cpu"
    assert StateRead.from_dict({"env": {"torch": "2.11.0+cu130"}}).torch_version == "2.11.0+cu130"  # an older state
    dist_only = StateRead.from_dict({"env": {"torch": None, "distributions": {"torch": "2.14.1"}}})
    assert dist_only.torch_version == "2.14.1" and dist_only.torch_reported is None
    assert StateRead.from_dict({}).torch_version is None and StateRead.from_dict({}).to_dict() == {}


def test_absent_keys_stay_absent_and_defaults_are_read() -> None:
    stored = {"run": 3, "probe": "env", "target": "local", "check_key": "k"}
    p = RunStarted.from_dict(stored)
    assert (p.params, p.kind, p.remedies, p.stochastic, p.observed) == ({}, "probe", [], False, None)
    assert p.to_dict() == stored and not p.has("kind") and p.has("probe")
    assert SymptomAdded.from_dict({"id": "x"}).has("title") is False
    v = Verification.from_dict({"run": 1, "hypothesis": "h", "outcome": "fixed"})
    assert v.strong is True and v.to_dict() == {"run": 1, "hypothesis": "h", "outcome": "fixed"}
    with pytest.raises(KeyError):
        RunFinished.from_dict({"run": 1})  # a finished run without its classification


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(sorted(PAYLOADS)), extra=st.dictionaries(st.text(max_size=10), _json, max_size=6),
       data=st.data())
def test_any_payload_round_trips_with_keys_no_record_names(kind: str, extra: dict[str, Any], data: Any) -> None:
    """Required fields given, anything else beside them (a newer sleuth's keys): to_dict is
    the stored object, in its order."""
    cls = PAYLOADS[kind]
    spec = cls._spec()
    stored: dict[str, Any] = {k: v for k, v in extra.items() if k not in spec.nested}
    for name in spec.required:
        stored[name] = data.draw(st.integers() | st.text(max_size=5), label=name)
    if cls is KnownMatched:
        stored["matches"] = [{"id": "a", "measured": "2.13", "extra": [1]}]
    keys = list(stored)
    order = data.draw(st.permutations(keys), label="order")
    stored = {k: stored[k] for k in order}
    again = cls.from_dict(stored).to_dict()
    assert again == stored and list(again) == list(stored)


def test_a_stacks_row_as_the_hang_reading_writes_it_reads_typed_and_gives_it_back() -> None:
    where = Where("all_reduce", "/job/train.py", 42, "allreduce")
    loader = Where("next_batch", "/job/data.py", 7)
    view = RankView("rank 1", 4711, "b", main=where, stuck=True, native_read=True, main_share=(3, 4),
                    threads={"MainThread": (where, 3, 4), "loader": (loader, 4, 4), "idle": (None, 0, 4)},
                    wait={"frame": "ncclWait", "what": "a collective", "kind": "collective"},
                    framework={"package": "torch", "function": "all_reduce"})
    stored = {**view.to_dict(), "flight_recorder": {"source": "hook", "entered": {"0": 4},
                                                    "waits_in": ["all_reduce #4 on group 0"]}}
    row = RankRow.from_dict(stored)
    assert row.to_dict() == stored and list(row.to_dict()) == list(stored)
    assert row.place == Place.from_dict(stored["main"]) and row.place is not None
    assert (row.place.function, row.place.file_name, row.place.line) == ("all_reduce", "train.py", 42)
    assert row.place.collective == "allreduce" and row.main_samples == [3, 4]
    assert {name: (p.function, p.file_name) for name, p in row.other_threads.items()} == {"loader": ("next_batch", "data.py")}
    assert row.recorder is not None and (row.recorder.waits_in, row.recorder.error) == (["all_reduce #4 on group 0"], None)
    assert RankRow.from_dict({"flight_recorder": "not an object"}).recorder is None
    assert row.wait is not None and (row.wait.frame, row.wait.what) == ("ncclWait", "a collective")
    assert row.in_framework is not None and (row.in_framework.package, row.in_framework.function) == ("torch", "all_reduce")
    unread = RankRow.from_dict(RankView("pid 9", 9, None, error="py-spy: permission denied").to_dict())
    assert (unread.place, unread.wait, unread.in_framework, unread.error) == (None, None, None, "py-spy: permission denied")
    assert RankRow.from_dict({"main": {}}).place is None  # an empty place is no stack read
    reading = HangReading.from_dict({"verdict": "stuck", "per_rank": [stored, unread.to_dict()],
                                     "odd_ranks": [{"rank": "rank 1", "member": "b", "kind": "stuck"}]})
    assert reading.odd_kinds == {"rank 1": "stuck"} and [r.label for r in reading.rows(1)] == ["rank 1"]


def test_a_fingerprint_tells_measured_absent_from_not_measured() -> None:
    fp = Fingerprint.from_dict({"torch": "2.11.0+cpu", "torch.cuda": None, "driver": None})
    assert fp.to_dict() == {"torch": "2.11.0+cpu", "torch.cuda": None, "driver": None}
    assert fp.has("torch.cuda") and fp.has("driver") and not fp.has("triton") and fp.cuda is None
    assert Fingerprint.from_dict({"torch.cuda": "12.8"}).cuda == "12.8"
    assert Fingerprint.of_result({"fingerprint": "not an object"}) is None and Fingerprint.of_result({}) is None
    assert Fingerprint.of_result({"fingerprint": {"python": "3.11.7"}}) == Fingerprint.from_dict({"python": "3.11.7"})
    cache = CacheResult.from_dict({"hits": 0, "misses": 3, "cache_dir": "/c", "key_parts": {"a": 1}})
    assert (cache.misses, cache.said, cache.to_dict()["key_parts"]) == (3, None, {"a": 1})


_RESULT_RECORDS: list[type[Record]] = [HangReading, RankRow, OddRank, Place, NativeWait, FrameworkFrame, ThreadRow,
                                       RankRecorder, CacheResult, Fingerprint, KnownMatch, KnownSeen, Note, Overlay]


@settings(max_examples=60, deadline=None)
@given(cls=st.sampled_from(_RESULT_RECORDS), extra=st.dictionaries(st.text(max_size=10), _json, max_size=6),
       data=st.data())
def test_any_result_record_round_trips_with_keys_no_record_names(cls: type[Record], extra: dict[str, Any],
                                                                 data: Any) -> None:
    """The typed readers of run results and the fold's records give back what they read, in its order."""
    spec = cls._spec()
    stored: dict[str, Any] = dict(extra)
    for name in spec.required:
        stored[name] = data.draw(st.integers() | st.text(max_size=5), label=name)
    for name in spec.names:  # some fields given, some absent
        if name not in stored and data.draw(st.booleans(), label=f"has {name}"):
            stored[name] = data.draw(_json, label=name)
    order = data.draw(st.permutations(list(stored)), label="order")
    stored = {k: stored[k] for k in order}
    record = cls.from_dict(stored)
    again = record.to_dict()
    assert again == stored and list(again) == list(stored)
    assert all(record.has(k) for k in stored)

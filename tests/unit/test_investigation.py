"""The investigation fold on a real SQLite session: statuses, replay, retest flags."""

from __future__ import annotations

from sleuth.hypotheses import InvestigationState
from sleuth.sessions import Investigation
from support.sessions import env_state, record_run

RACE_FAIL = {"threads": 4, "race": "fx-trace", "cold_cache": True, "calls": 200, "fx_trace_errors": 37, "errors_total": 37, "control_fx_trace_errors": 0, "failed_trials": 1,
             "control_failed": 0, "control_same_failure": 0}
RACE_CLEAN = {**RACE_FAIL, "fx_trace_errors": 0, "errors_total": 0, "failed_trials": 0}
LOCK_FILES = [{"path": "train.py", "before_sha": "aa", "after_sha": "bb", "diff": "+ with _lock:"}]


def statuses(inv: Investigation) -> dict[str, str]:
    return {h: inv.state.status(h) for h in inv.state.hypotheses}


def test_catalog_hypotheses_start_open(inv):
    assert set(statuses(inv).values()) == {"open"}
    tree = inv.hypotheses_json()
    assert [h["id"] for h in tree] == ["compile-race", "version-drift", "cache-invalidation", "dense-fallback"]
    assert [c["id"] for c in tree[0]["refinements"]] == ["concurrent-compile", "concurrent-fx-trace"]


def test_fold_of_a_hunt_gives_the_expected_statuses(inv):
    s = env_state()
    record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, s)
    assert inv.state.evidence_counts("version-drift") == {"supports": 0, "refutes": 0, "inconclusive": 1}
    assert statuses(inv)["version-drift"] == "inconclusive"
    inv.mark_baseline(1)
    record_run(inv, "env-fingerprint", {"has_baseline": True, "drift": 0}, s, params={"baseline": 1})
    record_run(inv, "compile-race", RACE_FAIL, s)
    record_run(inv, "compile-cache", {"hits": 0, "misses": 2, "changed": ["torch"], "wiped": False}, s)
    record_run(inv, "dense-fallback", {"observed": True, "fallback": False, "slowdown": 1.1}, s)
    assert statuses(inv) == {
        "compile-race": "supported",
        "concurrent-compile": "open",  # the fx-trace face says nothing about it (applies rule)
        "concurrent-fx-trace": "supported",
        "version-drift": "refuted",
        "cache-invalidation": "supported",
        "dense-fallback": "refuted",
    }
    app = inv.record_application("lock", "local", LOCK_FILES, hypothesis="compile-race")
    run = record_run(inv, "compile-race", RACE_CLEAN, env_state(code="c1"))
    assert statuses(inv)["compile-race"] == "confirmed"
    assert statuses(inv)["concurrent-fx-trace"] == "confirmed"
    # the clean run under the lock verifies the fix; it is not evidence against the race
    assert inv.state.evidence_counts("compile-race") == {"supports": 1, "refutes": 0, "inconclusive": 0}
    (verified,) = [v for v in inv.state.applications[app].verifications if v["hypothesis"] == "compile-race"]
    assert (verified["run"], verified["outcome"], verified["strong"]) == (run, "fixed", True)  # not a stochastic run
    inv.record_revert(app)
    assert statuses(inv)["compile-race"] == "supported"


def test_failed_or_transport_runs_are_never_evidence(inv):
    record_run(inv, "compile-race", RACE_FAIL, env_state(), classification="failed")
    record_run(inv, "compile-race", RACE_FAIL, None, classification="transport")
    record_run(inv, "compile-race", RACE_FAIL, None, classification="timed_out")
    assert inv.state.evidence_counts("compile-race") == {"supports": 0, "refutes": 0, "inconclusive": 0}
    assert statuses(inv)["compile-race"] == "open"


def test_replay_at_every_k_equals_the_live_state_at_k(inv, session_path, catalog):
    live: dict[int, dict] = {}

    def snap() -> None:
        live[inv.state.last_seq] = inv.state.snapshot()

    snap()
    inv.add_symptom("fx-trace-error")
    snap()
    record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, env_state())
    snap()
    inv.mark_baseline(1)
    record_run(inv, "compile-race", RACE_FAIL, env_state())
    snap()
    record_run(inv, "env-fingerprint", {"has_baseline": True, "drift": 0}, env_state())
    snap()
    app = inv.record_application("lock", "local", LOCK_FILES)
    snap()
    record_run(inv, "compile-race", RACE_CLEAN, env_state(code="c1"))
    snap()
    inv.record_revert(app)
    inv.add_note("lock works; precompile next", about="compile-race")
    snap()
    total = inv.store.event_count()
    assert total == inv.state.last_seq
    for k, expected in live.items():
        with Investigation.replay(session_path, k) as replayed:
            assert replayed.state.snapshot() == expected, f"replay at event {k} differs"
    events = list(inv.store.events())
    for k in range(total + 1):
        with Investigation.replay(session_path, k) as replayed:
            assert replayed.state.last_seq == k
            started = sum(1 for e in events[:k] if e.kind == "run.started")
            assert len(replayed.state.runs) == started
            assert replayed.state.snapshot() == InvestigationState.fold(events[:k]).snapshot()


def test_circular_retest_is_flagged_and_state_changes_clear_it(inv):
    s = env_state()
    first = record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, s)
    check = inv.check_before_run("env-fingerprint", {}, "local")
    assert check.retest_of is not None and check.retest_of.id == first
    assert "repeats #1" in inv.describe_check(check)
    second = record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, s)
    flags = [f for f in inv.state.flags if f.kind == "circular-retest"]
    assert [(f.run, f.earlier) for f in flags] == [(second, first)]
    assert inv.state.runs[second].retest_of == first
    # other parameters or another target are another question
    assert inv.check_before_run("env-fingerprint", {"verbose": True}, "local").retest_of is None
    assert inv.check_before_run("env-fingerprint", {}, "ct200").retest_of is None
    # a remedy applied changes the state ...
    app = inv.record_application("lock", "local", LOCK_FILES)
    assert inv.check_before_run("env-fingerprint", {}, "local").retest_of is None
    # ... and reverting it brings the same state back
    inv.record_revert(app)
    assert inv.check_before_run("env-fingerprint", {}, "local").retest_of.id == second
    # a distribution version changed, as another probe saw it
    record_run(inv, "cache-inventory", {"cold": False, "keys_match": True}, env_state(torch="2.11.0+cu130"))
    assert inv.check_before_run("env-fingerprint", {}, "local").retest_of is None


def test_shell_command_makes_the_state_unknown(inv):
    record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, env_state())
    record_run(inv, "shell", None, None, kind="shell", params={"cmd": "pip install torch==2.11.0"})
    assert inv.check_before_run("env-fingerprint", {}, "local").retest_of is None


def test_transport_failure_is_no_basis_for_a_retest(inv):
    record_run(inv, "env-fingerprint", None, None, classification="transport")
    assert inv.check_before_run("env-fingerprint", {}, "local").retest_of is None


def test_oscillation_a_b_a_is_flagged(inv):
    record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, env_state(torch="2.11.0+cu128"))
    record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, env_state(torch="2.11.0+cu130"))
    assert not [f for f in inv.state.flags if f.kind == "oscillation"]
    third = record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, env_state(torch="2.11.0+cu128"))
    osc = [f for f in inv.state.flags if f.kind == "oscillation"]
    assert [(f.run, f.earlier, f.component) for f in osc] == [(third, 1, "env")]
    assert osc[0].message == "torch 2.11.0+cu128 → 2.11.0+cu130 → 2.11.0+cu128 on local (#1, #2, #3)"


def test_revisiting_a_refuted_hypothesis_is_flagged(inv):
    s = env_state()
    base = record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, s)
    inv.mark_baseline(base)
    record_run(inv, "env-fingerprint", {"has_baseline": True, "drift": 0}, s, params={"against": base})
    assert inv.state.status("version-drift") == "refuted"
    check = inv.check_before_run("env-fingerprint", {"against": base, "deep": True}, "local")
    assert check.retest_of is None  # other parameters: not the same check ...
    assert check.revisits == ("version-drift",)  # ... but nothing new since it was refuted
    run = record_run(inv, "env-fingerprint", {"has_baseline": True, "drift": 0}, s, params={"against": base, "deep": True})
    assert [(f.kind, f.hypothesis, f.run) for f in inv.state.flags if f.kind == "revisit"] == [("revisit", "version-drift", run)]
    # the world changed: no longer a revisit
    record_run(inv, "cache-inventory", {"cold": True, "keys_match": False}, env_state(torch="2.11.0+cu130"))
    assert inv.check_before_run("env-fingerprint", {"x": 1}, "local").revisits == ()


def test_declined_retest_is_recorded(inv):
    record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, env_state())
    check = inv.check_before_run("env-fingerprint", {}, "local")
    inv.decline_run("env-fingerprint", {}, "local", check)
    flag = inv.state.flags[-1]
    assert flag.kind == "circular-retest" and flag.run is None and flag.earlier == 1
    assert len(inv.state.runs) == 1


def test_two_writers_on_one_session_see_each_other(inv, session_path, catalog):
    other = Investigation.open(session_path, catalog)
    record_run(other, "env-fingerprint", {"has_baseline": False, "drift": 0}, env_state())
    other.close()
    run = record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, env_state())
    assert run == 2
    assert inv.state.runs[2].retest_of == 1


def test_reopening_keeps_user_hypotheses_and_syncs_new_catalog_entries(inv, session_path, catalog, tmp_path):
    inv.add_symptom("fx-trace-error")
    inv.add_hypothesis("oom-killer", "OOM killer", "the kernel kills a rank", explains=["fx-trace-error"], links=[("competes", "compile-race")])
    inv.close()
    with Investigation.open(session_path, catalog) as again:
        assert again.state.hypotheses["oom-killer"].source == "session"
        summary = again.state.hypothesis_summary("oom-killer")
        assert summary["links"] == [{"kind": "competes", "to": "compile-race"}]
        assert again.state.graph.has_edge("hyp:oom-killer", "symptom:fx-trace-error")
        before = again.store.event_count()
    with Investigation.open(session_path, catalog) as third:
        assert third.store.event_count() == before  # nothing re-added when nothing changed


def test_events_another_process_appended_meanwhile_are_folded_before_ours(inv):
    """A CLI command and the UI write to one session: each folds the other's events, in the
    store's order, before its own (found by the seq its own insert got)."""
    other = Investigation.open(inv.path)
    try:
        inv.add_note("mine first")
        other.add_note("theirs, from another command")
        other.add_symptom("nccl-timeout", "NCCL watchdog timeout on rank 3")
        inv.add_note("mine after theirs")
        fresh = Investigation.replay(inv.path)
        assert inv.state.last_seq == fresh.state.last_seq == other.state.last_seq + 1
        assert "nccl-timeout" in inv.state.symptoms
        assert [n.text for n in inv.state.notes] == [n.text for n in fresh.state.notes] == [
            "mine first", "theirs, from another command", "mine after theirs"]
        fresh.close()
    finally:
        other.close()


def test_a_run_start_with_its_flag_is_one_commit(inv):
    """begin_run writes the retest flag and the start together: another reader never sees the
    flag without the run it is about."""
    s = env_state()
    record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, s)
    check = inv.check_before_run("env-fingerprint", {}, "local", state=s)
    assert check.retest_of is not None
    seen = []
    original = inv.store.append

    def spy(kind, data, ts=None):
        import sqlite3
        event = original(kind, data, ts)
        with sqlite3.connect(f"file:{inv.path}?mode=ro", uri=True) as reader:
            seen.append(reader.execute("SELECT count(*) FROM events").fetchone()[0])
        return event

    before = inv.store.event_count()
    inv.store.append = spy
    try:
        inv.begin_run("env-fingerprint", {}, "local", check=check)
    finally:
        inv.store.append = original
    assert seen == [before, before]  # neither the flag nor the start visible before both are in
    assert inv.store.event_count() == before + 2

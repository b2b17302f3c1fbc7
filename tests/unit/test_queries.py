"""Typed queries on the folded state, tested without the app (posting's model-method tests):
the verdicts of a run, the runs that support a hypothesis, the sentence every front end uses
before a repeated check, and the event kinds as the store keeps them."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st_
from sleuth.hypotheses import (
    STATUS_GLYPHS,
    STATUSES,
    EventKind,
    Evidence,
    InvestigationState,
    describe_check,
)
from sleuth.hypotheses.model import HANDLERS
from support.sessions import env_state, record_run

RACE_FAIL = {"threads": 4, "race": "fx-trace", "cold_cache": True, "calls": 200, "fx_trace_errors": 37,
             "errors_total": 37, "control_fx_trace_errors": 0,
             "failed_trials": 1, "control_failed": 0, "control_same_failure": 0}


def test_verdicts_for_a_run_are_its_evidence_in_judging_order(inv):
    s = env_state()
    fp = record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, s)
    race = record_run(inv, "compile-race", RACE_FAIL, s)
    verdicts = inv.state.verdicts_for(race)
    assert [str(e) for e in verdicts] == ["supports compile-race", "supports concurrent-fx-trace"]
    assert all(isinstance(e, Evidence) and e.run == race and e.state_key == inv.state.runs[race].state_key
               for e in verdicts), verdicts
    assert [str(e) for e in inv.state.verdicts_for(fp)] == ["inconclusive version-drift"]
    assert inv.state.verdicts_for(99) == []
    assert [r.id for r in inv.state.supporting_runs("compile-race")] == [race]
    assert inv.state.supporting_runs("version-drift") == []


def test_describe_check_says_what_repeats_and_what_it_found(inv):
    s = env_state()
    inv.mark_baseline(record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, s))
    record_run(inv, "env-fingerprint", {"has_baseline": True, "drift": 0}, s, params={"baseline": 1})
    check = inv.check_before_run("env-fingerprint", {"baseline": 1}, "local", state=s)  # measured now
    started = inv.state.runs[2].started_ts
    text = describe_check(inv.state, check, now=started + 12 * 60)
    assert text == (
        "this repeats #2 (env-fingerprint on local, 12 min ago) in the same state (measured just now: same torch "
        "2.11.0+cu128, same code, same caches, same remedies): it was completed — refutes version-drift; "
        "version-drift was refuted in this same state and nothing new has been learned since"
    )
    # one wording: the CLI's refusal, the UI's modal and the recorded flag say the same
    assert inv.describe_check(check, now=started + 12 * 60) == text
    forced = inv.begin_run("env-fingerprint", {"baseline": 1}, "local", check=check)
    flags = [f for f in inv.state.flags if f.run == forced.run]
    assert [f.kind for f in flags] == ["circular-retest", "revisit"]
    assert flags[0].message.startswith("this repeats #2 (env-fingerprint on local, ")
    assert flags[1].message == "version-drift was refuted in this same state and nothing new has been learned since"


def test_nothing_to_say_about_a_fresh_check(inv):
    check = inv.check_before_run("compile-race", {}, "local")
    assert not check.flagged and describe_check(inv.state, check) == ""


def test_event_kinds_are_the_strings_in_the_store(inv):
    record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, env_state())
    stored = {row[0] for row in inv.store.conn.execute("SELECT DISTINCT kind FROM events")}
    assert stored <= {k.value for k in EventKind}
    assert {EventKind.RUN_STARTED, EventKind.RUN_FINISHED, EventKind.EVIDENCE_RECORDED} <= stored
    assert json.dumps({"kind": EventKind.NOTE_ADDED}) == '{"kind": "note.added"}'
    # and the fold knows every kind there is
    assert set(HANDLERS) == set(EventKind)


def test_every_status_has_one_glyph():
    assert set(STATUS_GLYPHS) == set(STATUSES)
    assert len(set(STATUS_GLYPHS.values())) == len(STATUSES)


def test_the_catalog_says_what_each_remedy_addresses(inv):
    from sleuth.sessions import addressed_hypothesis

    assert addressed_hypothesis(inv.state, "lock") == "compile-race"  # both refinements list it: the parent
    assert addressed_hypothesis(inv.state, "precompile") == "concurrent-compile"  # only this refinement does
    assert addressed_hypothesis(inv.state, "no-such-remedy") is None


def test_the_run_to_verify_a_remedy_is_the_latest_supporting_one(inv):
    from sleuth.sessions import run_to_verify

    s = env_state()
    assert run_to_verify(inv.state, "local") is None
    first = record_run(inv, "compile-race", RACE_FAIL, s)
    record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, s)
    assert run_to_verify(inv.state, "local").id == first
    assert run_to_verify(inv.state, "ct200") is None  # another target's reproduction does not verify this one
    again = record_run(inv, "compile-race", RACE_FAIL, env_state(code="c1"))
    assert run_to_verify(inv.state, "local").id == again
    # a later run that supports another hypothesis is not what verifies the lock
    cold = record_run(inv, "compile-cache", {"hits": 0, "misses": 2, "changed": ["torch"]}, env_state(code="c1"))
    assert run_to_verify(inv.state, "local").id == cold
    assert run_to_verify(inv.state, "local", "lock").id == again


def test_a_recorded_preview_is_part_of_the_fold(inv):
    inv.record_preview("lock", "/code/model.py", "aa", "bb", [])
    assert inv.state.last_preview("lock", "/code/model.py")["before_sha"] == "aa"
    replayed = InvestigationState.fold(inv.store.events())
    assert replayed.last_preview("lock", "/code/model.py")["after_sha"] == "bb"
    assert replayed.last_preview("precompile", "/code/model.py") is None


def _scanned_status(st, h: str) -> str:
    """The status as the whole evidence list says it (the definition status() keeps incrementally)."""
    entries = st.evidence.get(h, [])
    decisive = [e for e in entries if e.verdict != "inconclusive"]
    if not decisive:
        return "inconclusive" if entries else "open"
    if len({e.verdict for e in decisive if e.state_key == decisive[-1].state_key}) > 1:
        return "inconclusive"
    if decisive[-1].verdict == "supports":
        return "confirmed" if st.fixed_by(h) else "supported"
    return "refuted"


@settings(max_examples=150, deadline=None)
@given(st_.lists(st_.tuples(st_.sampled_from(["a", "b", "c"]), st_.sampled_from(["h1", "h2"]),
                            st_.sampled_from(["supports", "refutes", "inconclusive"]), st_.booleans()), max_size=30))
def test_status_kept_as_evidence_arrives_equals_a_scan_of_the_evidence(steps):
    """status() reads what the fold keeps per hypothesis (O(1) per call); after every event it
    says what a scan of all the evidence says — states left and returned to, disagreement
    within one state, a hypothesis taken back and added again."""
    from sleuth.hypotheses import Event, EventKind, InvestigationState

    state = InvestigationState()
    seq = 0

    def apply(kind: str, data: dict) -> None:
        nonlocal seq
        seq += 1
        state.apply(Event(seq, float(seq), kind, data))

    for h in ("h1", "h2"):
        apply(EventKind.HYPOTHESIS_ADDED, {"id": h, "title": h})
    for run, (world, h, verdict, take_back) in enumerate(steps, 1):
        apply(EventKind.RUN_STARTED, {"run": run, "probe": "p", "target": "t", "check_key": "k"})
        apply(EventKind.RUN_FINISHED, {"run": run, "classification": "completed", "state_key": world})
        apply(EventKind.EVIDENCE_RECORDED, {"run": run, "hypothesis": h, "verdict": verdict})
        if take_back and verdict == "inconclusive":
            apply(EventKind.HYPOTHESIS_REMOVED, {"id": h})
            apply(EventKind.HYPOTHESIS_ADDED, {"id": h, "title": h})
        for name in ("h1", "h2"):
            assert state.status(name) == _scanned_status(state, name), (run, name)

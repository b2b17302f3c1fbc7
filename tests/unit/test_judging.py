"""Judging a finished run as a pure function (sessions/judging.py): a small folded state in,
the events to write out, in order, and nothing written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sleuth.hypotheses import Event, EventKind, InvestigationState, result_fields
from sleuth.sessions.judging import judge_run

RACE = {
    "id": "race", "title": "a race", "claim": "", "explains": [], "remedies": ["lock"], "links": [],
    "source": "session", "origin": "",
    "probes": [{"probe": "repro", "predicts": "", "supports": "failed_trials > 0", "refutes": "failed_trials == 0",
                "counts_failed": False, "applies": None}],
}
LOCKED = {"application": 1, "remedy": "lock", "hypothesis": "race", "target": "local",
          "files": [{"path": "train.py", "before_sha": "aa", "after_sha": "bb", "diff": "+ with _lock:"}]}

# what judging run #1 (it failed) wrote: the sample before the fix
SUPPORTED_BY_1 = (EventKind.EVIDENCE_RECORDED, {"run": 1, "hypothesis": "race", "verdict": "supports", "rule": "",
                                                "fields": {}})


def run_events(run: int, result: dict[str, Any] | None, state: dict[str, Any], remedies: Sequence[str] = (),
               probe: str = "repro") -> list[tuple[str, dict[str, Any]]]:
    records = [{"kind": "result", **result}, {"kind": "done"}] if result is not None else [{"kind": "done"}]
    return [
        (EventKind.RUN_STARTED, {"run": run, "probe": probe, "params": {}, "target": "local", "kind": "probe",
                                 "check_key": probe, "remedies": list(remedies), "retest_of": None}),
        (EventKind.RUN_FINISHED, {"run": run, "classification": "completed", "reason": "done", "records": records,
                                  "state": state}),
    ]


def fold(*events: tuple[str, dict[str, Any]]) -> InvestigationState:
    said = [(EventKind.INVESTIGATION_CREATED, {"title": "t"}), *events]
    return InvestigationState.fold(Event(seq, float(seq), kind, data) for seq, (kind, data) in enumerate(said, 1))


def judged(state: InvestigationState, run: int) -> list[tuple[str, dict[str, Any]]]:
    info = state.runs[run]
    before = (state.last_seq, len(state.flags), {h: len(e) for h, e in state.evidence.items()})
    out = judge_run(state, info, info.classification or "", result_fields(info.records))
    assert (state.last_seq, len(state.flags), {h: len(e) for h, e in state.evidence.items()}) == before  # wrote nothing
    return [(str(e.kind), e.data) for e in out]


def under_the_lock(failed_trials: int) -> InvestigationState:
    """The race supported by run 1 (one trial failed), the lock applied, then run 2 under it."""
    code = {"code": "c0", "env": {"torch": "2.11.0"}}
    return fold(
        (EventKind.HYPOTHESIS_ADDED, RACE),
        *run_events(1, {"failed_trials": 1}, code),
        SUPPORTED_BY_1,
        (EventKind.REMEDY_APPLIED, LOCKED),
        *run_events(2, {"failed_trials": failed_trials}, {**code, "code": "c1"}, remedies=["lock:bb"]),
    )


def test_a_run_that_fails_again_under_the_fix_supports_the_race_and_verifies_the_fix_not_fixed():
    said = judged(under_the_lock(failed_trials=1), 2)
    assert [kind for kind, _ in said] == ["evidence.recorded", "application.verified"]
    assert said[0][1]["verdict"] == "supports" and said[0][1]["hypothesis"] == "race"
    verified = said[1][1]
    assert (verified["application"], verified["run"], verified["outcome"]) == (1, 2, "not_fixed")
    assert (verified["before"], verified["after"], verified["strong"]) == ([1, 1], [1, 1], True)


def test_a_clean_run_under_the_fix_verifies_it_instead_of_refuting_the_race():
    said = judged(under_the_lock(failed_trials=0), 2)
    assert [kind for kind, _ in said] == ["application.verified"]  # no evidence against the race
    assert (said[0][1]["outcome"], said[0][1]["before"], said[0][1]["after"]) == ("fixed", [1, 1], [0, 1])


def test_a_state_part_that_goes_back_is_flagged_as_an_oscillation():
    def env(torch: str) -> dict[str, Any]:
        return {"code": "c0", "env": {"distributions": {"torch": torch}}}

    state = fold(
        *run_events(1, None, env("2.11.0+cu128"), probe="env-fingerprint"),
        *run_events(2, None, env("2.11.0+cu130"), probe="env-fingerprint"),
        *run_events(3, None, env("2.11.0+cu128"), probe="env-fingerprint"),
    )
    assert judged(state, 2) == []  # a change, not yet a return
    [(kind, flag)] = judged(state, 3)
    assert kind == "flag.raised" and flag["flag"] == "oscillation"
    assert (flag["run"], flag["earlier"], flag["component"]) == (3, 1, "env")
    assert flag["message"] == "torch 2.11.0+cu128 → 2.11.0+cu130 → 2.11.0+cu128 on local (#1, #2, #3)"

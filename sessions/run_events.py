"""A run's life as events, decided without writing anything: the state read before it (when
it tells something), its start with the circular-retest and revisit flags raised first, the
retest declined, how it ended, and a completed run marked as a target's baseline."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..hypotheses import (
    EventKind,
    InvestigationState,
    PreRunCheck,
    RunInfo,
    component_keys,
    describe_retest,
    describe_revisit,
    state_changes,
    state_key_of_parts,
    target_parts,
)
from .errors import InvestigationError
from .new_event import NewEvent

__all__ = ["RunStart", "baseline_marked", "run_declined", "run_finished", "run_of", "run_started", "state_observed"]


@dataclass(frozen=True)
class RunStart:
    run: int
    check: PreRunCheck


def run_of(st: InvestigationState, run: int) -> RunInfo:
    """Run #*run*, or an InvestigationError that says which runs there are."""
    if run not in st.runs:
        raise InvestigationError(f"no run #{run}; runs are #1..#{len(st.runs)}")
    return st.runs[run]


def state_observed(st: InvestigationState, target: str, check: PreRunCheck) -> NewEvent | None:
    """The state read before a run, when it tells something: the target changed since sleuth
    last saw it (by hand, outside sleuth), or the run would repeat an earlier one; else None."""
    measured = check.state
    if measured is None:
        return None
    known = st.known_state(target)
    since = None
    if known is None:  # unknown since a shell command: compare with the last run of this same check
        earlier = [r for r in st.runs.values() if r.check_key == check.check_key and r.state is not None]
        if earlier and earlier[-1].state is not None:
            since = earlier[-1]
            known = (earlier[-1].state, since.state_parts or component_keys(earlier[-1].state))
    parts = check.state_parts or component_keys(measured)
    changed = known is None or target_parts(known[1]) != target_parts(parts)
    if not (changed or check.flagged):
        return None
    data: dict[str, Any] = {"target": target, "state": measured, "state_parts": parts, "state_key": check.expected_state}
    if known is not None:
        data["changes"] = [c.to_dict() for c in state_changes(known[0], measured)]
        if since is not None and data["changes"]:
            data["since"] = since.id  # what changed since that run of the same command
        by = st.overlay_changes_since_state(target)
        if by and data["changes"]:  # sleuth's own overlay did it, not a hand outside sleuth
            data["by"] = "; ".join(by)
    if check.retest_of is not None:
        data["same_as"] = check.retest_of.id
    if check.back_from is not None:
        data["back_from"] = check.back_from.id
    return NewEvent(EventKind.STATE_OBSERVED, data)


def run_started(st: InvestigationState, run: int, probe: str, params: Mapping[str, Any], target: str, kind: str,
                check: PreRunCheck, reason: str | None) -> list[NewEvent]:
    """Run #*run*'s start under *check*, a circular retest or a revisit flagged first; *reason*:
    why a flagged run was run anyway, kept in the flag and the run."""
    anyway = f"; run anyway: {reason}" if reason else ""
    forced = {"forced_because": reason} if reason else {}
    out = []
    if check.retest_of is not None:
        out.append(NewEvent(EventKind.FLAG_RAISED, {
            "flag": "circular-retest",
            "run": run,
            "earlier": check.retest_of.id,
            "target": target,
            "message": describe_retest(st, check) + anyway,
            **forced,
        }))
    for hyp in check.revisits:
        out.append(NewEvent(EventKind.FLAG_RAISED, {
            "flag": "revisit",
            "run": run,
            "hypothesis": hyp,
            "target": target,
            "message": describe_revisit(hyp) + anyway,
            **forced,
        }))
    out.append(NewEvent(EventKind.RUN_STARTED, {
        "run": run,
        "probe": probe,
        "params": dict(params),
        "target": target,
        "kind": kind,
        "check_key": check.check_key,
        "remedies": list(st.active_remedies(target)),
        "retest_of": check.retest_of.id if check.retest_of else None,
        "observed": check.observed_seq or 0,  # its own state read (0: it told nothing)
        **({"stochastic": True} if check.stochastic else {}),
        **({"force_reason": reason} if reason and check.flagged else {}),
    }))
    return out


def run_declined(st: InvestigationState, target: str, check: PreRunCheck) -> list[NewEvent]:
    """The user chose not to repeat a check: a flag, worth a line in the postmortem too."""
    if check.retest_of is None:
        return []
    return [NewEvent(EventKind.FLAG_RAISED, {
        "flag": "circular-retest",
        "run": None,
        "earlier": check.retest_of.id,
        "target": target,
        "declined": True,
        "message": describe_retest(st, check) + "; not run again",
    })]


def run_finished(
    info: RunInfo,
    classification: str,
    reason: str,
    records: list[dict[str, Any]],
    state: dict[str, Any] | None,
    lines: Mapping[str, int] | None,
    exit_status: int | None,
    signal: str | None,
    read_before: Mapping[str, Any] | None,
) -> NewEvent:
    """How run *info* ended; refused where it ended already. A shell command reports no state:
    it ran in *read_before*, the state read just before it."""
    if info.classification is not None:
        raise InvestigationError(f"run #{info.id} already finished ({info.classification})")
    finished: dict[str, Any] = {
        "run": info.id,
        "classification": classification,
        "reason": reason,
        "records": records,
        "state": state,
        "lines": dict(lines or {}),
    }
    if exit_status is not None:
        finished["exit_status"] = exit_status
    if signal is not None:
        finished["signal"] = signal
    if state is not None:
        parts = component_keys(state)
        finished["state_parts"] = parts
        finished["state_key"] = state_key_of_parts(parts, info.remedies)
    elif info.kind == "shell" and read_before is not None:
        parts = component_keys(read_before)
        finished["state_before"] = dict(read_before)
        finished["state_parts"] = parts
        finished["state_key"] = state_key_of_parts(parts, info.remedies)
    return NewEvent(EventKind.RUN_FINISHED, finished)


def baseline_marked(st: InvestigationState, run: int) -> NewEvent:
    """Run #*run* as its target's baseline; only a completed run can be one."""
    info = run_of(st, run)
    if info.classification != "completed":
        raise InvestigationError(
            f"run #{run} is {info.classification or 'still running'}; only a completed run can be a baseline"
        )
    return NewEvent(EventKind.BASELINE_MARKED, {"run": run, "target": info.target})

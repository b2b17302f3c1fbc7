"""What a fleet's runs say read together, decided without writing anything: a comparison's
evidence of version drift on each odd member's run, and a stacks fan-out's ranks read together
as evidence on each hang hypothesis."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..hypotheses import Comparison, EventKind, InvestigationState, judge
from .new_event import NewEvent

__all__ = ["comparison_judged", "fleet_hang_judged"]


def comparison_judged(st: InvestigationState, comparison: Comparison) -> tuple[list[NewEvent], list[tuple[str, int]]]:
    """The fleet's comparison and, where members disagree on what the code runs on (a version,
    a build, the driver, an environment variable), evidence that supports version drift on each
    odd member's run, the members named; with the (odd member, run) pairs judged."""
    out = [NewEvent(EventKind.FLEET_COMPARED, comparison.to_dict())]
    judged: list[tuple[str, int]] = []
    if "version-drift" not in st.hypotheses:
        return out, judged
    total = len(comparison.runs)
    for member, spreads in comparison.odd_members(drift_only=True).items():
        run = comparison.runs[member]
        said = [f"{s.name} {s.odd[member] if s.odd[member] is not None else 'absent'} "
                f"({len(s.holders)} of {total}: {s.majority if s.majority is not None else 'absent'})" for s in spreads]
        out.append(NewEvent(EventKind.EVIDENCE_RECORDED, {
            "run": run, "hypothesis": "version-drift", "verdict": "supports", "rule": "fleet: members disagree",
            "fields": {"fleet": comparison.fleet, "member": member, "differs": "; ".join(said[:5])
                       + (f" and {len(said) - 5} more" if len(said) > 5 else "")},
        }))
        judged.append((member, run))
    return out, judged


def fleet_hang_judged(st: InvestigationState, fleet: str, runs: Mapping[str, int],
                      reading: Mapping[str, Any]) -> tuple[list[NewEvent], int | None]:
    """A stacks fan-out's ranks read together (*reading*: hypotheses.hang's fields) and its
    evidence on each hang hypothesis, on the run of the member that holds the first odd rank
    (else the first member's run): the run whose state the reading belongs to; with that run."""
    odd_member = next((r.get("member") for r in reading.get("odd_ranks") or [] if r.get("member") in runs), None)
    run = runs[odd_member] if odd_member else next(iter(runs.values()), None)
    out = [NewEvent(EventKind.FLEET_HANG, {"fleet": fleet, "runs": dict(runs), "run": run, "reading": dict(reading)})]
    if run is None:
        return out, None
    for hyp_id in st.testing("stacks"):
        test = next(t for t in st.hypotheses[hyp_id].probes if t.probe == "stacks")
        verdict = judge(test, "completed", reading)
        if verdict is None:
            continue
        out.append(NewEvent(EventKind.EVIDENCE_RECORDED, {
            "run": run, "hypothesis": hyp_id, "verdict": verdict.verdict,
            "rule": f"fleet {fleet}: every member's ranks read together ({verdict.rule})",
            "fields": {"fleet": fleet, "members": len(runs), **dict(verdict.fields)}}))
    return out, run

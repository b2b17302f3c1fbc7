"""The next step of a hunt: the one thing sleuth suggests doing now, for one hypothesis or for
the whole investigation. The policy lives here, in the domain, so the UI (the key it binds), the
MCP server's `status` and any other front end suggest the same step; a step says its kind as
data (:data:`StepKind`), never by what its sentence happens to contain."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..hypotheses import InvestigationState

__all__ = ["NextStep", "StepKind", "investigation_next_step", "next_step"]

# remedy: apply one; verify: re-run a check under an applied remedy; run: a new check;
# configure: set what a check needs first (its entry script); export: the postmortem; none: nothing
StepKind = Literal["remedy", "verify", "run", "configure", "export", "none"]


@dataclass(frozen=True)
class NextStep:
    action: str  # "run" | "remedy" | "none": what the front end's key does
    key: str
    text: str
    probe: str | None = None
    remedy: str | None = None
    hypothesis: str | None = None
    params: dict[str, Any] | None = None  # over the probe's own (more trials, say)
    kind: StepKind = "none"


def _probe_cost(probes: dict[str, Any], probe: str) -> float:
    p = probes.get(probe)
    return float(getattr(p, "cost", 1.0)) if p is not None else float("inf")


def _cannot_settle(st: InvestigationState, h: str, probe: str, params: dict[str, Any], target: str) -> bool:
    """Whether the latest completed run of *probe* with these very params on *target* said
    nothing about *h* (its test's `applies` rule left it out, e.g. another face of the race):
    run again as it is, it would say nothing again."""
    asked = {k: v for k, v in params.items() if k != "baseline_run"}
    same = [r for r in st.runs.values() if r.probe == probe and r.target == target and r.classification == "completed"
            and {k: v for k, v in (r.params or {}).items() if k != "baseline_run"} == asked]
    return bool(same) and not any(e.hypothesis == h for e in st.verdicts_for(same[-1].id))


def next_step(
    st: InvestigationState, h: str | None, probes: dict[str, Any], target: str, params_for: Any = None
) -> NextStep:
    """The one step suggested for hypothesis *h*: a remedy when it is supported and nothing
    applied yet; a re-run to verify an applied remedy; else the cheapest of its probes that
    is not a circular retest (a retest cannot change a status)."""
    params_for = params_for or (lambda probe: {})
    if h is None or h not in st.hypotheses:
        return NextStep("none", "", "select a hypothesis")
    hyp = st.hypotheses[h]
    status = st.status(h)
    if status == "confirmed":
        app = st.fixed_by(h)
        return NextStep("none", "e", f"confirmed and fixed by {app.remedy if app else 'a remedy'}: export the postmortem",
                        kind="export")
    active = [a for a in st.applications.values() if a.active and a.target == target]
    if status == "supported" and hyp.remedies and not active:
        remedy = hyp.remedies[0]
        return NextStep("remedy", "f", f"apply {remedy}", remedy=remedy, hypothesis=h, kind="remedy")
    weak = st.weak_verification(h, target) if status == "supported" else None
    if weak is not None:
        app, v = weak
        run = st.runs[v.run]
        before = v.before if v.has("before") and v.before is not None else [0, 0]
        after = v.after if v.has("after") and v.after is not None else [0, 1]
        return NextStep(
            "run", "r",
            f"re-run {run.probe} with {v.needed} trials under {app.remedy}: {after[1]} clean trial"
            f"{'s' * (after[1] != 1)} after {before[0]} of {before[1]} failing before says little",
            probe=run.probe, hypothesis=h, params={"trials": v.needed}, kind="verify",
        )
    if status == "supported" and active:
        supporting = st.supporting_runs(h)
        for run in reversed(supporting):
            check = st.check_before_run(run.probe, run.params, target)
            if not check.flagged:
                return NextStep(
                    "run", "r", f"re-run #{run.id} {run.probe} under {active[-1].remedy} to verify",
                    probe=run.probe, hypothesis=h, kind="verify",
                )
    candidates = []
    unset: list[tuple[str, list[str]]] = []
    for test in hyp.probes:
        if test.probe not in probes:
            continue
        params = params_for(test.probe)
        missing = probes[test.probe].missing(params)
        if missing:  # its default would run nothing of the user's (or sleuth's own example): say what to set
            unset.append((test.probe, missing))
            continue
        if _cannot_settle(st, h, test.probe, {**probes[test.probe].params, **params}, target):
            continue
        check = st.check_before_run(test.probe, params, target)
        if check.flagged:
            continue
        candidates.append((_probe_cost(probes, test.probe), test.probe))
    if not candidates and unset:
        probe, missing = unset[0]
        return NextStep("none", "", f"set {' and '.join(missing)} under [probes.{probe}] in sleuth.toml "
                                    f"(your script that starts the workers) to run {probe}", probe=None, kind="configure")
    if not candidates:
        return NextStep("none", "", "every probe of it was run in this same state: change something first")
    _cost, probe = min(candidates)
    return NextStep("run", "r", f"run {probe}", probe=probe, hypothesis=h, kind="run")


def investigation_next_step(
    st: InvestigationState, probes: dict[str, Any], target: str, params_for: Any = None
) -> NextStep:
    """The one step suggested for the investigation as a whole (`status` of the MCP server):
    applying a remedy to a supported hypothesis first, then verifying one that is applied,
    then the cheapest new probe of an open hypothesis, then what to set so that a probe can
    run (its entry script) — each hypothesis's own next_step, the best of them; "none" with why
    when every probe was run in this state."""
    rank = {"remedy": 0, "verify": 1, "run": 2, "configure": 3}
    best: tuple[int, int, NextStep] | None = None
    for i, h in enumerate(st.hypotheses):
        if st.status(h) in ("refuted", "confirmed"):
            continue
        step = next_step(st, h, probes, target, params_for)
        if step.kind not in rank:  # nothing to do for it (every probe run in this state)
            continue
        key = (rank.get(step.kind, 3), i)
        if best is None or key < best[:2]:
            best = (*key, step)
    if best is not None:
        return best[2]
    if not st.symptoms:
        return NextStep("none", "", "record what was seen first: symptom_add (e.g. fx-trace-error)")
    confirmed = [h for h in st.hypotheses if st.status(h) == "confirmed"]
    if confirmed:
        return NextStep("none", "e", f"{', '.join(confirmed)} confirmed: export the postmortem", kind="export")
    return NextStep("none", "", "every open hypothesis's probes were run in this same state: change something "
                                "(a remedy, an upgrade) or add a hypothesis")

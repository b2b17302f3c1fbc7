"""What a finished run says, decided without writing anything: the oscillation a state part went
through (named by the change), its evidence on each hypothesis it tests (with the sample it
holds), a remedy's verification and how strong it is, and what it says of an upgrade.

Pure functions of the folded state: :func:`judge_run` and :func:`verify_upgrades` return the
events to write (:class:`~sessions.new_event.NewEvent`, in order); the Investigation writes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..hypotheses import (
    NOTHING_TO_VERIFY,
    EventKind,
    Evidence,
    InvestigationState,
    RemedyApplication,
    RunInfo,
    judge,
    nothing_to_verify,
    state_changes,
    strength,
)
from ..hypotheses.errors import MissingField
from ..hypotheses.known import KnownIssue, overlay_took, version_of
from ..hypotheses.stored import Overlay
from .new_event import NewEvent

__all__ = ["judge_run", "verify_upgrades"]

# parameters that size a sample or keep books, never what the experiment is (sessions/judging)
_SAMPLE_PARAMS = frozenset({"trials", "control", "per_run_timeout", "timeout", "baseline_run", "known_good"})


def judge_run(state: InvestigationState, info: RunInfo, classification: str, fields: Mapping[str, Any]) -> list[NewEvent]:
    """What run *info* says, on *state* with its end folded in (*classification*, and *fields*:
    its result fields): a flag for each state part it took back to what an earlier run saw, then,
    on each hypothesis its probe tests, the evidence and, under a remedy in force for it, the
    remedy's verification (a clean run under the remedy verifies it instead of refuting)."""
    flags = [
        NewEvent(EventKind.FLAG_RAISED, {
            "flag": "oscillation",
            "run": info.id,
            "earlier": earlier,
            "target": info.target,
            "component": part,
            "message": _oscillation(state, part, earlier, previous, info.id),
        })
        for part, earlier, previous in state.oscillations(info.id)
    ]
    return flags + _verdicts(state, info, classification, fields)


def _oscillation(state: InvestigationState, part: str, earlier: int, previous: int, run: int) -> str:
    """"torch 2.11.0+cu128 → 2.11.0+cu130 → 2.11.0+cu128 on ct200 (#3, #5, #8)"."""
    target = state.runs[run].target
    runs = f"(#{earlier}, #{previous}, #{run})"
    if part == "env":
        changes = state_changes(state.runs[earlier].state, state.runs[previous].state)
        if changes:
            went = "; ".join(f"{c.name} {c.before or 'absent'} → {c.after or 'absent'} → {c.before or 'absent'}"
                             for c in changes[:3])
            return f"{went} on {target} {runs}"
    return f"the {part} of {target} went back to what #{earlier} saw after #{previous} saw another {runs}"


def _experiment(params: Mapping[str, Any]) -> dict[str, Any]:
    """What makes two runs of a probe the same experiment: their parameters less the size of
    the sample and the bookkeeping (a reproduction with --race compile is not the one with
    the default race, whatever the trials)."""
    return {k: v for k, v in params.items() if k not in _SAMPLE_PARAMS}


def _verdicts(state: InvestigationState, info: RunInfo, classification: str,
              fields: Mapping[str, Any]) -> list[NewEvent]:
    """Evidence on each hypothesis *info*'s probe tests, and the verifications of the remedies
    in force for it."""
    out: list[NewEvent] = []
    for hyp_id in state.testing(info.probe):
        hyp = state.hypotheses[hyp_id]
        test = next(t for t in hyp.probes if t.probe == info.probe)
        verdict = judge(test, classification, fields)
        if verdict is None:
            continue
        remedies = [
            a
            for a in state.applications.values()
            if a.active and a.target == info.target and a.addresses(hyp_id, hyp.remedies) and _in_force(a, info)
        ]
        if remedies and verdict.verdict == "refutes":
            # Under a remedy for it, a clean run is the fix working, not a refutation —
            # as strong as its trials are many, given how often it failed before; where it
            # never failed before, there is nothing to verify.
            for app in remedies:
                said = _verification(state, hyp_id, info, app, "fixed")
                out.append(NewEvent(
                    EventKind.APPLICATION_VERIFIED,
                    {"application": app.id, "run": info.id, "hypothesis": hyp_id,
                     "outcome": "fixed" if said["before"][0] else NOTHING_TO_VERIFY, **said},
                ))
            continue
        read = dict(verdict.fields)
        if "trials" in info.result:  # a sample: its counts go with the evidence
            read.update({k: info.result[k] for k in ("trials", "failed_trials") if k in info.result})
        out.append(NewEvent(
            EventKind.EVIDENCE_RECORDED,
            {
                "run": info.id,
                "hypothesis": hyp_id,
                "verdict": verdict.verdict,
                "rule": verdict.rule,
                "fields": read,
            },
        ))
        if remedies and verdict.verdict == "supports":
            judged = Evidence(run=info.id, hypothesis=hyp_id, verdict=verdict.verdict)  # decided just now
            for app in remedies:
                out.append(NewEvent(
                    EventKind.APPLICATION_VERIFIED,
                    {"application": app.id, "run": info.id, "hypothesis": hyp_id, "outcome": "not_fixed",
                     **_verification(state, hyp_id, info, app, "not_fixed", judged)},
                ))
    return out


def _in_force(app: RemedyApplication, info: RunInfo) -> bool:
    """Whether *app* was in force for *info*: a code remedy is, while active; an upgrade only
    where the run imported the overlay's release (else its overlay did not take, and a clean
    run under it says nothing of the upgrade: verify_upgrades notes it)."""
    ov = app.upgrade
    if ov is None:
        return True
    versions = ((info.state or {}).get("env") or {}).get("distributions") or {}
    return app.digest in info.remedies and overlay_took(version_of(versions, ov.package), ov.version)


def verify_upgrades(state: InvestigationState, info: RunInfo, versions: Mapping[str, str], seen: Mapping[str, str],
                    known: Mapping[str, KnownIssue]) -> list[NewEvent]:
    """What run *info* says of each upgrade it ran under, on *state* with what the run said
    before written (:func:`judge_run`'s events, its known-issue matches). *versions*: what the
    run measured; *seen*: the signatures its output showed; *known*: the known-issue catalog.

    A run under an upgrade's overlay, of a check that showed the issue on this target
    before, verifies the upgrade — if the run imported the overlay's release (its public
    version: a local build label such as +cu128 is named, not compared); else it says the
    overlay did not take and verifies nothing. The issue is asked the way it was matched:
    an entry with a signature is not fixed when the signature shows again, fixed when it
    does not; an entry matched by its rule is not fixed while the rule holds on the new
    run's results, fixed when it does not (a run of another probe asks nothing); an entry
    matched on versions alone has no symptom to look for — leaving the range is all its
    versions say, never a fix: nothing to verify."""
    out: list[NewEvent] = []
    for app in list(state.applications.values()):
        ov = app.upgrade
        if ov is None or not app.active or app.target != info.target or app.digest not in info.remedies:
            continue
        if info.classification not in ("completed", "failed", "no_result"):
            continue  # killed, timed out, a transport fault: asked nothing
        out += _verify_upgrade(state, info, app, ov, versions, seen, known)
    return out


def _verify_upgrade(st: InvestigationState, info: RunInfo, app: RemedyApplication, ov: Overlay,
                    versions: Mapping[str, str], seen: Mapping[str, str],
                    known: Mapping[str, KnownIssue]) -> list[NewEvent]:
    """What run *info* says of upgrade *app* (its overlay *ov*): a verification per hypothesis
    the issue explains, or a note that it says nothing."""
    measured = version_of(versions, ov.package)
    if not overlay_took(measured, ov.version):
        return [NewEvent(EventKind.NOTE_ADDED, {
            "text": f"run #{info.id} under upgrade #{app.id} imported {ov.package} {measured or '(none)'}, "
                    f"not the overlay's {ov.version}: the overlay did not take, so this run verifies nothing",
            "about": f"#{info.id}"})]
    # the sample before: this check on this target under the same remedies but the overlay
    # (a run under the lock and the overlay compares with runs under the lock alone)
    others = set(info.remedies) - {app.digest}
    same = _experiment(info.params)
    before = [r for r in st.runs.values() if r.target == info.target and r.probe == info.probe
              and r.id != info.id and set(r.remedies) == others and r.state is not None
              and _experiment(r.params) == same]
    showed = {r.id for r in before if any(m.id == ov.issue for m in st.known_for_run(r.id)["matches"])}
    if not showed:
        if others and any(any(m.id == ov.issue for m in st.known_for_run(r.id)["matches"])
                          for r in st.runs.values() if r.target == info.target and r.probe == info.probe):
            names = ", ".join(f"{a.remedy} #{a.id}" for a in st.applications.values() if a.digest in others)
            return [NewEvent(EventKind.NOTE_ADDED, {
                "text": f"run #{info.id} ran under upgrade #{app.id} and {names}: no run of {info.probe} "
                        f"under {names} alone showed {ov.issue}, so it says nothing of the upgrade "
                        f"(revert {names} to judge the upgrade alone)",
                "about": f"#{info.id}"})]
        return []  # this check never showed the issue here in these remedies: it says nothing of a fix
    entry = known.get(ov.issue)
    asked = _ask_again(entry, ov.issue, info, seen)
    done = {v.hypothesis for v in app.verified if v.run == info.id}
    out = []
    for hyp in ov.explains or [None]:
        if hyp in done:
            continue  # the probe's own rules verified it already (judge_run)
        # a failure before, for this hypothesis: a run that showed the issue and, where this
        # probe tests the hypothesis and the issue is shown by a signature, supported it (the
        # seed's FX-trace error is no failure of concurrent-compile's, though the entry
        # explains both); a rule that held is the symptom itself
        tested = hyp is not None and hyp in st.testing(info.probe) and bool(entry and entry.signature)
        backed = {e.run for e in st.evidence.get(hyp or "", []) if e.verdict == "supports"}
        failed_runs = {r for r in showed if not tested or r in backed}
        f_before = t_before = 0
        for r in before:
            f, t = _sample(r.result, r.id in failed_runs)
            f_before, t_before = f_before + f, t_before + t
        base = {"application": app.id, "run": info.id, "hypothesis": hyp, "issue": ov.issue, "imported": measured}
        out.append(_upgrade_verified(base, info, ov, asked, f_before, t_before))
    return out


def _upgrade_verified(base: dict[str, Any], info: RunInfo, ov: Overlay, asked: tuple[str, str] | str | None,
                      f_before: int, t_before: int) -> NewEvent:
    """The upgrade's verification on one hypothesis (*base*: who and what), as *asked* says
    (:func:`_ask_again`) against the sample before (*f_before* failed of *t_before* trials)."""
    if asked is None or isinstance(asked, str):
        why = asked or (f"nothing to verify: {ov.issue} has no signature or rule, so its versions alone "
                        f"matched it before; leaving {ov.affected if ov.has('affected') else None} is all they say, never a fix")
        return NewEvent(EventKind.APPLICATION_VERIFIED, {
            **base, "outcome": NOTHING_TO_VERIFY, "before": [f_before, t_before], "after": [0, 0],
            "strong": False, "strength": why, "needed": 0})
    outcome, how = asked
    failed_now = int(info.result.get("failed_trials") or 0)
    if outcome == "fixed" and failed_now:  # the signature gone, the failure not: never a fix
        outcome, how = "not_fixed", (f"{how}, but {failed_now} of {info.result.get('trials')} trials "
                                     "failed another way")
    if outcome == "fixed" and f_before == 0:  # never failed before: a clean run fixes nothing
        return NewEvent(EventKind.APPLICATION_VERIFIED, {
            **base, "outcome": NOTHING_TO_VERIFY, "before": [0, t_before], "after": [0, 0],
            "strong": False, "strength": nothing_to_verify(t_before), "needed": 0})
    f_after, t_after = _sample(info.result, outcome == "not_fixed")
    said: dict[str, Any] = {"before": [f_before, t_before], "after": [f_after, t_after], "strong": True}
    if info.stochastic:
        s = strength(f_before, t_before, f_after, t_after)
        said = {**said, "chance": round(s.chance, 6), "strong": s.strong, "needed": s.needed, "strength": str(s)}
    return NewEvent(EventKind.APPLICATION_VERIFIED, {**base, "outcome": outcome, "signature": how, **said})


def _ask_again(entry: KnownIssue | None, issue: str, info: RunInfo,
               seen: Mapping[str, str]) -> tuple[str, str] | str | None:
    """Whether the run shows the issue again, asked as it was matched: (outcome, how), a
    reason it cannot say (a string), or None for an entry with neither signature nor rule."""
    if entry is None:
        return f"nothing to verify: {issue}, matched before, is no longer in the known-issue catalog"
    if entry.signature:
        return ("not_fixed", "seen again") if entry.id in seen else ("fixed", "not seen")
    if entry.rule is not None:
        if info.probe != entry.probe or info.classification != "completed":
            return (f"nothing to verify: {entry.id} is said on a completed {entry.probe} run's results "
                    f"({entry.rule.source}); this run ({info.probe}, {info.classification}) does not ask it")
        try:
            holds = bool(entry.rule.evaluate(info.result))
        except (MissingField, TypeError) as exc:
            return f"nothing to verify: {entry.rule.source} cannot be read on this run's results ({exc})"
        return ("not_fixed", f"rule holds again: {entry.rule.source}") if holds else \
            ("fixed", f"rule no longer holds: {entry.rule.source}")
    return None


def _sample(result: Mapping[str, Any], failed: bool) -> tuple[int, int]:
    """(failing trials, trials) of one run: its counts, or one trial."""
    trials = result.get("trials")
    if isinstance(trials, int) and trials > 0:
        return int(result.get("failed_trials") or 0) if failed else 0, trials
    return (1 if failed else 0), 1


def _verification(state: InvestigationState, hyp: str, info: RunInfo, app: RemedyApplication, outcome: str,
                  judged: Evidence | None = None) -> dict[str, Any]:
    """The sample before the remedy (its supporting runs of this probe on this target, with
    *judged*: this run's evidence, decided but not yet written) and after it (this run), and
    how strong the verification is (hypotheses/verification)."""
    before_failed = before_trials = 0
    same = _experiment(info.params)
    for e in [*state.evidence.get(hyp, []), *([judged] if judged is not None else [])]:
        run = state.runs[e.run]
        if run.probe != info.probe or run.target != info.target or app.digest in run.remedies \
                or _experiment(run.params) != same:
            continue
        f, t = _sample(run.result, e.verdict == "supports")
        before_failed, before_trials = before_failed + f, before_trials + t
    after_failed, after_trials = _sample(info.result, outcome == "not_fixed")
    if outcome == "fixed" and before_failed == 0:  # it never failed before: a clean run says nothing of a fix
        return {"before": [0, before_trials], "after": [after_failed, after_trials], "strong": False,
                "strength": nothing_to_verify(before_trials), "needed": 0}
    if not info.stochastic:  # a deterministic check says the same each time: one run is the answer
        return {"before": [before_failed, before_trials], "after": [after_failed, after_trials], "strong": True}
    s = strength(before_failed, before_trials, after_failed, after_trials)
    return {"before": [before_failed, before_trials], "after": [after_failed, after_trials],
            "chance": round(s.chance, 6), "strong": s.strong, "needed": s.needed, "strength": str(s)}

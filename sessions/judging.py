"""What a finished run says, recorded as events: its evidence on each hypothesis it tests
(with the sample it holds), a remedy's verification and how strong it is, and the
oscillation a state part went through, named by the change.

A mixin of :class:`~sessions.investigation.Investigation` (which writes through ``_record``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..hypotheses import NOTHING_TO_VERIFY, EventKind, RunInfo, judge, nothing_to_verify, state_changes, strength
from ..hypotheses.errors import MissingField
from ..hypotheses.known import overlay_took, version_of

if TYPE_CHECKING:
    from ..hypotheses import InvestigationState

__all__ = ["RunJudging"]

# parameters that size a sample or keep books, never what the experiment is (sessions/judging)
_SAMPLE_PARAMS = frozenset({"trials", "control", "per_run_timeout", "timeout", "baseline_run", "known_good"})


class RunJudging:
    """Judging a finished run: evidence, verifications, oscillation flags."""

    state: InvestigationState
    known: Mapping[str, Any]  # Investigation's: the known upstream issues by id

    def _record(self, kind: str, data: dict[str, Any], ts: float | None = None) -> Any:  # Investigation's
        raise NotImplementedError

    def _oscillation(self, part: str, earlier: int, previous: int, run: int) -> str:
        """"torch 2.11.0+cu128 → 2.11.0+cu130 → 2.11.0+cu128 on ct200 (#3, #5, #8)"."""
        st = self.state
        target = st.runs[run].target
        runs = f"(#{earlier}, #{previous}, #{run})"
        if part == "env":
            changes = state_changes(st.runs[earlier].state, st.runs[previous].state)
            if changes:
                went = "; ".join(f"{c.name} {c.before or 'absent'} → {c.after or 'absent'} → {c.before or 'absent'}"
                                 for c in changes[:3])
                return f"{went} on {target} {runs}"
        return f"the {part} of {target} went back to what #{earlier} saw after #{previous} saw another {runs}"

    @staticmethod
    def _experiment(params: Mapping[str, Any]) -> dict[str, Any]:
        """What makes two runs of a probe the same experiment: their parameters less the size of
        the sample and the bookkeeping (a reproduction with --race compile is not the one with
        the default race, whatever the trials)."""
        return {k: v for k, v in params.items() if k not in _SAMPLE_PARAMS}

    def _judge(self, info: RunInfo, classification: str, fields: dict[str, Any]) -> None:
        for hyp_id in self.state.testing(info.probe):
            hyp = self.state.hypotheses[hyp_id]
            test = next(t for t in hyp.probes if t.probe == info.probe)
            verdict = judge(test, classification, fields)
            if verdict is None:
                continue
            remedies = [
                a
                for a in self.state.applications.values()
                if a.active and a.target == info.target and a.addresses(hyp_id, hyp.remedies) and self._in_force(a, info)
            ]
            if remedies and verdict.verdict == "refutes":
                # Under a remedy for it, a clean run is the fix working, not a refutation —
                # as strong as its trials are many, given how often it failed before; where it
                # never failed before, there is nothing to verify.
                for app in remedies:
                    said = self._verification(hyp_id, info, app, "fixed")
                    self._record(
                        EventKind.APPLICATION_VERIFIED,
                        {"application": app.id, "run": info.id, "hypothesis": hyp_id,
                         "outcome": "fixed" if said["before"][0] else NOTHING_TO_VERIFY, **said},
                    )
                continue
            read = dict(verdict.fields)
            if "trials" in info.result:  # a sample: its counts go with the evidence
                read.update({k: info.result[k] for k in ("trials", "failed_trials") if k in info.result})
            self._record(
                EventKind.EVIDENCE_RECORDED,
                {
                    "run": info.id,
                    "hypothesis": hyp_id,
                    "verdict": verdict.verdict,
                    "rule": verdict.rule,
                    "fields": read,
                },
            )
            if remedies and verdict.verdict == "supports":
                for app in remedies:
                    self._record(
                        EventKind.APPLICATION_VERIFIED,
                        {"application": app.id, "run": info.id, "hypothesis": hyp_id, "outcome": "not_fixed",
                         **self._verification(hyp_id, info, app, "not_fixed")},
                    )

    @staticmethod
    def _in_force(app: Any, info: RunInfo) -> bool:
        """Whether *app* was in force for *info*: a code remedy is, while active; an upgrade only
        where the run imported the overlay's release (else its overlay did not take, and a clean
        run under it says nothing of the upgrade: _verify_upgrades notes it)."""
        ov = app.upgrade
        if ov is None:
            return True
        versions = ((info.state or {}).get("env") or {}).get("distributions") or {}
        return app.digest in info.remedies and overlay_took(version_of(versions, ov.package), ov.version)

    def _verify_upgrades(self, info: RunInfo, versions: Mapping[str, str], seen: Mapping[str, str]) -> None:
        """A run under an upgrade's overlay, of a check that showed the issue on this target
        before, verifies the upgrade — if the run imported the overlay's release (its public
        version: a local build label such as +cu128 is named, not compared); else it says the
        overlay did not take and verifies nothing. The issue is asked the way it was matched:
        an entry with a signature is not fixed when the signature shows again, fixed when it
        does not; an entry matched by its rule is not fixed while the rule holds on the new
        run's results, fixed when it does not (a run of another probe asks nothing); an entry
        matched on versions alone has no symptom to look for — leaving the range is all its
        versions say, never a fix: nothing to verify."""
        st = self.state
        for app in list(st.applications.values()):
            ov = app.upgrade
            if ov is None or not app.active or app.target != info.target or app.digest not in info.remedies:
                continue
            if info.classification not in ("completed", "failed", "no_result"):
                continue  # killed, timed out, a transport fault: asked nothing
            measured = version_of(versions, ov.package)
            took = overlay_took(measured, ov.version)
            if not took:
                self._record(EventKind.NOTE_ADDED, {
                    "text": f"run #{info.id} under upgrade #{app.id} imported {ov.package} {measured or '(none)'}, "
                            f"not the overlay's {ov.version}: the overlay did not take, so this run verifies nothing",
                    "about": f"#{info.id}"})
                continue
            # the sample before: this check on this target under the same remedies but the overlay
            # (a run under the lock and the overlay compares with runs under the lock alone)
            others = set(info.remedies) - {app.digest}
            same = self._experiment(info.params)
            before = [r for r in st.runs.values() if r.target == info.target and r.probe == info.probe
                      and r.id != info.id and set(r.remedies) == others and r.state is not None
                      and self._experiment(r.params) == same]
            showed = {r.id for r in before if any(m["id"] == ov.issue for m in st.known_for_run(r.id)["matches"])}
            if not showed:
                if others and any(any(m["id"] == ov.issue for m in st.known_for_run(r.id)["matches"])
                                  for r in st.runs.values() if r.target == info.target and r.probe == info.probe):
                    names = ", ".join(f"{a.remedy} #{a.id}" for a in st.applications.values() if a.digest in others)
                    self._record(EventKind.NOTE_ADDED, {
                        "text": f"run #{info.id} ran under upgrade #{app.id} and {names}: no run of {info.probe} "
                                f"under {names} alone showed {ov.issue}, so it says nothing of the upgrade "
                                f"(revert {names} to judge the upgrade alone)",
                        "about": f"#{info.id}"})
                continue  # this check never showed the issue here in these remedies: it says nothing of a fix
            entry = self.known.get(ov.issue)
            asked = self._ask_again(entry, ov.issue, info, seen)
            done = {v.hypothesis for v in app.verified if v.run == info.id}
            for hyp in ov.explains or [None]:
                if hyp in done:
                    continue  # the probe's own rules verified it already (_judge)
                # a failure before, for this hypothesis: a run that showed the issue and, where this
                # probe tests the hypothesis and the issue is shown by a signature, supported it (the
                # seed's FX-trace error is no failure of concurrent-compile's, though the entry
                # explains both); a rule that held is the symptom itself
                tested = hyp is not None and hyp in st.testing(info.probe) and bool(entry and entry.signature)
                backed = {e.run for e in st.evidence.get(hyp or "", []) if e.verdict == "supports"}
                failed_runs = {r for r in showed if not tested or r in backed}
                f_before = t_before = 0
                for r in before:
                    f, t = self._sample(r.result, r.id in failed_runs)
                    f_before, t_before = f_before + f, t_before + t
                base = {"application": app.id, "run": info.id, "hypothesis": hyp, "issue": ov.issue,
                        "imported": measured}
                if asked is None or isinstance(asked, str):
                    why = asked or (f"nothing to verify: {ov.issue} has no signature or rule, so its versions alone "
                                    f"matched it before; leaving {ov.affected if ov.has('affected') else None} is all they say, never a fix")
                    self._record(EventKind.APPLICATION_VERIFIED, {
                        **base, "outcome": NOTHING_TO_VERIFY, "before": [f_before, t_before], "after": [0, 0],
                        "strong": False, "strength": why, "needed": 0})
                    continue
                outcome, how = asked
                failed_now = int(info.result.get("failed_trials") or 0)
                if outcome == "fixed" and failed_now:  # the signature gone, the failure not: never a fix
                    outcome, how = "not_fixed", (f"{how}, but {failed_now} of {info.result.get('trials')} trials "
                                                 "failed another way")
                if outcome == "fixed" and f_before == 0:  # never failed before: a clean run fixes nothing
                    self._record(EventKind.APPLICATION_VERIFIED, {
                        **base, "outcome": NOTHING_TO_VERIFY, "before": [0, t_before], "after": [0, 0],
                        "strong": False, "strength": nothing_to_verify(t_before), "needed": 0})
                    continue
                f_after, t_after = self._sample(info.result, outcome == "not_fixed")
                said: dict[str, Any] = {"before": [f_before, t_before], "after": [f_after, t_after], "strong": True}
                if info.stochastic:
                    s = strength(f_before, t_before, f_after, t_after)
                    said = {**said, "chance": round(s.chance, 6), "strong": s.strong, "needed": s.needed,
                            "strength": str(s)}
                self._record(EventKind.APPLICATION_VERIFIED, {**base, "outcome": outcome, "signature": how, **said})

    @staticmethod
    def _ask_again(entry: Any, issue: str, info: RunInfo, seen: Mapping[str, str]) -> tuple[str, str] | str | None:
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

    @staticmethod
    def _sample(result: Mapping[str, Any], failed: bool) -> tuple[int, int]:
        """(failing trials, trials) of one run: its counts, or one trial."""
        trials = result.get("trials")
        if isinstance(trials, int) and trials > 0:
            return int(result.get("failed_trials") or 0) if failed else 0, trials
        return (1 if failed else 0), 1

    def _verification(self, hyp: str, info: RunInfo, app: Any, outcome: str) -> dict[str, Any]:
        """The sample before the remedy (its supporting runs of this probe on this target)
        and after it (this run), and how strong the verification is (hypotheses/verification)."""
        before_failed = before_trials = 0
        same = self._experiment(info.params)
        for e in self.state.evidence.get(hyp, []):
            run = self.state.runs[e.run]
            if run.probe != info.probe or run.target != info.target or app.digest in run.remedies \
                    or self._experiment(run.params) != same:
                continue
            f, t = self._sample(run.result, e.verdict == "supports")
            before_failed, before_trials = before_failed + f, before_trials + t
        after_failed, after_trials = self._sample(info.result, outcome == "not_fixed")
        if outcome == "fixed" and before_failed == 0:  # it never failed before: a clean run says nothing of a fix
            return {"before": [0, before_trials], "after": [after_failed, after_trials], "strong": False,
                    "strength": nothing_to_verify(before_trials), "needed": 0}
        if not info.stochastic:  # a deterministic check says the same each time: one run is the answer
            return {"before": [before_failed, before_trials], "after": [after_failed, after_trials], "strong": True}
        s = strength(before_failed, before_trials, after_failed, after_trials)
        return {"before": [before_failed, before_trials], "after": [after_failed, after_trials],
                "chance": round(s.chance, 6), "strong": s.strong, "needed": s.needed, "strength": str(s)}

"""What a finished run says, recorded as events: its evidence on each hypothesis it tests
(with the sample it holds), a remedy's verification and how strong it is, and the
oscillation a state part went through, named by the change.

A mixin of :class:`~sessions.investigation.Investigation` (which writes through ``_record``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..hypotheses import EventKind, RunInfo, judge, state_changes, strength

if TYPE_CHECKING:
    from ..hypotheses import InvestigationState

__all__ = ["RunJudging"]


class RunJudging:
    """Judging a finished run: evidence, verifications, oscillation flags."""

    state: InvestigationState

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
                if a.active and a.target == info.target and a.remedy in hyp.remedies
            ]
            if remedies and verdict.verdict == "refutes":
                # Under a remedy for it, a clean run is the fix working, not a refutation —
                # as strong as its trials are many, given how often it failed before.
                for app in remedies:
                    self._record(
                        EventKind.APPLICATION_VERIFIED,
                        {"application": app.id, "run": info.id, "hypothesis": hyp_id, "outcome": "fixed",
                         **self._verification(hyp_id, info, app, "fixed")},
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
        for e in self.state.evidence.get(hyp, []):
            run = self.state.runs[e.run]
            if run.probe != info.probe or run.target != info.target or app.digest in run.remedies:
                continue
            f, t = self._sample(run.result, e.verdict == "supports")
            before_failed, before_trials = before_failed + f, before_trials + t
        after_failed, after_trials = self._sample(info.result, outcome == "not_fixed")
        if info.stochastic and before_trials == 0:  # it never failed before: this says nothing of a fix
            return {"before": [0, 0], "after": [after_failed, after_trials], "strong": False,
                    "strength": "no failing sample before the remedy to compare with", "needed": 0}
        if not info.stochastic:  # a deterministic check says the same each time: one run is the answer
            return {"before": [before_failed, before_trials], "after": [after_failed, after_trials], "strong": True}
        s = strength(before_failed, before_trials, after_failed, after_trials)
        return {"before": [before_failed, before_trials], "after": [after_failed, after_trials],
                "chance": round(s.chance, 6), "strong": s.strong, "needed": s.needed, "strength": str(s)}

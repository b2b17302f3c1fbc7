"""The questions asked of the folded investigation: status (derived, never stored), evidence
by run and by state, what a remedy's verification says, whether a run would repeat an
earlier one, oscillations, the tree of hypotheses, a plain-data snapshot.

A mixin of :class:`~hypotheses.model.InvestigationState`: the fold (model.py) builds the
indexes these read; nothing here changes them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .records import Evidence, PreRunCheck, RemedyApplication, RunInfo
from .state import canonical, check_key, component_keys, state_key_of_parts
from .stored import KnownAtRun, KnownNow, KnownSeen, Note, Verification
from .verification import describe_verifications

if TYPE_CHECKING:
    from .catalog import HypothesisDef, SymptomDef
    from .records import Flag

__all__ = ["StateQueries"]


class StateQueries:
    """Read-only questions over the indexes the fold keeps."""

    # the fold's indexes these questions read (model.py fills them)
    title: str
    last_seq: int
    symptoms: dict[str, SymptomDef]
    hypotheses: dict[str, HypothesisDef]
    runs: dict[int, RunInfo]
    applications: dict[int, RemedyApplication]
    flags: list[Flag]
    notes: list[Note]
    baselines: dict[str, int]
    evidence: dict[str, list[Evidence]]
    _decisive: dict[str, tuple[Evidence, dict[str | None, set[str]]]]
    previews: dict[tuple[str, str], dict[str, Any]]
    user_links: list[tuple[str, str, str]]
    _by_run: dict[int, list[Evidence]]
    _by_check: dict[tuple[str, str], int]
    _last_asked: dict[tuple[str, str, str], int]
    _counts: dict[str, dict[str, int]]
    _known_state: dict[str, tuple[dict[str, Any], dict[str, str]] | None]
    _history: dict[tuple[str, str], list[tuple[str, int]]]
    _polls: set[tuple[str, str]]
    _refuted_at: dict[str, str | None]
    known_matches: list[KnownSeen]
    known_left: list[KnownSeen]
    _known_by_run: dict[int, KnownAtRun]
    _known_live: dict[tuple[str, str], bool]
    _known_state_seq: dict[str, int]
    _overlay_events: list[tuple[str, int, int, str]]

    # ---------------------------------------------------------------- queries

    def next_run_id(self) -> int:
        return len(self.runs) + 1

    def next_application_id(self) -> int:
        return len(self.applications) + 1

    def last_preview(self, remedy: str, path: str) -> dict[str, Any] | None:
        """The latest recorded preview of *remedy* on the file *path* (before/after sha, blocked)."""
        return self.previews.get((remedy, path))

    def active_remedies(self, target: str) -> tuple[str, ...]:
        return tuple(sorted(a.digest for a in self.applications.values() if a.active and a.target == target))

    def known_state(self, target: str) -> tuple[dict[str, Any], dict[str, str]] | None:
        """The last state *target* reported or was read in (and its part keys); None when
        unknown (never seen, or a shell run may have changed anything since)."""
        return self._known_state.get(target)

    def known_state_seq(self, target: str) -> int | None:
        """The event that last told *target*'s state (a run's end or a state read)."""
        return self._known_state_seq.get(target)

    def expected_state(self, target: str) -> str | None:
        """The target's state key as far as we know it now; None when unknown."""
        known = self._known_state.get(target)
        if known is None:
            return None
        return state_key_of_parts(known[1], self.active_remedies(target))

    def testing(self, probe: str) -> list[str]:
        return [h.id for h in self.hypotheses.values() if any(t.probe == probe for t in h.probes)]

    def verdicts_for(self, run: int) -> list[Evidence]:
        """What run #*run* said about each hypothesis it tested, in the order it was judged."""
        return list(self._by_run.get(run, ()))

    def verdict_per_hypothesis(self, run: int) -> list[Evidence]:
        """One verdict per hypothesis run #*run* spoke to, in the order first judged: the last
        decisive one (supports / refutes), else the last inconclusive one. What a sentence
        about the run says (the timeline, the postmortem): never "inconclusive X; supports X"."""
        chosen: dict[str, Evidence] = {}
        for e in self._by_run.get(run, ()):
            kept = chosen.get(e.hypothesis)
            if kept is None or e.verdict != "inconclusive" or kept.verdict == "inconclusive":
                chosen[e.hypothesis] = e
        return list(chosen.values())

    def supporting_runs(self, hypothesis: str) -> list[RunInfo]:
        """The runs whose evidence supports *hypothesis*, oldest first."""
        return [self.runs[e.run] for e in self.evidence.get(hypothesis, []) if e.verdict == "supports"]

    def evidence_counts(self, hypothesis: str) -> dict[str, int]:
        return dict(self._counts.get(hypothesis, {"supports": 0, "refutes": 0, "inconclusive": 0}))

    def fixed_by(self, hypothesis: str) -> RemedyApplication | None:
        """The active application verified to make the symptom stop, if any."""
        for app in self.applications.values():
            if app.active and any(v.hypothesis == hypothesis and v.outcome == "fixed" and v.strong
                                  for v in app.verified):
                return app
        return None

    def verified_by(self, run_id: int) -> list[str]:
        """What run *run_id* verified, in words, once per application and finding: "verified
        lock #1 for compile-race: fixed (…)" (hypotheses/verification.py)."""
        return [line for app in self.applications.values()
                for line in describe_verifications(app.remedy, app.id,
                                                   [v for v in app.verified if v.run == run_id])]

    def weak_verification(self, hypothesis: str, target: str) -> tuple[RemedyApplication, Verification] | None:
        """An active application on *target* whose only verification of *hypothesis* is too
        weak to call it fixed (clean, but too few trials for the failure rate before)."""
        for app in self.applications.values():
            if not app.active or app.target != target:
                continue
            fixed = [v for v in app.verified if v.hypothesis == hypothesis and v.outcome == "fixed"]
            if fixed and not any(v.strong for v in fixed):
                return app, fixed[-1]
        return None

    def status(self, hypothesis: str) -> str:
        """open | supported | refuted | confirmed | inconclusive — derived, never stored.

        Evidence belongs to the state it was seen in. The status is what the evidence of the
        latest state with a decisive verdict says: evidence from an earlier state that the
        world has since left records history, it does not contradict (drift seen at #2 and
        gone at #5 is refuted now, seen then — :meth:`history`). ``inconclusive`` is kept for
        evidence that disagrees within one state, or that never decided anything."""
        kept = self._decisive.get(hypothesis)  # the fold keeps it as evidence arrives
        if kept is None:
            return "inconclusive" if self.evidence.get(hypothesis) else "open"
        last, by_state = kept
        if len(by_state[last.state_key]) > 1:  # the latest state's decisive evidence disagrees
            return "inconclusive"
        if last.verdict == "supports":
            return "confirmed" if self.fixed_by(hypothesis) else "supported"
        return "refuted"

    def history(self, hypothesis: str) -> list[tuple[str | None, list[Evidence]]]:
        """(state key, its decisive evidence) per state, oldest first, merging consecutive
        runs in one state: what the evidence said as the world changed."""
        out: list[tuple[str | None, list[Evidence]]] = []
        for e in self.evidence.get(hypothesis, []):
            if e.verdict == "inconclusive":
                continue
            if out and out[-1][0] == e.state_key:
                out[-1][1].append(e)
            else:
                out.append((e.state_key, [e]))
        return out

    def check_before_run(
        self,
        probe: str,
        params: Mapping[str, Any],
        target: str,
        *,
        state: Mapping[str, Any] | None = None,
        definition: Mapping[str, Any] | None = None,
        unknown: str | None = None,
        stochastic: bool = False,
    ) -> PreRunCheck:
        """Is running *probe* now a circular retest, or a revisit of a refuted hypothesis?

        With *state* (the target's state read just now) the answer is measured: a retest of
        the latest earlier run of this check that saw exactly this state, even when another
        state came in between (the world went back). With *unknown* (the read failed) nothing
        is flagged. With neither, the state is predicted from the target's last report — good
        enough to choose a next step, never used to refuse a run."""
        ck = check_key(probe, params, target, definition)
        if probe == "shell" and (params.get("poll") or params.get("sample")
                                 or (target, str(params.get("cmd"))) in self._polls):
            stochastic = True  # a poll, declared once, or a sample of a flaky failure: its repeats are meant
        if stochastic:  # a race reproduction is a sample: repeating it adds trials
            return PreRunCheck(ck, None, measured=state is not None, state=dict(state) if state else None,
                               unknown=unknown, stochastic=True)
        if unknown is not None:
            return PreRunCheck(ck, None, measured=True, unknown=unknown)
        parts = None
        if state is not None:
            parts = component_keys(state)
            expected = state_key_of_parts(parts, self.active_remedies(target))
        else:
            expected = self.expected_state(target)
            if expected is None:
                return PreRunCheck(ck, None)
        earlier = self._by_check.get((ck, expected))
        retest = self.runs[earlier] if earlier is not None else None
        latest = self._last_asked.get((probe, canonical(params), target))
        back_from = None
        if retest is not None and latest is not None and latest != earlier and self.runs[latest].state_key != expected:
            back_from = self.runs[latest]
        revisits = tuple(
            h for h in self.testing(probe) if self.status(h) == "refuted" and self._refuted_at.get(h) == expected
        )
        return PreRunCheck(ck, expected, retest, revisits, measured=state is not None,
                           state=dict(state) if state is not None else None, back_from=back_from, state_parts=parts)

    def shell_samples(self, run_id: int) -> dict[str, Any] | None:
        """For a shell run given as a sample of a flaky failure: every sample of the same command
        on the same target in the same state, pooled as trials ({"runs", "failed", "ids", "said"}:
        failed = did not exit 0); None for any other run."""
        run = self.runs.get(run_id)
        if run is None or run.kind != "shell" or not run.params.get("sample") or run.state_key is None:
            return None
        same = [r for r in self.runs.values() if r.kind == "shell" and r.params.get("sample") and r.target == run.target
                and r.params.get("cmd") == run.params.get("cmd") and r.state_key == run.state_key
                and r.classification is not None and r.id <= run_id]
        failed = [r for r in same if r.classification != "completed" or (r.exit_status or 0) != 0]
        n, k = len(same), len(failed)
        low, high = _wilson(k, n)
        said = (f"sample {n} of this command in this state: {k} of {n} failed "
                f"(rate {k / n:.0%}; 95% interval {low:.0%}–{high:.0%})")
        return {"runs": n, "failed": k, "ids": [r.id for r in same], "interval": [round(low, 3), round(high, 3)],
                "said": said}

    def oscillations(self, run_id: int) -> list[tuple[str, int, int]]:
        """(part, earlier run, previous run) for each state part that *run_id* returned to."""
        run = self.runs[run_id]
        found = []
        for (target, part), history in self._history.items():
            if target != run.target or not history or history[-1][1] != run_id:
                continue
            key = history[-1][0]
            earlier = [rid for k, rid in history[:-1] if k == key]
            if earlier:
                found.append((part, earlier[-1], history[-2][1]))
        return found

    def known_for_run(self, run: int) -> KnownAtRun:
        """The known upstream issues run #*run* matched, and those that stopped applying at it."""
        said = self._known_by_run.get(run)
        return {"matches": list(said["matches"]), "left": list(said["left"])} if said else {"matches": [], "left": []}

    def known_for(self, hypothesis: str) -> list[KnownNow]:
        """The latest match of each known upstream issue that explains *hypothesis* (on any
        target), with ``applies_now``: whether that target's latest run still matched it
        (False once its versions left the affected range). Evidence of its own kind: a match
        says upstream knows this failure in these versions; it is never an experiment."""
        latest: dict[tuple[str, str], KnownSeen] = {}
        for m in self.known_matches:
            if hypothesis in m.explains:
                latest[(m.target, m.id)] = m
        return [KnownNow(m, self._known_live.get(key, True)) for key, m in latest.items()]

    def known_live(self, target: str, entry: str) -> bool | None:
        """Whether known issue *entry* applied at *target*'s latest run that spoke of it; None if
        no run on *target* ever matched it."""
        return self._known_live.get((target, entry))

    def overlay_changes_since_state(self, target: str) -> list[str]:
        """sleuth's own changes to what *target*'s runs import since its state was last told:
        an upgrade's overlay made or removed ("upgrade #1 made its overlay (torch==2.15.0)")."""
        since = self._known_state_seq.get(target, 0)
        out = []
        for t, seq, app_id, what in self._overlay_events:
            if t == target and seq > since:
                ov = self.applications[app_id].upgrade
                if ov is not None:
                    out.append(f"upgrade #{app_id} {what} its overlay ({ov.package}=={ov.version})")
        return out

    def children(self, hypothesis: str) -> list[str]:
        return [h.id for h in self.hypotheses.values() if ("refines", hypothesis) in h.links]

    def parent(self, hypothesis: str) -> str | None:
        for kind, other in self.hypotheses[hypothesis].links:
            if kind == "refines":
                return other
        return None

    def hypothesis_summary(self, hypothesis: str) -> dict[str, Any]:
        hyp = self.hypotheses[hypothesis]
        links = [{"kind": k, "to": t} for k, t in hyp.links]
        links += [
            {"kind": kind, "to": dst.split(":", 1)[1]}
            for src, dst, kind in self.user_links
            if src == f"hyp:{hypothesis}"
        ]
        return {
            "id": hyp.id,
            "title": hyp.title,
            "status": self.status(hyp.id),
            "claim": hyp.claim,
            "probes": [t.probe for t in hyp.probes],
            "remedies": list(hyp.remedies),
            "evidence": self.evidence_counts(hyp.id),
            "known": [{"id": k.match.id, "target": k.match.target, "run": k.match.run, "applies_now": k.applies_now,
                       "fixed_in": k.match.fixed_in, "source": k.match.source} for k in self.known_for(hyp.id)],
            "explains": list(hyp.explains),
            "links": links,
            "refines": self.parent(hyp.id),
            "source": hyp.source,
        }

    def snapshot(self) -> dict[str, Any]:
        """The whole folded state as plain data (what replay --json prints), a deep copy."""
        return copy.deepcopy(
            {
                "event": self.last_seq,
                "title": self.title,
                "symptoms": [s.to_dict() for s in self.symptoms.values()],
                "hypotheses": [self.hypothesis_summary(h) for h in self.hypotheses],
                "runs": [r.to_dict() for r in self.runs.values()],
                "applications": [a.to_dict() for a in self.applications.values()],
                "flags": [f.to_dict() for f in self.flags],
                "notes": [n.to_dict() for n in self.notes],
                "baselines": self.baselines,
                "known": [{k: v for k, v in m.to_dict().items() if k not in ("seq", "ts")} for m in self.known_matches],
            }
        )


def _wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a failure rate seen as *k* of *n*: how sure a count of runs is."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)

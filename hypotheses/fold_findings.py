"""Folding what was found and done besides runs: remedy previews, applications, reverts and
verifications; flags, notes, state reads; fleets expanded, compared and read for a hang;
known upstream issues matched."""

from __future__ import annotations

from .folded import FoldedIndexes
from .payloads import (
    ApplicationVerified,
    FlagRaised,
    FleetExpanded,
    FleetHang,
    KnownMatched,
    NoteAdded,
    RemedyApplied,
    RemedyPreviewed,
    RemedyReverted,
    StateObserved,
)
from .records import Event, Flag, Observation, RemedyApplication
from .state import component_keys

__all__ = ["FindingFolds"]


class FindingFolds(FoldedIndexes):
    """The handlers of the remedy, flag, note, state-read, fleet and known-issue events (a
    mixin of InvestigationState)."""

    def _previewed(self, e: Event) -> None:
        p = RemedyPreviewed.of(e)
        self.previews[(p.remedy, p.path)] = {**e.data, "seq": e.seq}

    def _applied(self, e: Event) -> None:
        p = RemedyApplied.of(e)
        app = RemedyApplication(
            id=p.application,
            remedy=p.remedy,
            hypothesis=p.hypothesis,
            target=p.target,
            files=p.files,
            applied_ts=e.ts,
            upgrade=p.overlay,
            applied_seq=e.seq,
        )
        self.applications[app.id] = app
        if app.upgrade is not None:
            self._overlay_events.append((app.target, e.seq, app.id, "made"))
        self._node(f"remedy:{app.remedy}", kind="remedy")
        self._node(f"app:{app.id}", kind="application")
        self._edge(f"app:{app.id}", f"remedy:{app.remedy}", "applied")

    def _reverted(self, e: Event) -> None:
        app = self.applications[RemedyReverted.of(e).application]
        app.active = False
        if app.upgrade is not None:
            self._overlay_events.append((app.target, e.seq, app.id, "removed"))

    def _verified(self, e: Event) -> None:
        p = ApplicationVerified.of(e)
        app = self.applications[p.application]
        app.verified.append(p.verification)
        self._edge(f"app:{app.id}", f"run:{p.run}", "verified-by", outcome=p.outcome)

    def _flag(self, e: Event) -> None:
        p = FlagRaised.of(e)
        self.flags.append(
            Flag(
                kind=p.flag,
                seq=e.seq,
                ts=e.ts,
                target=p.target,
                message=p.message,
                run=p.run,
                earlier=p.earlier,
                hypothesis=p.hypothesis,
                component=p.component,
            )
        )

    def _note(self, e: Event) -> None:
        p = NoteAdded.of(e)
        note = {"seq": e.seq, "ts": e.ts, "text": p.text, "about": p.about}
        if p.finding:  # sleuth's own note: a finding about a target's environment
            note.update(finding=p.finding, target=p.target)
        self.notes.append(note)

    def _observed(self, e: Event) -> None:
        p = StateObserved.of(e)
        self.observations.append(Observation(e.seq, e.ts, p))
        if p.state is not None:
            state = e.data["state"]  # the stored object itself, as every reader had it
            self._known_state[p.target] = (state, p.state_parts or component_keys(state))
            self._known_state_seq[p.target] = e.seq

    def _fleet_expanded(self, e: Event) -> None:
        self.fleets[FleetExpanded.of(e).fleet] = {**e.data, "seq": e.seq, "ts": e.ts}

    def _fleet_compared(self, e: Event) -> None:
        self.comparisons.append({**e.data, "seq": e.seq, "ts": e.ts})

    def _known_matched(self, e: Event) -> None:
        p = KnownMatched.of(e)
        run = self.runs.get(p.run)
        target = p.target or (run.target if run else "")
        state_key = run.state_key if run else None
        said = self._known_by_run.setdefault(p.run, {"matches": [], "left": []})
        where = {"run": p.run, "target": target, "state_key": state_key, "seq": e.seq, "ts": e.ts}
        for m in p.matches:
            match = {**m.to_dict(), **where}
            self.known_matches.append(match)
            said["matches"].append(match)
            self._known_live[(target, m.id)] = True
            self._node(f"known:{m.id}", kind="known", title=m.title)
            self._edge(f"run:{p.run}", f"known:{m.id}", "matched")
            for h in m.explains:
                if h in self.hypotheses:
                    self._edge(f"known:{m.id}", f"hyp:{h}", "explains")
        for m in p.left:
            left = {**m.to_dict(), **where}
            self.known_left.append(left)
            said["left"].append(left)
            self._known_live[(target, m.id)] = False

    def _fleet_hang(self, e: Event) -> None:
        self.fleet_hangs.append(FleetHang.of(e))

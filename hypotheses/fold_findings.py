"""Folding what was found and done besides runs: remedy previews, applications, reverts and
verifications; flags, notes, state reads; fleets expanded, compared and read for a hang;
known upstream issues matched."""

from __future__ import annotations

from collections.abc import Callable

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
from .records import Event, EventKind, Flag, Observation, RemedyApplication
from .state import component_keys
from .stored import KnownSeen, Note

__all__ = ["HANDLERS"]



def previewed(st: FoldedIndexes, e: Event) -> None:
    p = RemedyPreviewed.of(e)
    st.previews[(p.remedy, p.path)] = {**e.data, "seq": e.seq}


def applied(st: FoldedIndexes, e: Event) -> None:
    p = RemedyApplied.of(e)
    app = RemedyApplication(id=p.application, remedy=p.remedy, hypothesis=p.hypothesis, target=p.target, files=p.files,
                            applied_ts=e.ts, upgrade=p.overlay, applied_seq=e.seq)
    st.applications[app.id] = app
    if app.upgrade is not None:
        st._overlay_events.append((app.target, e.seq, app.id, "made"))
    st._node(f"remedy:{app.remedy}", kind="remedy")
    st._node(f"app:{app.id}", kind="application")
    st._edge(f"app:{app.id}", f"remedy:{app.remedy}", "applied")


def reverted(st: FoldedIndexes, e: Event) -> None:
    app = st.applications[RemedyReverted.of(e).application]
    app.active = False
    if app.upgrade is not None:
        st._overlay_events.append((app.target, e.seq, app.id, "removed"))


def verified(st: FoldedIndexes, e: Event) -> None:
    p = ApplicationVerified.of(e)
    app = st.applications[p.application]
    app.verified.append(p.verification)
    st._edge(f"app:{app.id}", f"run:{p.run}", "verified-by", outcome=p.outcome)


def flag(st: FoldedIndexes, e: Event) -> None:
    p = FlagRaised.of(e)
    st.flags.append(Flag(kind=p.flag, seq=e.seq, ts=e.ts, target=p.target, message=p.message, run=p.run,
                         earlier=p.earlier, hypothesis=p.hypothesis, component=p.component))


def note(st: FoldedIndexes, e: Event) -> None:
    p = NoteAdded.of(e)
    note = {"seq": e.seq, "ts": e.ts, "text": p.text, "about": p.about}
    if p.finding:  # sleuth's own note: a finding about a target's environment
        note.update(finding=p.finding, target=p.target)
    st.notes.append(Note.from_dict(note))


def observed(st: FoldedIndexes, e: Event) -> None:
    p = StateObserved.of(e)
    st.observations.append(Observation(e.seq, e.ts, p))
    if p.state is not None:
        state = e.data["state"]  # the stored object itself, as every reader had it
        st._known_state[p.target] = (state, p.state_parts or component_keys(state))
        st._known_state_seq[p.target] = e.seq


def fleet_expanded(st: FoldedIndexes, e: Event) -> None:
    p = FleetExpanded.of(e)
    st.fleets[p.fleet] = p


def fleet_compared(st: FoldedIndexes, e: Event) -> None:
    st.comparisons.append({**e.data, "seq": e.seq, "ts": e.ts})


def known_matched(st: FoldedIndexes, e: Event) -> None:
    p = KnownMatched.of(e)
    run = st.runs.get(p.run)
    target = p.target or (run.target if run else "")
    state_key = run.state_key if run else None
    said = st._known_by_run.setdefault(p.run, {"matches": [], "left": []})
    where = {"run": p.run, "target": target, "state_key": state_key, "seq": e.seq, "ts": e.ts}
    for m in p.matches:
        match = KnownSeen.from_dict({**m.to_dict(), **where})  # the entry's keys in their order, then where
        st.known_matches.append(match)
        said["matches"].append(match)
        st._known_live[(target, m.id)] = True
        st._node(f"known:{m.id}", kind="known", title=m.title)
        st._edge(f"run:{p.run}", f"known:{m.id}", "matched")
        for h in m.explains:
            if h in st.hypotheses:
                st._edge(f"known:{m.id}", f"hyp:{h}", "explains")
    for m in p.left:
        left = KnownSeen.from_dict({**m.to_dict(), **where})
        st.known_left.append(left)
        said["left"].append(left)
        st._known_live[(target, m.id)] = False


def fleet_hang(st: FoldedIndexes, e: Event) -> None:
    st.fleet_hangs.append(FleetHang.of(e))


# the handler of each event kind above, by kind (hypotheses/model.py puts the tables together)
HANDLERS: dict[str, Callable[[FoldedIndexes, Event], None]] = {
    EventKind.REMEDY_PREVIEWED: previewed,
    EventKind.REMEDY_APPLIED: applied,
    EventKind.REMEDY_REVERTED: reverted,
    EventKind.APPLICATION_VERIFIED: verified,
    EventKind.FLAG_RAISED: flag,
    EventKind.NOTE_ADDED: note,
    EventKind.STATE_OBSERVED: observed,
    EventKind.FLEET_EXPANDED: fleet_expanded,
    EventKind.FLEET_COMPARED: fleet_compared,
    EventKind.KNOWN_MATCHED: known_matched,
    EventKind.FLEET_HANG: fleet_hang,
}

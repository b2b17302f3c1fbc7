"""The investigation's notes, decided without writing anything: the user's, about the whole
hunt, a hypothesis or a run (#N), and sleuth's own findings about a target, each said once."""

from __future__ import annotations

from ..hypotheses import EventKind, InvestigationState
from .errors import InvestigationError
from .new_event import NewEvent

__all__ = ["finding_noted", "has_finding", "note_added"]


def note_added(st: InvestigationState, text: str, about: str | None = None) -> NewEvent:
    """The user's note *text*, about a hypothesis id or a run (#N) where *about* says one."""
    if not text.strip():
        raise InvestigationError("a note needs some text")
    if (
        about is not None
        and about not in st.hypotheses
        and not (about.startswith("#") and about[1:].isdigit() and int(about[1:]) in st.runs)
    ):
        raise InvestigationError(f"a note can be about a hypothesis id or a run (#N); {about!r} is neither")
    return NewEvent(EventKind.NOTE_ADDED, {"text": text, "about": about})


def has_finding(st: InvestigationState, target: str, finding: str) -> bool:
    """Whether sleuth said *finding* about *target* already."""
    return any(n.finding == finding and n.target == target for n in st.notes)


def finding_noted(st: InvestigationState, target: str, finding: str, sentence: str, run: int) -> NewEvent | None:
    """sleuth's note saying *sentence* about *target* (about the run that showed it); None when
    it was said already."""
    if has_finding(st, target, finding):
        return None
    return NewEvent(EventKind.NOTE_ADDED, {"text": f"sleuth, on {target}: {sentence}", "about": f"#{run}",
                                           "finding": finding, "target": target})

"""The investigation as a fold of events: a networkx graph plus the indexes queries need.

Nothing here is stored: every field is derived from the event sequence, so folding the first
k events gives the investigation exactly as it stood at event k (that is replay). A
hypothesis's status is computed from its evidence and the remedy applications on demand.

Node ids: ``symptom:ID``, ``hyp:ID``, ``probe:ID``, ``remedy:ID``, ``run:N``, ``app:N``.
Edge kinds (the design card's): explains, tests, of, evidence, addresses, applied,
verified-by, and between hypotheses refines, competes, exposes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .fold_definitions import DefinitionFolds
from .fold_findings import FindingFolds
from .fold_runs import ANSWERED as _ANSWERED  # noqa: F401  (importable here, as it was)
from .fold_runs import RunFolds
from .folded import _gc_paused
from .queries import StateQueries
from .records import Event, EventKind

__all__ = ["InvestigationState"]


class InvestigationState(DefinitionFolds, RunFolds, FindingFolds, StateQueries):
    """Fold events into the graph and the indexes (folded.py; the handlers are the fold_*.py
    mixins); the questions asked of them are :class:`StateQueries` (queries.py)."""

    def __init__(self) -> None:
        super().__init__()
        self._handlers: dict[str, Callable[[Event], None]] = {
            EventKind.INVESTIGATION_CREATED: self._created,
            EventKind.SYMPTOM_ADDED: self._symptom,
            EventKind.HYPOTHESIS_ADDED: self._hypothesis,
            EventKind.SYMPTOM_REMOVED: self._symptom_removed,
            EventKind.HYPOTHESIS_REMOVED: self._hypothesis_removed,
            EventKind.LINK_ADDED: self._link,
            EventKind.RUN_STARTED: self._run_started,
            EventKind.RUN_FINISHED: self._run_finished,
            EventKind.EVIDENCE_RECORDED: self._evidence,
            EventKind.REMEDY_PREVIEWED: self._previewed,
            EventKind.REMEDY_APPLIED: self._applied,
            EventKind.REMEDY_REVERTED: self._reverted,
            EventKind.APPLICATION_VERIFIED: self._verified,
            EventKind.FLAG_RAISED: self._flag,
            EventKind.NOTE_ADDED: self._note,
            EventKind.BASELINE_MARKED: self._baseline,
            EventKind.STATE_OBSERVED: self._observed,
            EventKind.FLEET_EXPANDED: self._fleet_expanded,
            EventKind.FLEET_COMPARED: self._fleet_compared,
            EventKind.KNOWN_MATCHED: self._known_matched,
            EventKind.FLEET_HANG: self._fleet_hang,
        }

    # ---------------------------------------------------------------- folding

    @classmethod
    def fold(cls, events: Iterable[Event]) -> InvestigationState:
        state = cls()
        with _gc_paused():
            for event in events:
                state.apply(event)
        return state

    def author(self, seq: int) -> str:
        """Who wrote event *seq* ("" where the session did not record it)."""
        return self.authors.get(seq, "")

    def apply(self, event: Event) -> None:
        handler = self._handlers.get(event.kind)
        if handler is not None:  # unknown kinds come from newer versions: keep, skip
            handler(event)
        if event.author:
            self.authors[event.seq] = event.author
        self.last_seq = event.seq
        self.last_ts = event.ts

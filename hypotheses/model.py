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

from . import fold_definitions, fold_findings, fold_runs
from .fold_runs import ANSWERED as _ANSWERED  # noqa: F401  (importable here, as it was)
from .folded import FoldedIndexes, _gc_paused
from .queries import StateQueries
from .records import Event

__all__ = ["HANDLERS", "InvestigationState"]


# each event kind's handler: a function of the fold's indexes and the event (fold_*.py, by what
# the events are about); unknown kinds come from newer versions and are kept, skipped
HANDLERS: dict[str, Callable[[FoldedIndexes, Event], None]] = {
    **fold_definitions.HANDLERS, **fold_runs.HANDLERS, **fold_findings.HANDLERS,
}


class InvestigationState(FoldedIndexes, StateQueries):
    """The fold's indexes (folded.py), filled event by event by the handlers of fold_*.py; the
    questions asked of them are :class:`StateQueries` (queries.py)."""

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
        handler = HANDLERS.get(event.kind)
        if handler is not None:  # unknown kinds come from newer versions: keep, skip
            handler(self, event)
        if event.author:
            self.authors[event.seq] = event.author
        self.last_seq = event.seq
        self.last_ts = event.ts

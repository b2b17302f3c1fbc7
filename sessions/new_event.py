"""An event decided but not yet written: what the deciders in sessions/ return (judging, graph
edits, a run's start and end, known-issue matches) and :class:`~sessions.investigation.Investigation`
writes, in order. Deciding writes nothing; writing decides nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..hypotheses import EventKind

__all__ = ["NewEvent"]


@dataclass(frozen=True)
class NewEvent:
    """One event to write: its kind and its data, as the store will keep them."""

    kind: EventKind
    data: dict[str, Any]

"""One payload type per event kind (``PAYLOADS``): an event's data as a typed record, parsed
once from the stored JSON and given back exactly (``Record``, stored.py). ``Event.payload``
(records.py) is the event's own; the fold (model.py) reads its events through ``X.of(event)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar, Self

from .records import Event, EventKind
from .stored import KnownMatch, Overlay, Record, StateRead, Verification

__all__ = [
    "PAYLOADS",
    "ApplicationVerified",
    "BaselineMarked",
    "EvidenceRecorded",
    "FlagRaised",
    "FleetCompared",
    "FleetExpanded",
    "FleetHang",
    "HypothesisAdded",
    "HypothesisRemoved",
    "InvestigationCreated",
    "KnownMatched",
    "LinkAdded",
    "NoteAdded",
    "Payload",
    "RemedyApplied",
    "RemedyPreviewed",
    "RemedyReverted",
    "RunFinished",
    "RunStarted",
    "StateObserved",
    "SymptomAdded",
    "SymptomRemoved",
    "parse_payload",
]


@dataclass(frozen=True)
class Payload(Record):
    """An event's data."""

    @classmethod
    def of(cls, data: Event | Mapping[str, Any]) -> Self:
        """*data* (an Event: its payload, parsed once; or an event's data) as this payload."""
        if isinstance(data, Event):  # parsed already (Event.payload), else parsed here and not kept
            payload = data.__dict__.get("_payload")
            return payload if isinstance(payload, cls) else cls.from_dict(data.data)
        return cls.from_dict(data)


@dataclass(frozen=True)
class InvestigationCreated(Payload):
    title: str = ""


@dataclass(frozen=True)
class SymptomAdded(Payload):
    id: str
    title: str = ""  # absent in no session sleuth wrote; the fold then says the id
    text: str = ""


@dataclass(frozen=True)
class SymptomRemoved(Payload):
    id: str


@dataclass(frozen=True)
class HypothesisAdded(Payload):
    """The full definition (``HypothesisDef.to_dict``: rules as source); the fold reads it
    with ``HypothesisDef.from_dict(payload.to_dict())``."""

    id: str
    title: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class HypothesisRemoved(Payload):
    id: str


@dataclass(frozen=True)
class LinkAdded(Payload):
    src: str
    dst: str
    kind: str


@dataclass(frozen=True)
class RunStarted(Payload):
    run: int
    probe: str
    target: str
    check_key: str
    params: dict[str, Any] = field(default_factory=dict)
    kind: str = "probe"
    remedies: list[str] = field(default_factory=list)
    retest_of: int | None = None
    observed: int | None = None  # its own state read's seq (0: it told nothing; absent: before runs named it)
    stochastic: bool = False
    force_reason: str | None = None


@dataclass(frozen=True)
class RunFinished(Payload):
    NESTED: ClassVar[Mapping[str, type[Record]]] = {"state": StateRead}

    run: int
    classification: str
    reason: str = ""
    records: list[dict[str, Any]] = field(default_factory=list)
    state: StateRead | None = None
    lines: dict[str, int] = field(default_factory=dict)
    exit_status: int | None = None
    signal: str | None = None
    state_parts: dict[str, str] | None = None
    state_key: str | None = None
    state_before: dict[str, Any] | None = None  # a shell command's: the state read just before it
    state_unknown: bool = False


@dataclass(frozen=True)
class EvidenceRecorded(Payload):
    run: int
    hypothesis: str
    verdict: str
    rule: str = ""
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RemedyPreviewed(Payload):
    remedy: str
    path: str
    blocked: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RemedyApplied(Payload):
    NESTED: ClassVar[Mapping[str, type[Record]]] = {"overlay": Overlay}

    application: int
    remedy: str
    hypothesis: str | None = None
    target: str = "local"
    files: list[dict[str, Any]] = field(default_factory=list)
    overlay: Overlay | None = None


@dataclass(frozen=True)
class RemedyReverted(Payload):
    application: int


@dataclass(frozen=True)
class ApplicationVerified(Payload):
    """``application`` and the :class:`Verification` it gives (``verification``)."""

    application: int
    run: int
    outcome: str

    @cached_property
    def verification(self) -> Verification:
        return Verification.from_dict({k: v for k, v in self.to_dict().items() if k != "application"})


@dataclass(frozen=True)
class FlagRaised(Payload):
    flag: str
    target: str = ""
    message: str = ""
    run: int | None = None
    earlier: int | None = None
    hypothesis: str | None = None
    component: str | None = None


@dataclass(frozen=True)
class NoteAdded(Payload):
    text: str
    about: str | None = None
    finding: str | None = None  # sleuth's own note: a finding about a target's environment
    target: str | None = None


@dataclass(frozen=True)
class BaselineMarked(Payload):
    run: int
    target: str


@dataclass(frozen=True)
class StateObserved(Payload):
    NESTED: ClassVar[Mapping[str, type[Record]]] = {"state": StateRead}

    target: str
    state: StateRead | None = None
    state_parts: dict[str, str] | None = None
    state_key: str | None = None
    changes: list[dict[str, Any]] | None = None
    since: int | None = None
    by: str | None = None
    same_as: int | None = None
    back_from: int | None = None


@dataclass(frozen=True)
class FleetExpanded(Payload):
    fleet: str
    how: str = ""
    members: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class FleetCompared(Payload):
    """A fleet's comparison (``Comparison.to_dict``); read whole with ``Comparison.from_dict``."""

    fleet: str
    probe: str = ""


@dataclass(frozen=True)
class KnownMatched(Payload):
    NESTED: ClassVar[Mapping[str, type[Record]]] = {"matches": KnownMatch, "left": KnownMatch}

    run: int
    target: str | None = None
    matches: list[KnownMatch] = field(default_factory=list)
    left: list[KnownMatch] = field(default_factory=list)


@dataclass(frozen=True)
class FleetHang(Payload):
    """A stacks fan-out's ranks read together: the members' runs, the run it is recorded on
    (the first odd rank's member's, else the first member's), and the reading."""

    fleet: str
    runs: dict[str, int] = field(default_factory=dict)
    run: int | None = None
    reading: dict[str, Any] = field(default_factory=dict)


PAYLOADS: dict[str, type[Payload]] = {
    EventKind.INVESTIGATION_CREATED: InvestigationCreated,
    EventKind.SYMPTOM_ADDED: SymptomAdded,
    EventKind.SYMPTOM_REMOVED: SymptomRemoved,
    EventKind.HYPOTHESIS_ADDED: HypothesisAdded,
    EventKind.HYPOTHESIS_REMOVED: HypothesisRemoved,
    EventKind.LINK_ADDED: LinkAdded,
    EventKind.RUN_STARTED: RunStarted,
    EventKind.RUN_FINISHED: RunFinished,
    EventKind.EVIDENCE_RECORDED: EvidenceRecorded,
    EventKind.REMEDY_PREVIEWED: RemedyPreviewed,
    EventKind.REMEDY_APPLIED: RemedyApplied,
    EventKind.REMEDY_REVERTED: RemedyReverted,
    EventKind.APPLICATION_VERIFIED: ApplicationVerified,
    EventKind.FLAG_RAISED: FlagRaised,
    EventKind.NOTE_ADDED: NoteAdded,
    EventKind.BASELINE_MARKED: BaselineMarked,
    EventKind.STATE_OBSERVED: StateObserved,
    EventKind.FLEET_EXPANDED: FleetExpanded,
    EventKind.FLEET_COMPARED: FleetCompared,
    EventKind.KNOWN_MATCHED: KnownMatched,
    EventKind.FLEET_HANG: FleetHang,
}


def parse_payload(kind: str, data: Mapping[str, Any]) -> Payload | None:
    """The typed payload of an event of *kind* (None for a kind this sleuth does not know:
    a newer version's, which the fold skips)."""
    cls = PAYLOADS.get(kind)
    return cls.from_dict(data) if cls is not None else None

"""The records the investigation is made of: events and their kinds, runs, evidence,
remedy applications, flags, and what is known before a run. Plain dataclasses, no logic
beyond their own fields; the fold (model.py) builds them, every layer above reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .payloads import Payload, StateObserved
    from .stored import Overlay, StateRead, Verification

__all__ = [
    "RemedyApplication",
    "Event",
    "EventKind",
    "Evidence",
    "Flag",
    "Observation",
    "PreRunCheck",
    "RunInfo",
    "STATUSES",
    "STATUS_GLYPHS",
    "STATUS_LEGEND",
    "VERDICTS",
]

STATUSES = ("open", "supported", "refuted", "confirmed", "inconclusive")
# glyphs nobody misreads: ✗ is refuted (never ✓, which reads as "good"), ★ confirmed
STATUS_GLYPHS = {"open": "○", "supported": "●", "refuted": "✗", "confirmed": "★", "inconclusive": "?"}
STATUS_LEGEND = "○open ●supported ✗refuted ★confirmed ?inconclusive"  # as the tree's legend says it
VERDICTS = ("supports", "refutes", "inconclusive")


_UNREAD: Any = object()  # Event.payload not parsed yet


class EventKind(StrEnum):
    """Every kind of event a session holds (the value is what the store keeps)."""

    INVESTIGATION_CREATED = "investigation.created"
    SYMPTOM_ADDED = "symptom.added"
    SYMPTOM_REMOVED = "symptom.removed"
    HYPOTHESIS_ADDED = "hypothesis.added"
    HYPOTHESIS_REMOVED = "hypothesis.removed"
    LINK_ADDED = "link.added"
    RUN_STARTED = "run.started"
    RUN_FINISHED = "run.finished"
    EVIDENCE_RECORDED = "evidence.recorded"
    REMEDY_PREVIEWED = "remedy.previewed"
    REMEDY_APPLIED = "remedy.applied"
    REMEDY_REVERTED = "remedy.reverted"
    APPLICATION_VERIFIED = "application.verified"
    FLAG_RAISED = "flag.raised"
    NOTE_ADDED = "note.added"
    BASELINE_MARKED = "baseline.marked"
    STATE_OBSERVED = "state.observed"
    FLEET_EXPANDED = "fleet.expanded"
    FLEET_COMPARED = "fleet.compared"
    KNOWN_MATCHED = "known.matched"
    FLEET_HANG = "fleet.hang"


@dataclass(frozen=True)
class Evidence:
    """One verdict of one run on one hypothesis, with the result fields its rule read."""

    run: int
    hypothesis: str
    verdict: str  # supports | refutes | inconclusive
    rule: str = ""
    fields: dict[str, Any] = field(default_factory=dict)
    seq: int = 0
    state_key: str | None = None  # the state of the run that gave it

    def __str__(self) -> str:
        return f"{self.verdict} {self.hypothesis}"

    def why(self) -> str:
        """The rule that decided and the figures it read: "threads > 1 and … (threads 3, failed_trials 2)"."""
        figures = ", ".join(f"{k} {v}" for k, v in self.fields.items() if not isinstance(v, (dict, list)))
        return f"{self.rule} ({figures})" if figures and self.rule else self.rule or figures


@dataclass(frozen=True)
class Event:
    seq: int
    ts: float
    kind: str
    data: dict[str, Any]
    # who wrote it: "ui", "cli", "mcp:<client name>", "demo"; "" in a session from before
    # sleuth recorded it (the store's events.author column, schema 2)
    author: str = ""

    @property
    def payload(self) -> Payload | None:
        """The data as its kind's typed record (payloads.py), parsed once; None for a kind
        this sleuth does not know."""
        payload = self.__dict__.get("_payload", _UNREAD)
        if payload is _UNREAD:  # not a cached_property: the fold reads every event's (its lock costs)
            from .payloads import parse_payload

            payload = self.__dict__["_payload"] = parse_payload(self.kind, self.data)
        return payload

    def to_dict(self) -> dict[str, Any]:
        out = {"seq": self.seq, "ts": self.ts, "kind": self.kind, "data": self.data}
        if self.author:
            out["author"] = self.author
        return out


@dataclass
class RunInfo:
    id: int
    probe: str
    params: dict[str, Any]
    target: str
    kind: str  # "probe" | "script" | "shell"
    check_key: str
    started_ts: float
    started_seq: int
    remedies: tuple[str, ...] = ()
    retest_of: int | None = None
    stochastic: bool = False  # a sample of a race (its probe says so)
    # the seq of the state read made for this run when it told something (state.observed);
    # 0: it told nothing; None: a session from before runs named their read
    observed_seq: int | None = None
    classification: str | None = None
    reason: str = ""
    result: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    state: dict[str, Any] | None = None  # as stored (a shell command's: the state read just before it)
    read: StateRead | None = None  # ``state`` typed (its torch version parsed once)
    state_key: str | None = None
    state_parts: dict[str, str] | None = None  # component_keys(state), as recorded
    lines: dict[str, int] = field(default_factory=dict)
    finished_ts: float | None = None
    finished_seq: int | None = None
    exit_status: int | None = None
    signal: str | None = None

    @property
    def duration(self) -> float | None:
        return None if self.finished_ts is None else self.finished_ts - self.started_ts

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "probe": self.probe,
            "params": self.params,
            "target": self.target,
            "kind": self.kind,
            "check_key": self.check_key,
            "state_key": self.state_key,
            "retest_of": self.retest_of,
            "classification": self.classification,
            "reason": self.reason,
            "result": self.result,
            "lines": self.lines,
            "exit_status": self.exit_status,
            "signal": self.signal,
            "started": self.started_ts,
            "finished": self.finished_ts,
        }


@dataclass
class RemedyApplication:
    id: int
    remedy: str
    hypothesis: str | None
    target: str
    files: list[dict[str, Any]]
    applied_ts: float
    active: bool = True
    verified: list[Verification] = field(default_factory=list)  # the runs that verified it
    upgrade: Overlay | None = None  # an upgrade's overlay at the far end (None: a code remedy)
    applied_seq: int = 0

    @property
    def verifications(self) -> list[dict[str, Any]]:
        """The verifications as stored (JSON objects); :attr:`verified` is the typed list."""
        return [v.to_dict() for v in self.verified]

    @property
    def overlay(self) -> dict[str, Any] | None:
        """The upgrade's overlay as stored; :attr:`upgrade` is the typed record."""
        return self.upgrade.to_dict() if self.upgrade is not None else None

    @property
    def digest(self) -> str:
        if self.upgrade is not None:
            return f"{self.remedy}:{self.upgrade.package}=={self.upgrade.version}@{self.upgrade.path}"
        return self.remedy + ":" + ",".join(sorted(f.get("after_sha", "") for f in self.files))

    def addresses(self, hypothesis: str, remedies: tuple[str, ...] | list[str]) -> bool:
        """Whether this application is a remedy for *hypothesis* (whose catalog remedies are
        *remedies*): a code remedy it lists, or an upgrade to a known issue that explains it."""
        if self.upgrade is not None:
            return hypothesis in self.upgrade.explains
        return self.remedy in remedies

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "remedy": self.remedy,
            "hypothesis": self.hypothesis,
            "target": self.target,
            "files": [{k: v for k, v in f.items() if k not in ("before", "after")} for f in self.files],
            "active": self.active,
            "verifications": self.verifications,
            **({"overlay": self.overlay} if self.overlay is not None else {}),
        }


@dataclass(frozen=True)
class Observation:
    """A state read before a run that told something (``state.observed``), as the fold keeps it."""

    seq: int
    ts: float
    read: StateObserved


@dataclass(frozen=True)
class Flag:
    kind: str  # "circular-retest" | "oscillation" | "revisit"
    seq: int
    ts: float
    target: str
    message: str
    run: int | None = None
    earlier: int | None = None
    hypothesis: str | None = None
    component: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class PreRunCheck:
    """What the model says before a run: is it a retest, does it revisit a refuted idea.

    ``measured``: the target's state was read just now (``state``), not predicted from its
    last run; ``unknown`` says why it could not be read (then nothing is flagged).
    ``back_from``: when the retest's run is not the latest of this check, the latest one,
    which saw another state — the world went back to the state of ``retest_of``."""

    check_key: str
    expected_state: str | None
    retest_of: RunInfo | None = None
    revisits: tuple[str, ...] = ()
    measured: bool = False
    state: dict[str, Any] | None = None
    unknown: str | None = None
    back_from: RunInfo | None = None
    stochastic: bool = False  # a sample: repeats add trials, nothing is flagged
    state_parts: dict[str, str] | None = None  # component_keys(state), computed once
    observed_seq: int | None = None  # the state.observed event this read was recorded as, if any

    @property
    def flagged(self) -> bool:
        return self.retest_of is not None or bool(self.revisits)

"""Stored JSON read into typed records, and back: ``Record`` (``from_dict`` / ``to_dict``, the
stored object given back exactly: keys in their stored order, a key no field names kept aside
in ``_extra``, a key that was not stored left absent in ``_absent`` even where its field has a
default) and the records event payloads hold (payloads.py): a state read (its torch version
parsed once), a remedy's verification (its ``strong`` default said once), a known-issue match,
an upgrade's overlay; and those the fold keeps: a known-issue match with where it was seen (and,
for a hypothesis, whether it applies now), a note.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from functools import cached_property
from types import MappingProxyType
from typing import Any, ClassVar, Self, TypedDict

__all__ = ["KnownAtRun", "KnownMatch", "KnownNow", "KnownSeen", "Note", "Overlay", "Record", "StateRead", "Verification"]

_NOT_FIELDS = ("_extra", "_absent", "_order")
_NONE: frozenset[str] = frozenset()
_NO_EXTRA: Mapping[str, Any] = MappingProxyType({})


class _Spec:
    """A record class's fields as from_dict reads them (computed once per class)."""

    def __init__(self, cls: type[Record]) -> None:
        own = [f for f in fields(cls) if f.name not in _NOT_FIELDS]  # type: ignore[arg-type]
        self.names = tuple(f.name for f in own)
        self.known = frozenset(self.names)
        self.required = frozenset(f.name for f in own if f.default is MISSING and f.default_factory is MISSING)
        self.defaults = {f.name: f.default for f in own if f.default is not MISSING}
        self.factories = {f.name: f.default_factory for f in own if f.default_factory is not MISSING}
        self.nested = dict(cls.NESTED)
        # per shape of a stored object (its keys, in order): the fields it lacks, how each is
        # filled, the keys no field names — worked out once; the fold meets a handful of shapes
        self.shapes: dict[tuple[str, ...], tuple[frozenset[str], tuple[tuple[str, Any, Any], ...], frozenset[str]]] = {}

    def shape(self, keys: tuple[str, ...]) -> tuple[frozenset[str], tuple[tuple[str, Any, Any], ...], frozenset[str]]:
        plan = self.shapes.get(keys)
        if plan is None:
            lacking = self.required.difference(keys)
            if lacking:
                raise KeyError(min(lacking))
            absent = self.known.difference(keys)
            fills = tuple((name, self.defaults.get(name), self.factories.get(name)) for name in self.names
                          if name in absent)
            plan = (frozenset(absent) or _NONE, fills, frozenset(keys).difference(self.known))
            if len(self.shapes) < 512:
                self.shapes[keys] = plan
        return plan


@dataclass(frozen=True)
class Record:
    """A stored JSON object read into named fields; ``to_dict()`` gives the stored object back."""

    NESTED: ClassVar[Mapping[str, type[Record]]] = {}  # field -> the record its value holds (one, or a list)
    _specs: ClassVar[dict[type, _Spec]] = {}

    _extra: Mapping[str, Any] = field(default_factory=lambda: _NO_EXTRA, kw_only=True, repr=False)  # keys no field names
    _absent: frozenset[str] = field(default=_NONE, kw_only=True, repr=False, compare=False)
    # the stored object itself, for its keys' order (never read for values: those are the fields)
    _order: Mapping[str, Any] = field(default_factory=lambda: _NO_EXTRA, kw_only=True, repr=False, compare=False)

    @classmethod
    def _spec(cls) -> _Spec:
        spec = Record._specs.get(cls)
        if spec is None:
            spec = Record._specs[cls] = _Spec(cls)
        return spec

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The record of a stored object; a field it must have and lacks is a KeyError."""
        spec = Record._specs.get(cls) or cls._spec()
        keys = data.keys()
        # Filled in place of __init__ (a frozen dataclass's sets each field through
        # object.__setattr__): the fold reads every event through here.
        record = object.__new__(cls)
        values = record.__dict__
        values.update(data)
        if keys == spec.known:  # every field stored, nothing else: most events sleuth writes
            absent, values["_extra"] = _NONE, _NO_EXTRA
        else:
            absent, fills, unnamed = spec.shape(tuple(keys))
            for name, default, factory in fills:
                values[name] = factory() if factory is not None else default
            values["_extra"] = {k: values.pop(k) for k in data if k in unnamed} if unnamed else _NO_EXTRA
        if spec.nested:
            for name, kind in spec.nested.items():
                value = values[name]
                if value is not None and name not in absent:
                    values[name] = ([kind.from_dict(v) for v in value] if isinstance(value, list)
                                    else kind.from_dict(value))
        values["_absent"] = absent
        values["_order"] = data
        return record

    def to_dict(self) -> dict[str, Any]:
        """The object as stored: the fields it had (nested records as theirs), then the rest."""
        spec = self._spec()
        out: dict[str, Any] = {}
        for name in spec.names:
            if name in self._absent:
                continue
            value = getattr(self, name)
            if name in spec.nested and value is not None:
                value = [v.to_dict() for v in value] if isinstance(value, list) else value.to_dict()
            out[name] = value
        out.update(self._extra)
        order = self._order
        if order and len(order) == len(out) and all(k in out for k in order):  # printed unsorted, it reads the same
            return {k: out[k] for k in order}
        return out

    def has(self, name: str) -> bool:
        """Whether the stored object had *name* (a field left at its default was absent)."""
        return name not in self._absent if name in self._spec().known else name in self._extra

    def stored(self, name: str) -> Any:
        """Field *name* as the stored object had it; None where it lacked it (whatever the default)."""
        return None if name in self._absent else getattr(self, name)


# ---------------------------------------------------------------- records inside payloads


@dataclass(frozen=True)
class StateRead(Record):
    """A target's state as a run or a read reported it (the prelude's ``state``): env (python,
    torch as torch/version.py says it, driver, the installed distributions), code, caches."""

    env: dict[str, Any] = field(default_factory=dict)
    code: Any = None  # the code's hash (a str), or what the prelude read of it
    caches: Any = None

    @cached_property
    def _env(self) -> Mapping[str, Any]:
        return self.env if isinstance(self.env, Mapping) else {}

    @cached_property
    def distributions(self) -> Mapping[str, Any]:
        """The installed distributions by name, as measured ({} where none were)."""
        dists = self._env.get("distributions")
        return dists if isinstance(dists, Mapping) else {}

    @cached_property
    def measured_distributions(self) -> bool:
        """Whether the read listed the installed distributions at all."""
        return isinstance(self._env.get("distributions"), Mapping)

    @cached_property
    def torch_reported(self) -> Any:
        """The torch version as the read says torch itself reports it (torch/version.py; an
        older state's plain string), else None."""
        torch = self._env.get("torch")
        return torch.get("version") if isinstance(torch, Mapping) else torch

    @cached_property
    def torch_version(self) -> str | None:
        """The torch version torch reports, else the installed distribution's."""
        torch = self._env.get("torch")
        if isinstance(torch, Mapping):
            return torch.get("version")
        return torch if isinstance(torch, str) else self.distributions.get("torch")

    @cached_property
    def torch_cuda(self) -> Any:
        """The CUDA torch was built with, as torch/version.py says it (None where not read)."""
        torch = self._env.get("torch")
        return torch.get("cuda") if isinstance(torch, Mapping) else None

    @cached_property
    def python(self) -> Any:
        return self._env.get("python")


@dataclass(frozen=True)
class Verification(Record):
    """A run that verified a remedy application (``application.verified`` less its
    application): the outcome, the samples before and after, and how strong it is."""

    run: int
    outcome: str  # fixed | not_fixed | nothing_to_verify
    hypothesis: str | None = None  # None: an upgrade's, for its issue alone
    before: list[int] | None = None  # [failing trials, trials]
    after: list[int] | None = None
    strong: bool = True  # a verification that does not say is strong (one deterministic run)
    strength: str | None = None  # in words, where a sample was weighed
    needed: int | None = None
    chance: float | None = None
    issue: str | None = None  # an upgrade's: the known issue, the release the run imported, how it was asked
    imported: str | None = None
    signature: str | None = None


@dataclass(frozen=True)
class KnownMatch(Record):
    """A known upstream issue a run matched (or, in ``left``, one that stopped applying): the
    entry as it was when matched, the version measured and where its signature showed."""

    id: str
    title: str = ""
    package: str = ""
    affected: str = ""
    fixed_in: str | None = None
    explains: list[str] = field(default_factory=list)
    measured: str | None = None
    seen: str | None = None
    why: str | None = None  # a left entry's: why it no longer applies
    workarounds: list[str] = field(default_factory=list)  # remedy ids sleuth ships for it
    source: str | None = None  # the issue's URL
    checked: str | None = None  # the date the entry was last verified against upstream


# ---------------------------------------------------------------- records the fold keeps


@dataclass(frozen=True)
class KnownSeen(KnownMatch):
    """A known-issue match (or a left entry) as the fold keeps it (``known_matches``,
    ``known_left``): the entry, then the run, target, state key, event and time it came with."""

    run: int = 0
    target: str = ""
    state_key: str | None = None
    seq: int = 0
    ts: float = 0.0


class KnownAtRun(TypedDict):
    """What one run said of known issues: the entries it matched, those that stopped applying at it."""

    matches: list[KnownSeen]
    left: list[KnownSeen]


@dataclass(frozen=True)
class KnownNow:
    """A known issue's latest match on a target, and whether it applies there now: False once a
    later run on that target measured versions outside its range."""

    match: KnownSeen
    applies_now: bool

    def to_dict(self) -> dict[str, Any]:
        return {**self.match.to_dict(), "applies_now": self.applies_now}


@dataclass(frozen=True)
class Note(Record):
    """A note as the fold keeps it (``notes``): the user's, about the whole hunt, a hypothesis or a
    run (#N); or sleuth's own finding about a target, which alone has ``finding`` and ``target``."""

    seq: int
    ts: float
    text: str
    about: str | None = None
    finding: str | None = None
    target: str | None = None


@dataclass(frozen=True)
class Overlay(Record):
    """An upgrade's overlay at the far end: the release installed beside the environment."""

    package: str
    version: str
    path: str
    issue: str = ""
    explains: list[str] = field(default_factory=list)
    site: str = ""  # the folder put first on the runs' import path
    affected: str = ""  # the entry's affected range when it was made
    installed_before: str | None = None  # the release the environment kept
    install_run: int | None = None  # the run that made it
    distributions: list[dict[str, Any]] | None = None  # what pip put in it (None: not listed)
    bytes: int | None = None

"""Typed readers of a finished run's result fields (the ``result`` records as stored, merged:
verdict.result_fields), each a :class:`~hypotheses.stored.Record` read where it is shown: a
stacks reading (hypotheses/hang's fields; a fleet's ranks read together have the same), its
rows, a compile-cache run's counters, an env-fingerprint. ``to_dict()`` gives each back as it
was; a key no field names is kept aside, never lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from .stored import Record

__all__ = ["CacheResult", "Fingerprint", "FrameworkFrame", "HangReading", "NativeWait", "OddRank", "Place", "RankRecorder",
           "RankRow", "ThreadRow"]


@dataclass(frozen=True)
class Place(Record):
    """Where a rank's main thread was (a stacks row's ``main``)."""

    function: str | None = None
    file: str | None = None
    line: int | None = None
    collective: str | None = None  # the collective it is in ("all_reduce", "DDP reducer"), if any

    @property
    def file_name(self) -> str:
        """The file's last part ("" where no file was read)."""
        return str(self.file or "").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class NativeWait(Record):
    """The native frame a rank's main thread waited in (py-spy --native) and what it is."""

    frame: str | None = None
    what: str | None = None


@dataclass(frozen=True)
class FrameworkFrame(Record):
    """The framework frame (a package's function) a rank's main thread was in."""

    package: str | None = None
    function: str | None = None


@dataclass(frozen=True)
class ThreadRow(Record):
    """One thread of a rank (a stacks row's ``threads``): its usual place and its samples there."""

    where: Mapping[str, Any] | None = None
    samples: list[int] | None = None  # [samples in that place, samples read]

    @cached_property
    def place(self) -> Place | None:
        return Place.from_dict(self.where) if self.where else None


@dataclass(frozen=True)
class RankRecorder(Record):
    """What torch's Flight Recorder said of one rank (a stacks row's ``flight_recorder``): the
    collectives it entered per group and those it waits in, or why it was not read."""

    source: str | None = None
    error: str | None = None  # why it was not read
    entered: Mapping[str, int] | None = None  # process group -> the last collective entered
    waits_in: list[str] | None = None  # "all_reduce #4 on group 0 (…)", the last the one it waits in


@dataclass(frozen=True)
class RankRow(Record):
    """One rank of a stacks reading (``per_rank``): its label, where its main thread was (or
    why no stack was read), the native wait and framework frame below it, its state over the
    window, its other threads and its Flight Recorder."""

    label: Any = None  # "rank 2", or "pid 4711" where the process has no rank
    main: Mapping[str, Any] | None = None
    error: str | None = None  # why no stack was read
    native_wait: Mapping[str, Any] | None = None
    native_read: bool | None = None
    framework: Mapping[str, Any] | None = None
    main_samples: list[int] | None = None  # [samples at the main thread's place, samples read]
    threads: Mapping[str, Mapping[str, Any]] | None = None  # thread name -> its ThreadRow
    flight_recorder: Any = None  # a RankRecorder's object where the Flight Recorder was asked

    @cached_property
    def place(self) -> Place | None:
        """The main thread's place; None where no stack was read."""
        return Place.from_dict(self.main) if self.main else None

    @cached_property
    def wait(self) -> NativeWait | None:
        """The native wait; None where none was seen or native frames were not read."""
        return NativeWait.from_dict(self.native_wait) if self.native_wait else None

    @cached_property
    def in_framework(self) -> FrameworkFrame | None:
        return FrameworkFrame.from_dict(self.framework) if self.framework else None

    @cached_property
    def other_threads(self) -> dict[str, Place]:
        """Where each thread but the main one was, for those whose place was read."""
        rows = ((name, ThreadRow.from_dict(t)) for name, t in (self.threads or {}).items() if name != "MainThread")
        return {name: t.place for name, t in rows if t.place is not None}

    @cached_property
    def recorder(self) -> RankRecorder | None:
        """The Flight Recorder's reading of this rank; None where it was not asked."""
        fr = self.flight_recorder
        return RankRecorder.from_dict(fr) if isinstance(fr, Mapping) else None


@dataclass(frozen=True)
class OddRank(Record):
    """A rank a stacks reading singled out (``odd_ranks``): its label and how it is odd."""

    rank: Any = None  # the rank's label, as its row names it
    member: str | None = None  # the fleet member it runs on
    kind: str | None = None  # stuck, straggler, stopped, deadlock, mismatch …


@dataclass(frozen=True)
class HangReading(Record):
    """A stacks run's reading of its ranks (or a fleet's, every member's ranks together): the
    verdict, the sentences that say it, each rank's row, the odd ranks, what was sampled."""

    verdict: Any = None
    sentences: list[Any] | None = None
    per_rank: list[Mapping[str, Any]] | None = None
    odd_ranks: list[Mapping[str, Any]] | None = None
    sampled: int | None = None
    ranks: int | None = None
    samples: int | None = None
    window_s: float | None = None

    def rows(self, limit: int | None = None) -> list[RankRow]:
        """The first *limit* ranks' rows (every rank's without a limit)."""
        return [RankRow.from_dict(r) for r in (self.per_rank or [])[:limit]]

    @cached_property
    def odd_kinds(self) -> dict[Any, str | None]:
        """How each odd rank is odd, by its label."""
        return {odd.rank: odd.kind for odd in map(OddRank.from_dict, self.odd_ranks or [])}


@dataclass(frozen=True)
class CacheResult(Record):
    """A compile-cache run's counters (inductor's own, in a fresh process), its cache folder and
    what changed in the key since the run that hit (``said``; older sessions lack it)."""

    hits: int | None = None
    misses: int | None = None
    bypasses: int | None = None
    autograd_hits: int | None = None
    autograd_misses: int | None = None
    cache_dir: str | None = None
    said: str | None = None


@dataclass(frozen=True)
class Fingerprint(Record):
    """What an env-fingerprint run measured: a key it has with None was measured absent, a key
    it lacks was not measured (``has``). CUDA is stored as ``torch.cuda``."""

    torch: str | None = None
    triton: str | None = None
    driver: str | None = None
    python: str | None = None

    @property
    def cuda(self) -> Any:
        """The CUDA torch was built with (``torch.cuda``, a key no field can be named)."""
        return self._extra.get("torch.cuda")

    @classmethod
    def of_result(cls, result: Mapping[str, Any]) -> Fingerprint | None:
        """The fingerprint a run's result holds; None where it holds none (or not an object)."""
        fp = result.get("fingerprint")
        return cls.from_dict(fp) if isinstance(fp, dict) else None

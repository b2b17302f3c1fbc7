"""What the members of a fleet answered, side by side: for each reported field and each part
of the state, the value most members hold and the members that differ ("3 of 4 members:
torch 2.11.0+cu128; node-3: 2.11.0+cu130"). Pure functions of recorded runs: the session
records the comparison as an event, the CLI, the UI and the postmortem say it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .drift import _FIRST, _NOT_DRIFT, _flat_env
from .records import RunInfo
from .state import component_keys

__all__ = ["Comparison", "Spread", "compare", "member_fields"]

# fields that differ from member to member by nature: a timing, an age, a clock
_VOLATILE = ("seconds", "_s", "_ts", "mtime", "age", "elapsed", "ms", "pid", "hostname", "newest", "oldest")


def _volatile(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return any(last == v or last.endswith(v) for v in _VOLATILE)


def _flatten(value: Mapping[str, Any], prefix: str = "", depth: int = 2) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, v in value.items():
        name = prefix + str(key)
        if isinstance(v, Mapping) and depth > 0:
            out.update(_flatten(v, name + ".", depth - 1))
        elif isinstance(v, (list, Mapping)):
            out[name] = json.dumps(v, sort_keys=True, default=str)
        else:
            out[name] = v
    return out


def member_fields(run: RunInfo) -> tuple[dict[str, Any], set[str]]:
    """(every comparable field of *run*'s answer, the names that say what the code runs on —
    versions, builds, the driver, the environment variables: a difference there is drift)."""
    fields: dict[str, Any] = {}
    drift: set[str] = set()
    result = dict(run.result)
    fingerprint = result.pop("fingerprint", None)
    for key in ("has_baseline", "drift", "drift_keys", "changes", "baseline_run"):
        result.pop(key, None)  # relative to a baseline, not what the member is
    if isinstance(fingerprint, Mapping):
        for key in ("distributions", "torch", "cuda", "triton"):  # the fingerprint says these, by their names
            result.pop(key, None)
        fp = {k: v for k, v in fingerprint.items() if k not in _NOT_DRIFT}
        for name, version in (fp.pop("distributions", None) or {}).items():
            fields[name] = version
            drift.add(name)
        for key in ("torch", "triton"):  # said by their distribution when it is listed
            if key in fields:
                fp.pop(key, None)
        for key, v in fp.items():
            name = "env " + key[4:] if key.startswith("var:") else key
            fields[name] = json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else v
            drift.add(name)
    for name, v in _flatten(result).items():
        if name in ("kind",) or _volatile(name):
            continue
        fields.setdefault(name, v)
    if run.state:  # the prelude's state: what every probe reports, whatever it measured
        env = run.state.get("env") or {}
        if not isinstance(fingerprint, Mapping):  # (a fingerprint says all of it, and more)
            for name, v in [*_flat_env(env).items(), *(env.get("distributions") or {}).items()]:
                if v is not None and name not in fields:
                    fields[name] = v
                    drift.add(name)
        parts = run.state_parts or component_keys(run.state)
        fields["state: code"] = parts["code"]
        fields["state: caches"] = parts["caches"]
    return fields, drift


@dataclass(frozen=True)
class Spread:
    """One field across the members: the value most hold and who holds another."""

    name: str
    majority: Any
    holders: list[str]  # members with the majority value
    odd: dict[str, Any]  # member -> its value
    drift: bool = False  # a version/build/environment field
    split: bool = False  # no value is held by more than the others

    def sentence(self, total: int) -> str:
        def show(v: Any) -> str:
            if self.name.startswith("state: "):
                return "another" if v is not None else "none"
            return "absent" if v is None else str(v)

        if self.split:
            groups: dict[str, list[str]] = {}
            for member, v in [*((m, self.majority) for m in self.holders), *self.odd.items()]:
                groups.setdefault(show(v), []).append(member)
            return f"{self.name}: split — " + "; ".join(f"{', '.join(ms)}: {v}" for v, ms in groups.items())
        odd = "; ".join(f"{m}: {show(v)}" for m, v in self.odd.items())
        held = "the same" if self.name.startswith("state: ") else show(self.majority)
        return f"{self.name}: {len(self.holders)} of {total} members {held}; {odd}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "majority": self.majority, "holders": self.holders, "odd": self.odd,
                "drift": self.drift, "split": self.split}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Spread:
        return cls(d["name"], d.get("majority"), list(d.get("holders", [])), dict(d.get("odd", {})),
                   bool(d.get("drift")), bool(d.get("split")))


@dataclass
class Comparison:
    """A fleet's answers to one probe: who answered (their runs), who could not be reached,
    the fields that differ, and how many agree everywhere."""

    fleet: str
    probe: str
    runs: dict[str, int]  # member -> its run (answered, or the earlier run of the same state)
    unreachable: dict[str, str] = field(default_factory=dict)  # member -> why
    spreads: list[Spread] = field(default_factory=list)  # fields that differ
    agreeing: int = 0  # fields every member holds the same

    @property
    def members(self) -> list[str]:
        return list(self.runs)

    def odd_members(self, drift_only: bool = False) -> dict[str, list[Spread]]:
        out: dict[str, list[Spread]] = {}
        for s in self.spreads:
            if s.split or (drift_only and not s.drift):
                continue
            for member in s.odd:
                out.setdefault(member, []).append(s)
        return out

    def headline(self) -> str:
        n = len(self.runs)
        if n == 0:
            return f"no member of {self.fleet} answered"
        if not self.spreads:
            said = f"all {n} members agree on every field ({self.agreeing})"
        else:
            odd = self.odd_members()
            named = ", ".join(f"{m} ({', '.join(s.name for s in spreads[:3])}{' …' if len(spreads) > 3 else ''})"
                              for m, spreads in odd.items())
            fields = "1 field differs" if len(self.spreads) == 1 else f"{len(self.spreads)} fields differ"
            said = (f"{fields} among {n} members"
                    + (f"; the odd one{'s' * (len(odd) != 1)} out: {named}" if odd else ""))
        if self.unreachable:
            said += f"; not reached: {', '.join(self.unreachable)}"
        return said

    def to_dict(self) -> dict[str, Any]:
        return {"fleet": self.fleet, "probe": self.probe, "runs": self.runs, "unreachable": self.unreachable,
                "spreads": [s.to_dict() for s in self.spreads], "agreeing": self.agreeing}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Comparison:
        return cls(d["fleet"], d.get("probe", ""), {k: int(v) for k, v in d.get("runs", {}).items()},
                   dict(d.get("unreachable", {})), [Spread.from_dict(s) for s in d.get("spreads", [])],
                   int(d.get("agreeing", 0)))


_PLAIN = {str: "s", int: "i", bool: "b", type(None): "n"}


def _key(v: Any) -> Any:
    """A hashable stand-in for a field's value: equal exactly when their JSON is."""
    plain = _PLAIN.get(type(v))
    if plain is not None:  # most fields: a version string, a count (no JSON to build)
        return plain, v
    return "j", json.dumps(v, sort_keys=True, default=str)


def compare(fleet: str, probe: str, answers: Mapping[str, RunInfo], unreachable: Mapping[str, str] | None = None) -> Comparison:
    """Side by side: every field any member reported, its majority and the odd members (a
    member without the field holds "absent")."""
    per: dict[str, dict[str, Any]] = {}
    drift: set[str] = set()
    for member, run in answers.items():
        fields, d = member_fields(run)
        per[member] = fields
        drift |= d
    names = sorted({n for fields in per.values() for n in fields})
    spreads, agreeing = [], 0
    members = list(answers)
    for name in names:
        values = {m: per[m].get(name) for m in members}
        counts = Counter(_key(v) for v in values.values())
        if len(counts) <= 1:
            agreeing += 1
            continue
        (top, n_top), *rest = counts.most_common()
        split = bool(rest) and rest[0][1] == n_top
        if split:  # a tie: the first member's value leads, in member order
            top = _key(values[members[0]])
        majority = next(v for v in values.values() if _key(v) == top)
        holders = [m for m, v in values.items() if _key(v) == top]
        odd = {m: v for m, v in values.items() if _key(v) != top}
        spreads.append(Spread(name, majority, holders, odd, name in drift, split))
    # what people look for first: torch and its build, the driver, python; then the rest by name
    spreads.sort(key=lambda s: (not s.drift, s.name.startswith("state: "),
                                _FIRST.index(s.name) if s.name in _FIRST else len(_FIRST), s.name))
    return Comparison(fleet, probe, {m: r.id for m, r in answers.items()}, dict(unreachable or {}), spreads, agreeing)

"""The hypothesis catalog: built-in TOML files in hypotheses/catalog/ and a user's own.

A catalog file holds ``[[symptom]]`` and ``[[hypothesis]]`` tables. Each hypothesis names
the probes that test it (with a prediction and the rules that turn a result into
``supports`` / ``refutes``), the remedies that address it, and its links to other
hypotheses (``refines``, ``competes``, ``exposes``). Users put files of the same schema in
``.sleuth/hypotheses/`` of their working directory.

Exceptions:
    CatalogError        a file is malformed; ``str()`` is ``path:line:col: what``
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions

from .errors import CatalogError
from .rules import Rule, RuleError, compile_rule

__all__ = [
    "BUILTIN_DIR",
    "Catalog",
    "CatalogError",
    "HypothesisDef",
    "LINK_KINDS",
    "ProbeTest",
    "SymptomDef",
    "load_catalog",
]

BUILTIN_DIR = Path(__file__).with_name("catalog")
LINK_KINDS = ("refines", "competes", "exposes")
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


@dataclass(frozen=True)
class SymptomDef:
    id: str
    title: str
    text: str = ""
    # hypotheses that explain only opt-in symptoms join a session when one of those symptoms
    # is added to it, or when a probe that tests them runs (a hang family in a race hunt is noise)
    opt_in: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "text": self.text}


@dataclass(frozen=True)
class ProbeTest:
    """How one probe's result bears on one hypothesis."""

    probe: str
    predicts: str = ""
    supports: Rule | None = None
    refutes: Rule | None = None
    counts_failed: bool = False
    applies: Rule | None = None  # when false, the run says nothing about this hypothesis
    settle: str = ""  # what would settle it when neither rule holds, said with an inconclusive verdict

    def to_dict(self) -> dict[str, Any]:
        return {
            "probe": self.probe,
            "predicts": self.predicts,
            "supports": self.supports.source if self.supports else None,
            "refutes": self.refutes.source if self.refutes else None,
            "counts_failed": self.counts_failed,
            "applies": self.applies.source if self.applies else None,
            **({"settle": self.settle} if self.settle else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProbeTest:
        return cls(
            probe=d["probe"],
            predicts=d.get("predicts", ""),
            supports=compile_rule(d["supports"]) if d.get("supports") else None,
            refutes=compile_rule(d["refutes"]) if d.get("refutes") else None,
            counts_failed=bool(d.get("counts_failed", False)),
            applies=compile_rule(d["applies"]) if d.get("applies") else None,
            settle=str(d.get("settle", "")),
        )


@dataclass(frozen=True)
class HypothesisDef:
    id: str
    title: str
    claim: str = ""
    explains: tuple[str, ...] = ()
    probes: tuple[ProbeTest, ...] = ()
    remedies: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()  # (kind, other hypothesis id)
    source: str = "builtin"  # "builtin" | "user" | "session"
    origin: str = ""  # file:line it came from, for messages

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "claim": self.claim,
            "explains": list(self.explains),
            "probes": [p.to_dict() for p in self.probes],
            "remedies": list(self.remedies),
            "links": [list(link) for link in self.links],
            "source": self.source,
            "origin": self.origin,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HypothesisDef:
        return cls(
            id=d["id"],
            title=d.get("title", d["id"]),
            claim=d.get("claim", ""),
            explains=tuple(d.get("explains", ())),
            probes=tuple(ProbeTest.from_dict(p) for p in d.get("probes", ())),
            remedies=tuple(d.get("remedies", ())),
            links=tuple((k, t) for k, t in d.get("links", ())),
            source=d.get("source", "session"),
            origin=d.get("origin", ""),
        )


@dataclass
class Catalog:
    symptoms: dict[str, SymptomDef] = field(default_factory=dict)
    hypotheses: dict[str, HypothesisDef] = field(default_factory=dict)


class _Locator:
    """Finds the line of a key or value in a TOML text, for error messages."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def find(self, needle: str, after: int = 1) -> tuple[int, int]:
        for number in range(max(after, 1), len(self.lines) + 1):
            col = self.lines[number - 1].find(needle)
            if col >= 0:
                return number, col + 1
        return after, 1

    def error(self, message: str, needle: str | None = None, after: int = 1) -> CatalogError:
        line, col = self.find(needle, after) if needle else (after, 1)
        return CatalogError(self.path, line, col, message)


_HYP_KEYS = {"id", "title", "claim", "explains", "probe", "remedies", "link", "refines"}
_PROBE_KEYS = {"id", "predicts", "supports", "refutes", "counts_failed", "applies", "settle"}
_LINK_KEYS = {"kind", "to"}
_SYMPTOM_KEYS = {"id", "title", "text", "opt_in"}


def read_toml(path: Path) -> tuple[dict[str, Any], _Locator]:
    """A catalog-style TOML file and a locator for its errors; a parse error is a
    CatalogError at path:line:col (hypothesis files and known-issue files alike)."""
    text = path.read_text(encoding="utf-8")
    try:
        doc = tomlkit.parse(text).unwrap()
    except tomlkit.exceptions.ParseError as exc:
        raise CatalogError(path, exc.line, exc.col, str(exc).split(" at line")[0]) from None
    return doc, _Locator(path, text)


def _parse_file(path: Path, source: str, catalog: Catalog) -> None:
    doc, loc = read_toml(path)
    unknown = set(doc) - {"symptom", "hypothesis"}
    if unknown:
        key = sorted(unknown)[0]
        raise loc.error(f"unknown top-level key {key!r} (expected [[symptom]] or [[hypothesis]])", key)

    for sym in doc.get("symptom", []):
        _check_id(sym, loc, "symptom")
        extra = set(sym) - _SYMPTOM_KEYS
        if extra:
            raise loc.error(f"unknown key {sorted(extra)[0]!r} in symptom {sym['id']!r}", sorted(extra)[0])
        if not isinstance(sym.get("opt_in", False), bool):
            raise loc.error(f"opt_in of symptom {sym['id']!r} must be true or false", "opt_in")
        catalog.symptoms[sym["id"]] = SymptomDef(sym["id"], sym.get("title", sym["id"]), sym.get("text", ""),
                                                 bool(sym.get("opt_in", False)))

    for hyp in doc.get("hypothesis", []):
        _check_id(hyp, loc, "hypothesis")
        hid = hyp["id"]
        start, _ = loc.find(f'"{hid}"')
        extra = set(hyp) - _HYP_KEYS
        if extra:
            key = sorted(extra)[0]
            raise loc.error(f"unknown key {key!r} in hypothesis {hid!r}", key, start)
        if hid in catalog.hypotheses:
            raise loc.error(
                f"hypothesis {hid!r} is already defined in {catalog.hypotheses[hid].origin}",
                f'"{hid}"',
            )
        tests = []
        for probe in hyp.get("probe", []):
            _check_id(probe, loc, f"probe of hypothesis {hid!r}", start)
            extra = set(probe) - _PROBE_KEYS
            if extra:
                key = sorted(extra)[0]
                raise loc.error(f"unknown key {key!r} in probe {probe['id']!r}", key, start)
            rules: dict[str, Rule | None] = {}
            for which in ("supports", "refutes", "applies"):
                expr = probe.get(which)
                if expr is None:
                    rules[which] = None
                    continue
                if not isinstance(expr, str):
                    raise loc.error(f"{which} of probe {probe['id']!r} must be a string", which, start)
                try:
                    rules[which] = compile_rule(expr)
                except RuleError as exc:
                    # one position, the right one: the file's line and the column of the fault
                    # inside the rule (not the rule's start, nor Python's "line 1")
                    line, col = loc.find(expr, start)
                    if exc.column and loc.lines[line - 1].find(expr) >= 0:
                        col += exc.column - 1
                    raise CatalogError(loc.path, line, col, f"{which} rule {expr!r}: {exc.reason}") from None
            tests.append(
                ProbeTest(
                    probe=probe["id"],
                    predicts=str(probe.get("predicts", "")),
                    supports=rules["supports"],
                    refutes=rules["refutes"],
                    counts_failed=bool(probe.get("counts_failed", False)),
                    applies=rules["applies"],
                    settle=str(probe.get("settle", "")),
                )
            )
        links = []
        if "refines" in hyp:
            links.append(("refines", str(hyp["refines"])))
        for link in hyp.get("link", []):
            extra = set(link) - _LINK_KEYS
            if extra or link.get("kind") not in LINK_KINDS or not link.get("to"):
                raise loc.error(
                    f"a link of hypothesis {hid!r} needs kind = one of {', '.join(LINK_KINDS)} "
                    "and to = a hypothesis id",
                    "kind",
                    start,
                )
            links.append((link["kind"], str(link["to"])))
        catalog.hypotheses[hid] = HypothesisDef(
            id=hid,
            title=str(hyp.get("title", hid)),
            claim=" ".join(str(hyp.get("claim", "")).split()),
            explains=tuple(hyp.get("explains", ())),
            probes=tuple(tests),
            remedies=tuple(hyp.get("remedies", ())),
            links=tuple(links),
            source=source,
            origin=f"{path}:{start}",
        )


def _check_id(table: Any, loc: _Locator, what: str, after: int = 1) -> None:
    if not isinstance(table, dict):
        raise loc.error(f"each {what} must be a table", None, after)
    ident = table.get("id")
    if not isinstance(ident, str) or not _ID.match(ident):
        raise loc.error(
            f"{what} needs id = a lowercase name (letters, digits, '-', '.', '_'), got {ident!r}",
            "id" if ident is None else str(ident),
            after,
        )


_LOADED: dict[tuple, Catalog] = {}  # the files as they were (path, source, text) -> what they said


def _files_key(files: list[tuple[Path, str]]) -> tuple:
    # keyed by the text itself: reading a few small files costs nothing beside parsing them,
    # and an edit is always seen (an mtime can stay the same within one clock tick)
    return tuple((str(path), source, path.read_bytes()) for path, source in files)


def load_catalog(user_dirs: Iterable[Path] = ()) -> Catalog:
    """Load the built-in catalog, then each user directory's ``*.toml`` in name order.

    Parsed once per set of files and their texts (a file edited, added or removed is parsed
    again): the agent broker loads it before it forks a command's child (app/quick.py), and
    the UI reopens the same files often. The definitions are frozen; the mapping is a copy."""
    files = [(path, "builtin") for path in sorted(BUILTIN_DIR.glob("*.toml"))]
    for directory in user_dirs:
        if directory.is_dir():
            files += [(path, "user") for path in sorted(directory.glob("*.toml"))]
    key = _files_key(files)
    if key in _LOADED:
        cached = _LOADED[key]
        return Catalog(dict(cached.symptoms), dict(cached.hypotheses))
    catalog = Catalog()
    for path, source in files:
        _parse_file(path, source, catalog)
    for hyp in catalog.hypotheses.values():
        for kind, other in hyp.links:
            if other not in catalog.hypotheses:
                path, _, line = hyp.origin.rpartition(":")
                raise CatalogError(path, int(line), 1, f"hypothesis {hyp.id!r} {kind} unknown hypothesis {other!r}")
    _LOADED.clear()  # only the latest set: an edited file's older parse is never wanted again
    _LOADED[key] = catalog
    return Catalog(dict(catalog.symptoms), dict(catalog.hypotheses))

"""Known upstream issues, as data: ``hypotheses/catalog/known/*.toml`` shipped with sleuth and
a user's ``.sleuth/known/*.toml`` (same schema), one ``[[issue]]`` table an entry.

Keys: ``id`` (``pytorch#126024``), ``title``, ``package``, ``affected`` (a PEP 440 specifier,
matched with ``packaging``), ``fixed_in`` (absent while open), ``signature`` (regexes over a
run's output or error text), ``explains`` (hypothesis ids), ``workarounds`` (remedy ids),
``source`` (a URL), ``checked`` (the date the entry was last verified against upstream),
``read`` (what each claim rests on: ``[[issue.read]]`` tables of ``claim``, ``source`` — a URL
or the file read, in which build — and ``on``, the date it was read). A
malformed entry is refused at load with ``path:line:col`` (CatalogError), as hypothesis files
are. Pure: which entries apply to a set of measured versions, which signatures a text shows.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from .catalog import BUILTIN_DIR, read_toml
from .errors import MissingField, RuleError
from .rules import Rule, compile_rule

__all__ = ["KNOWN_DIR", "KnownIssue", "SignatureWatch", "applying", "describe_left", "describe_match", "fix_words",
           "leaving", "load_known", "match_run", "overlay_took", "version_of"]

KNOWN_DIR = BUILTIN_DIR / "known"
_KEYS = {"id", "title", "package", "affected", "fixed_in", "signature", "rule", "probe", "explains", "workarounds",
         "source", "checked", "read"}
_REQUIRED = ("id", "title", "package", "affected", "source", "checked")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*#[0-9]+$")


@dataclass(frozen=True)
class KnownIssue:
    id: str
    title: str
    package: str
    affected: SpecifierSet
    fixed_in: Version | None
    signature: tuple[re.Pattern[str], ...]
    explains: tuple[str, ...]
    workarounds: tuple[str, ...]
    source: str
    checked: datetime.date
    origin: str  # path:line
    rule: Rule | None = None  # over the result fields of *probe*'s runs (the catalog's rule language)
    probe: str | None = None
    read: tuple[dict[str, str], ...] = ()  # what each claim rests on: claim, source, on (a date)

    def applies_to(self, version: str | None) -> bool:
        """Whether the installed *version* of the package is in the affected range (PEP 440:
        a local build tag such as +cu128 plays no part in a range)."""
        if version is None:
            return False
        try:  # a nightly (2.4.0.dev20240417+cpu) is a pre-release: it counts
            return self.affected.contains(Version(version), prereleases=True)
        except InvalidVersion:
            return False

    def seen_in(self, text: str) -> bool:
        return any(p.search(text) for p in self.signature)

    def holds_for(self, probe: str, result: Mapping[str, object]) -> bool:
        """Whether the entry's rule holds on a run of *probe* with these result fields (a
        missing field or a type mismatch: it does not)."""
        if self.rule is None or probe != self.probe:
            return False
        try:
            return bool(self.rule.evaluate(result))
        except (MissingField, TypeError):
            return False

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "title": self.title, "package": self.package, "affected": str(self.affected),
                "fixed_in": str(self.fixed_in) if self.fixed_in else None,
                "signature": [p.pattern for p in self.signature], "explains": list(self.explains),
                "workarounds": list(self.workarounds), "source": self.source, "checked": self.checked.isoformat(),
                "origin": self.origin, "read": [dict(r) for r in self.read],
                **({"rule": self.rule.source, "probe": self.probe} if self.rule else {})}


def load_known(user_dirs: Iterable[Path] = ()) -> dict[str, KnownIssue]:
    """The built-in entries, then each user directory's ``*.toml`` in name order (a user's
    entry of the same id replaces the built-in one)."""
    found: dict[str, KnownIssue] = {}
    files = sorted(KNOWN_DIR.glob("*.toml"))
    for directory in user_dirs:
        if directory.is_dir():
            files += sorted(directory.glob("*.toml"))
    for path in files:
        for entry in _parse(path):
            found[entry.id] = entry
    return found


def applying(entries: Mapping[str, KnownIssue], versions: Mapping[str, str]) -> list[KnownIssue]:
    """The entries whose package's measured version (*versions*: distribution name -> version,
    as a run's state reports them) is in the affected range."""
    return [e for e in entries.values() if e.applies_to(version_of(versions, e.package))]


def overlay_took(measured: str | None, wanted: str) -> bool:
    """Whether a run imported the release an overlay holds: the public versions are equal (a
    build from the PyTorch index carries a local label, 2.14.1+cu128, that pip's ==2.14.1
    accepts); a local label asked for (==2.14.1+cpu) must match as well."""
    if measured is None:
        return False
    try:
        got, want = Version(measured), Version(wanted)
    except InvalidVersion:
        return measured == wanted
    return got == want if want.local else got.public == want.public


def version_of(versions: Mapping[str, str], package: str) -> str | None:
    """*package*'s version among measured distributions, names compared as pip does."""
    want = re.sub(r"[-_.]+", "-", package).lower()
    for name, version in versions.items():
        if re.sub(r"[-_.]+", "-", name).lower() == want:
            return version
    return None


class SignatureWatch:
    """Watches a run's output as it streams (every stream) for the entries' signatures: the
    first line that shows each, kept as an excerpt. A line split across two chunks is seen
    whole (the end of the previous chunk is kept); once every signature was seen it stops
    reading."""

    TAIL = 4096

    def __init__(self, entries: Mapping[str, KnownIssue]) -> None:
        self._waiting = {e.id: e for e in entries.values() if e.signature}
        self.seen: dict[str, str] = {}  # entry id -> the line that showed it
        self._tail = ""

    def feed(self, stream: str, data: bytes) -> None:
        if not self._waiting:
            return
        text = self._tail + data.decode("utf-8", "replace")
        for ident, entry in list(self._waiting.items()):
            for pattern in entry.signature:
                m = pattern.search(text)
                if m is not None:
                    start = text.rfind("\n", 0, m.start()) + 1
                    end = text.find("\n", m.end())
                    line = text[start:end if end >= 0 else len(text)].strip()
                    self.seen[ident] = line if len(line) <= 300 else line[:297] + "…"
                    del self._waiting[ident]
                    break
        self._tail = text[-self.TAIL:]


def match_run(entries: Mapping[str, KnownIssue], versions: Mapping[str, str] | None,
              seen: Mapping[str, str], probe: str | None = None,
              result: Mapping[str, object] | None = None) -> list[dict[str, object]]:
    """The entries a finished run matches: its package's measured version is in the affected
    range and the run shows the failure — its output showed a signature (*seen*: id -> the
    line) or the entry's rule holds on the run's result (a run of the entry's probe); an entry
    with neither matches on versions alone. Without measured versions nothing matches: a match
    is never a guess."""
    if not versions:
        return []
    out = []
    for e in applying(entries, versions):
        shown = seen.get(e.id)
        if shown is None and e.rule is not None and probe is not None and e.holds_for(probe, result or {}):
            shown = f"{e.probe}: {e.rule.source}"
        if (e.signature or e.rule is not None) and shown is None:
            continue
        out.append({**e.to_dict(), "measured": version_of(versions, e.package), "seen": shown})
    return out


def leaving(entry: Mapping[str, object], versions: Mapping[str, str] | None) -> str | None:
    """Why a recorded match (*entry*: a match's dict) no longer applies to *versions*: the
    package left the affected range or is gone; None while it applies or nothing was measured."""
    if not versions:
        return None
    package = str(entry["package"])
    version = version_of(versions, package)
    if version is None:
        return f"{package} is not installed any more"
    try:
        inside = SpecifierSet(str(entry["affected"])).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return None
    return None if inside else f"{package} {version} is outside {entry['affected']}"


def fix_words(m: Mapping[str, object]) -> str:
    """"fixed in 2.15.0", or "no fixed-in release known as of 2026-12-04" (an open issue, or behaviour
    upstream keeps by design: the entry's title says which)."""
    if m.get("fixed_in"):
        return f"fixed in {m['fixed_in']}"
    return f"no fixed-in release known as of {m.get('checked')}"


def describe_standing(entry: KnownIssue, versions: Mapping[str, str], matched_by: list[int]) -> str:
    """Where *entry* stands on a target whose measured distributions are *versions*: matched by
    runs, in range but its symptom not seen, or out of range (with the fix, where there is one)."""
    version = version_of(versions, entry.package)
    fix = fix_words(entry.to_dict())
    if version is None:
        return f"{entry.id}: {entry.package} is not installed here ({fix})"
    if not entry.applies_to(version):
        return f"{entry.id}: {entry.package} {version} here is outside {entry.affected} ({fix})"
    where = f"{entry.package} {version} here is in {entry.affected}; {fix}"
    if matched_by:
        return f"{entry.id}: {where}; matched by {', '.join(f'#{r}' for r in matched_by)}"
    if entry.signature or entry.rule is not None:
        what = "its signature" if entry.signature else f"its rule ({entry.rule.source if entry.rule else ''})"
        return f"{entry.id}: {where}; {what} not seen in this session's runs"
    return f"{entry.id}: {where}"


def describe_match(m: Mapping[str, object], *, with_source: bool = True) -> str:
    """One match in words, the same everywhere (timeline, `probe run`, postmortem)."""
    how = "its signature is in the output" if m.get("seen") else "no signature: the versions alone"
    if m.get("versions_from"):
        how += f" (versions: {m['versions_from']})"
    said = (f"known upstream issue {m['id']} ({m['package']} {m.get('measured')} is in {m['affected']}; "
            f"{fix_words(m)}): {m['title']}; {how}")
    explains = m.get("explains") or []
    if explains:
        said += f"; explains {', '.join(map(str, explains))}"  # type: ignore[arg-type]
    workarounds = m.get("workarounds") or []
    if workarounds:
        said += f"; workarounds: {', '.join(map(str, workarounds))}"  # type: ignore[arg-type]
    return said + (f" — {m['source']}" if with_source else "")


def describe_left(m: Mapping[str, object]) -> str:
    """An entry that stopped applying on a target: "pytorch#1 no longer applies on ct200:
    torch 2.15.0 is outside >=2.0,<2.15 (fixed in 2.15.0)"."""
    return f"known upstream issue {m['id']} no longer applies on {m.get('target')}: {m.get('why')} ({fix_words(m)})"


def _parse(path: Path) -> list[KnownIssue]:
    doc, loc = read_toml(path)
    unknown = set(doc) - {"issue"}
    if unknown:
        key = sorted(unknown)[0]
        raise loc.error(f"unknown top-level key {key!r} (a known-issues file holds [[issue]] tables)", key)
    out = []
    start = 1
    for table in doc.get("issue", []):
        start, _ = loc.find("[[issue]]", start)
        here = f"{path}:{start}"
        extra = sorted(set(table) - _KEYS)
        if extra:
            raise loc.error(f"unknown key {extra[0]!r} in [[issue]]; keys: {', '.join(sorted(_KEYS))}", extra[0], start)
        for key in _REQUIRED:
            if not isinstance(table.get(key), (str, datetime.date)) or not str(table.get(key)).strip():
                raise loc.error(f"[[issue]] needs {key} = \"…\"", "[[issue]]", start)
        ident = str(table["id"])
        if not _ID.match(ident):
            raise loc.error(f"id {ident!r}: expected PROJECT#NUMBER, e.g. pytorch#126024", ident, start)
        try:
            affected = SpecifierSet(str(table["affected"]))
        except InvalidSpecifier:
            raise loc.error(f"affected {table['affected']!r} is not a PEP 440 specifier (e.g. \">=2.0,<2.14\")",
                            str(table["affected"]), start) from None
        fixed = None
        if table.get("fixed_in") is not None:
            try:
                fixed = Version(str(table["fixed_in"]))
            except InvalidVersion:
                raise loc.error(f"fixed_in {table['fixed_in']!r} is not a version", str(table["fixed_in"]), start) from None
        signature = []
        patterns = table.get("signature", [])
        if not isinstance(patterns, list) or not all(isinstance(x, str) for x in patterns):
            # a bare string would be read a character at a time: one-letter regexes match everything
            raise loc.error("signature must be a list of regular expressions: signature = ['…']", "signature", start)
        for pattern in patterns:
            try:
                signature.append(re.compile(str(pattern)))
            except re.error as exc:
                raise loc.error(f"signature {pattern!r} is not a regular expression: {exc}", str(pattern), start) from None
        rule = None
        if table.get("rule") is not None:
            if not isinstance(table.get("probe"), str):
                raise loc.error("an entry with a rule names the probe whose results it reads: probe = \"…\"", "rule", start)
            try:
                rule = compile_rule(str(table["rule"]))
            except RuleError as exc:
                raise loc.error(f"rule {table['rule']!r}: {exc}", str(table["rule"]), start) from None
        checked = table["checked"]
        if not isinstance(checked, datetime.date):
            try:
                checked = datetime.date.fromisoformat(str(checked))
            except ValueError:
                raise loc.error(f"checked {checked!r}: a date, YYYY-MM-DD", str(checked), start) from None
        lists = {}
        for key in ("explains", "workarounds"):
            value = table.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise loc.error(f"{key} must be a list of ids", key, start)
            lists[key] = tuple(value)
        read = []
        for claim in table.get("read", []):
            if not isinstance(claim, dict) or set(claim) - {"claim", "source", "on"} or \
                    not all(str(claim.get(k) or "").strip() for k in ("claim", "source", "on")):
                raise loc.error("each [[issue.read]] says claim = \"…\", source = \"…\" (a URL, or the file read and "
                                "in which build) and on = YYYY-MM-DD (when it was read)", "read", start)
            read.append({"claim": str(claim["claim"]).strip(), "source": str(claim["source"]).strip(),
                         "on": str(claim["on"])})
        out.append(KnownIssue(ident, str(table["title"]), str(table["package"]), affected, fixed, tuple(signature),
                              lists["explains"], lists["workarounds"], str(table["source"]), checked, here, rule,
                              str(table["probe"]) if rule is not None else None, tuple(read)))
        start += 1
    return out

"""Built-in probes: plain Python files in probes/scripts/, each with a ``PROBE`` literal.

The literal (read with ``ast.literal_eval``, never imported) holds ``id``, ``title``,
``timeout``, ``params`` (defaults), ``reports`` (the result fields) and ``cost`` (seconds,
roughly: the UI suggests the cheapest probe that could change a status). Each file runs
standalone too (``python probes/scripts/env_fingerprint.py`` prints its records as JSON).

Exceptions:
    ProbeError     unknown probe id, or a probe file without a valid PROBE literal
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ProbeError

__all__ = ["ProbeDef", "ProbeError", "builtin_probes", "probe_from_file", "SCRIPTS_DIR"]

SCRIPTS_DIR = Path(__file__).with_name("scripts")


@dataclass(frozen=True)
class ProbeDef:
    id: str
    title: str
    path: Path
    timeout: float = 120.0
    params: dict[str, Any] = field(default_factory=dict)
    reports: tuple[str, ...] = ()
    cost: float = 1.0
    needs: tuple[str, ...] = ()  # e.g. ("torch",)
    baseline: bool = False  # sessions passes the target's baseline result as params["baseline"]
    fork: bool = False  # safe to run forked from a warm agent (no CUDA, no process-global state)
    stochastic: bool = False  # a sample of a race: a repeat adds trials, it is never a circular retest
    analysis: str | None = None  # what sleuth reads from the records into the result ("stacks": hypotheses/hang/)
    # params with no default that fits every project (the user's entry script): a run needs them set
    required: tuple[str, ...] = ()
    # files beside the probe sent before it and run in its namespace (a long probe's parts)
    parts: tuple[Path, ...] = ()

    def missing(self, params: dict[str, Any]) -> list[str]:
        """The required params (the user's entry script) that *params* and the defaults leave unset."""
        merged = {**self.params, **params}
        return [name for name in self.required if merged.get(name) in (None, "")]

    @property
    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def part_sources(self) -> tuple[tuple[str, str], ...]:
        """Each part's file name and text, in the order they run."""
        return tuple((p.name, p.read_text(encoding="utf-8")) for p in self.parts)


def probe_from_file(path: Path, default_id: str | None = None) -> ProbeDef:
    text = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text, str(path))
    except SyntaxError as exc:
        raise ProbeError(f"{path}:{exc.lineno}:{exc.offset or 1}: {exc.msg}") from None
    meta: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "PROBE" for t in node.targets):
            try:
                meta = ast.literal_eval(node.value)
            except ValueError:
                raise ProbeError(f"{path}:{node.lineno}: PROBE must be a literal dict") from None
    if not meta and default_id is None:
        raise ProbeError(f"{path}: no PROBE = {{...}} literal with an id")
    parts = tuple(path.parent / str(name) for name in meta.get("parts", ()))
    for part in parts:
        if not part.is_file():
            raise ProbeError(f"{path}: PROBE's part {part.name} is not a file beside it")
    return ProbeDef(
        id=meta.get("id", default_id or path.stem),
        title=meta.get("title", path.stem),
        path=path,
        timeout=float(meta.get("timeout", 120.0)),
        params=dict(meta.get("params", {})),
        reports=tuple(meta.get("reports", ())),
        cost=float(meta.get("cost", 1.0)),
        needs=tuple(meta.get("needs", ())),
        baseline=bool(meta.get("baseline", False)),
        fork=bool(meta.get("fork", False)),
        stochastic=bool(meta.get("stochastic", False)),
        analysis=meta.get("analysis"),
        required=tuple(meta.get("required", ())),
        parts=parts,
    )


_BUILTIN: dict[tuple, dict[str, ProbeDef]] = {}


def builtin_probes() -> dict[str, ProbeDef]:
    """The built-in probes, parsed once per set of files and their texts (see load_catalog)."""
    paths = [p for p in sorted(SCRIPTS_DIR.glob("*.py")) if not p.name.startswith("_")]
    key = tuple((str(p), p.read_bytes()) for p in paths)
    if key not in _BUILTIN:
        found = {}
        for path in paths:
            probe = probe_from_file(path)
            found[probe.id] = probe
        _BUILTIN.clear()
        _BUILTIN[key] = found
    return dict(_BUILTIN[key])

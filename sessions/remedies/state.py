"""What an investigation's state says about remedies: the hypothesis a remedy is recorded
against, the run that verifies it (and with how many trials), the file it is applied to, the
shapes and compile sites fx-trace-state recorded, and why a remedy finds nothing to change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...hypotheses import InvestigationState, RunInfo, trials_needed
from ...probes.remedies import INSTALLED_FLAG, CodeFile
from ..errors import InvestigationError

__all__ = [
    "active_application",
    "addressed_hypothesis",
    "applied_file",
    "compile_sites",
    "fx_trace_run",
    "latest_shapes",
    "nothing_to_change",
    "remedy_inputs",
    "run_to_verify",
    "verify_params",
]


def addressed_hypothesis(state: InvestigationState, remedy: str) -> str | None:
    """The hypothesis *remedy* is recorded against, from the catalog: the most specific one
    that lists it — a refinement when it is the only one of its parent's that does (precompile
    → concurrent compile), else the parent (lock → compile race)."""
    listing = [h for h, d in state.hypotheses.items() if remedy in d.remedies]
    for h in listing:
        parent = state.parent(h)
        if parent in listing and sum(1 for c in state.children(parent) if c in listing) == 1:
            return h
    tops = [h for h in listing if state.parent(h) not in listing]
    return tops[0] if tops else None


def run_to_verify(state: InvestigationState, target: str, remedy: str | None = None) -> RunInfo | None:
    """The run to repeat after *remedy*: the latest run on *target* whose evidence supported
    a hypothesis the remedy addresses (the catalog says which) — the reproduction it should
    now make pass; with no remedy named, any hypothesis."""
    addressed = [h for h, d in state.hypotheses.items() if remedy is None or remedy in d.remedies]
    supporting = {run.id: run for h in addressed for run in state.supporting_runs(h) if run.target == target}
    return supporting[max(supporting)] if supporting else None


def applied_file(state: InvestigationState, remedy: str) -> Path | None:
    """The file *remedy* was last applied to and still is, if any."""
    for app in sorted(state.applications.values(), key=lambda a: -a.id):
        if app.active and app.remedy == remedy and app.files:
            return Path(app.files[-1]["path"])
    return None


def active_application(state: InvestigationState, file: CodeFile) -> tuple[int, dict[str, Any]]:
    """(application, its record of *file*) of the latest active remedy on *file*."""
    for app in sorted(state.applications.values(), key=lambda a: -a.id):
        if app.active:
            for f in app.files:
                if f["path"] == file.key:
                    return app.id, f
    raise InvestigationError(f"no active remedy on {file.key} in this investigation")


def verify_params(state: InvestigationState, run: RunInfo) -> dict[str, Any]:
    """Parameters for re-running *run* to verify a remedy: for a race (a stochastic probe with
    trials), enough trials that a clean result would be strong given how often it failed
    before (hypotheses/verification.py); nothing more for a deterministic check."""
    if not run.stochastic or not isinstance(run.result.get("trials"), int):
        return {}
    failed = trials = 0
    for other in state.runs.values():
        if other.probe == run.probe and other.target == run.target and other.remedies == run.remedies \
                and isinstance(other.result.get("trials"), int) and other.classification == "completed":
            failed += int(other.result.get("failed_trials") or 0)
            trials += int(other.result["trials"])
    return {"trials": trials_needed(failed, trials)}


def fx_trace_run(state: InvestigationState, target: str) -> RunInfo | None:
    """The latest completed fx-trace-state run on *target*."""
    for run in sorted(state.runs.values(), key=lambda r: -r.id):
        if run.probe == "fx-trace-state" and run.target == target and run.classification == "completed":
            return run
    return None


def latest_shapes(state: InvestigationState, target: str) -> tuple[list[dict[str, Any]], int | None]:
    """The shapes the latest completed fx-trace-state run on *target* recorded."""
    run = fx_trace_run(state, target)
    if run is None:
        return [], None
    return list(run.result.get("shapes") or []), run.id


def compile_sites(state: InvestigationState, target: str) -> tuple[list[dict[str, Any]], int | None]:
    """The compile sites (``sites``: where flex_attention was compiled or run eagerly, which
    library, how often) the latest completed fx-trace-state run on *target* saw, and its run."""
    run = fx_trace_run(state, target)
    if run is None:
        return [], None
    return [s for s in run.result.get("sites") or [] if isinstance(s, dict)], run.id


def remedy_inputs(state: InvestigationState, remedy: str, target: str, shapes: list | None = None) -> tuple[list | None, str]:
    """(shapes, where they came from) for *remedy*: precompile takes the latest
    fx-trace-state run's unless given some."""
    if remedy != "precompile" or shapes is not None:
        return shapes, ""
    found, run = latest_shapes(state, target)
    return found, f"Shapes recorded by sleuth's fx-trace-state probe (run #{run})." if run else ""


def _sites_said(sites: list[dict[str, Any]]) -> str:
    return ", ".join(dict.fromkeys(str(s.get("site") or f"{s.get('file')}:{s.get('line')}") for s in sites))


_WOULD = {"lock": "the compile it would guard", "precompile": "the compile it would run before the workers start"}


def nothing_to_change(state: InvestigationState, target: str, remedy: str, where: str) -> str:
    """Why *remedy* finds nothing to change in *where* (a file or a folder) and where the
    compile is: from the compile sites of the latest fx-trace-state run on *target*, or
    which probe would find them."""
    head = f"nothing in {where} that {remedy} would change"
    run = fx_trace_run(state, target)
    if run is None:
        return f"{head} (no compiled flex_attention, block mask or tracing site); run fx-trace-state to find where the compile happens"
    sites, _ = compile_sites(state, target)
    if "sites" not in run.result:
        return (f"{head} (no compiled flex_attention, block mask or tracing site); run fx-trace-state again to find where "
                f"the compile happens (run #{run.id} recorded no compile sites)")
    seen = f"seen by fx-trace-state run #{run.id}"
    compiled = [s for s in sites if s.get("kind") != "eager"]
    # the sites that compile flex_attention (or a function holding it), not torch's own inner compiles
    compiled = [s for s in compiled if s.get("target") == "flex_attention" or s.get("flex_inside")] or compiled
    if not compiled:
        eager = [s for s in sites if s.get("kind") == "eager"]
        if eager:
            return f"{head}: fx-trace-state run #{run.id} saw flex_attention run uncompiled (eager) at {_sites_said(eager)}: no compile to guard"
        return f"{head}: fx-trace-state run #{run.id} saw no compiled flex_attention call"
    libraries: dict[str, list[dict[str, Any]]] = {}
    own: list[dict[str, Any]] = []
    for s in compiled:
        if s.get("library"):
            libraries.setdefault(str(s["library"]), []).append(s)
        else:
            own.append(s)
    would = _WOULD.get(remedy, "the compile")
    parts = []
    if libraries:
        if len(libraries) == 1:
            [(lib, at)] = libraries.items()
            parts.append(f"{would} is in the library {lib} ({_sites_said(at)}, {seen})")
        else:
            libs = [f"{lib} ({_sites_said(at)})" for lib, at in libraries.items()]
            parts.append(f"{would} is in the libraries {', '.join(libs[:-1])} and {libs[-1]}, {seen}")
    if own:
        files = ", ".join(dict.fromkeys(f"{s.get('file')}:{s.get('line')}" for s in own if s.get("file")))
        at = f"{_sites_said(own)}" + (f": {files}" if files else "")
        parts.append(f"{'it is also' if libraries else would + ' is'} at {at} ({seen}): preview {remedy} on that file")
    said = f"{head}: " + "; ".join(parts)
    if libraries:
        said += f"; sleuth does not change installed packages unless asked ({INSTALLED_FLAG})"
    return said

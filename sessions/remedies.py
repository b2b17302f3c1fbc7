"""Remedies inside an investigation: the recorded preview, one apply and one revert path for
a local or a remote file, each an event with the file's before and after bytes, tied to the
hypothesis the catalog says the remedy addresses; and which run verifies an application."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sleuth.hypotheses import InvestigationState, RunInfo
from sleuth.probes import Target
from sleuth.probes.remedies import CodeFile, RemedyError, RemedyPlan, apply_plan, code_file, preview, revert

from .errors import InvestigationError
from .investigation import Investigation

__all__ = [
    "RemedyError",
    "addressed_hypothesis",
    "apply_remedy",
    "latest_shapes",
    "plan_remedy",
    "remedy_file",
    "revert_remedy",
    "run_to_verify",
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


def run_to_verify(state: InvestigationState, target: str) -> RunInfo | None:
    """The run to repeat after a remedy: the latest run on *target* whose evidence supported
    a hypothesis (the reproduction the remedy should now make pass)."""
    supporting = {run.id: run for h in state.hypotheses for run in state.supporting_runs(h) if run.target == target}
    return supporting[max(supporting)] if supporting else None


def remedy_file(state: InvestigationState, remedy: str, code_dir: Path) -> Path | None:
    """The local file *remedy* is about: the one it was last applied to (still active), else
    the first Python file under *code_dir* (hidden folders and caches skipped) it would change."""
    for app in sorted(state.applications.values(), key=lambda a: -a.id):
        if app.active and app.remedy == remedy and app.files:
            return Path(app.files[-1]["path"])
    for path in sorted(code_dir.rglob("*.py")):
        if any(part.startswith(".") or part == "__pycache__" for part in path.relative_to(code_dir).parts):
            continue
        try:
            plan = preview(remedy, path, shapes=[] if remedy == "precompile" else None)
        except RemedyError:  # not UTF-8, does not parse, unreadable: not a file to remedy
            continue
        if plan.findings and (plan.changes or plan.blocked):
            return path
    return None


def latest_shapes(inv: Investigation, target: str) -> tuple[list[dict[str, Any]], int | None]:
    """The shapes the latest completed fx-trace-state run on *target* recorded."""
    for run in sorted(inv.state.runs.values(), key=lambda r: -r.id):
        if run.probe == "fx-trace-state" and run.target == target and run.classification == "completed":
            return list(run.result.get("shapes") or []), run.id
    return [], None


def _file(target: Target | str, path: CodeFile | Path | str) -> CodeFile:
    if isinstance(path, CodeFile):
        return path
    if isinstance(target, Target):
        return code_file(target, path)
    return code_file(Target(name=target), path)


def plan_remedy(
    inv: Investigation, remedy: str, path: CodeFile | Path | str, target: Target | str = "local", shapes: list | None = None
) -> RemedyPlan:
    """Preview *remedy* on *path* (on *target*: fetched over SFTP or the hop chain) and
    record the preview."""
    name = target.name if isinstance(target, Target) else target
    note = ""
    if remedy == "precompile" and shapes is None:
        shapes, run = latest_shapes(inv, name)
        note = f"Shapes recorded by sleuth's fx-trace-state probe (run #{run})." if run else ""
    plan = preview(remedy, _file(target, path), shapes=shapes, source_note=note)
    inv.record_preview(plan.remedy, plan.file.key, plan.before_sha, plan.after_sha, plan.blocked)
    return plan


def apply_remedy(
    inv: Investigation, plan: RemedyPlan, target: Target | str = "local", hypothesis: str | None = None
) -> int | None:
    """Apply *plan*; None when the file already had it (nothing changed, nothing recorded)."""
    seen = inv.state.last_preview(plan.remedy, plan.file.key)
    if seen is not None and seen["before_sha"] != plan.before_sha:
        raise RemedyError(f"{plan.path} changed since its preview; preview again")
    record = apply_plan(plan)
    if record.get("unchanged"):
        return None
    hyp = hypothesis or addressed_hypothesis(inv.state, plan.remedy)
    name = target.name if isinstance(target, Target) else target
    return inv.record_application(plan.remedy, name, [record], hypothesis=hyp if hyp in inv.state.hypotheses else None)


def revert_remedy(inv: Investigation, path: CodeFile | Path | str, target: Target | str = "local") -> int:
    """Revert the latest active application that touched *path*; returns its number."""
    file = _file(target, path)
    for app in sorted(inv.state.applications.values(), key=lambda a: -a.id):
        if not app.active:
            continue
        for f in app.files:
            if f["path"] == file.key:
                revert(file, f["before"].encode("utf-8"), f["after_sha"])
                inv.record_revert(app.id)
                return app.id
    raise InvestigationError(f"no active remedy on {file.key} in this investigation")

"""Applying and reverting remedies inside an investigation: each one an event with the
file's before and after bytes, tied to the hypothesis it addresses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probes.remedies import RemedyError, RemedyPlan, apply_plan, preview, revert_file

from .investigation import Investigation, InvestigationError

__all__ = ["plan_remedy", "apply_remedy", "revert_remedy", "latest_shapes", "RemedyError"]

ADDRESSES = {"lock": "compile-race", "precompile": "concurrent-compile"}


def latest_shapes(inv: Investigation, target: str) -> tuple[list[dict[str, Any]], int | None]:
    """The shapes the latest completed fx-trace-state run on *target* recorded."""
    for run in sorted(inv.state.runs.values(), key=lambda r: -r.id):
        if run.probe == "fx-trace-state" and run.target == target and run.classification == "completed":
            return list(run.result.get("shapes") or []), run.id
    return [], None


def plan_remedy(inv: Investigation, remedy: str, path: Path | str, target: str = "local", shapes: list | None = None) -> RemedyPlan:
    note = ""
    if remedy == "precompile" and shapes is None:
        shapes, run = latest_shapes(inv, target)
        note = f"Shapes recorded by sleuth's fx-trace-state probe (run #{run})." if run else ""
    plan = preview(remedy, path, shapes=shapes, source_note=note)
    inv._record(
        "remedy.previewed",
        {"remedy": remedy, "path": str(Path(path).resolve()), "before_sha": plan.before_sha, "after_sha": plan.after_sha,
         "blocked": plan.blocked},
    )
    return plan


def _last_preview(inv: Investigation, remedy: str, path: str) -> dict[str, Any] | None:
    found = None
    for event in inv.store.events():
        if event.kind == "remedy.previewed" and event.data["remedy"] == remedy and event.data["path"] == path:
            found = event.data
    return found


def apply_remedy(inv: Investigation, plan: RemedyPlan, target: str = "local", hypothesis: str | None = None) -> int | None:
    """Apply *plan*; None when the file already had it (nothing changed, nothing recorded)."""
    path = str(plan.path.resolve())
    seen = _last_preview(inv, plan.remedy, path)
    if seen is not None and seen["before_sha"] != plan.before_sha:
        raise RemedyError(f"{plan.path} changed since its preview; preview again")
    record = apply_plan(plan)
    if record.get("unchanged"):
        return None
    record["path"] = path
    hyp = hypothesis or ADDRESSES.get(plan.remedy)
    if hyp not in inv.state.hypotheses:
        hyp = None
    return inv.record_application(plan.remedy, target, [record], hypothesis=hyp)


def revert_remedy(inv: Investigation, path: Path | str) -> int:
    """Revert the latest active application that touched *path*; returns its number."""
    want = str(Path(path).resolve())
    for app in sorted(inv.state.applications.values(), key=lambda a: -a.id):
        if app.active and any(f["path"] == want for f in app.files):
            for f in app.files:
                if f["path"] == want:
                    revert_file(want, f["before"].encode("utf-8"), f["after_sha"])
            inv.record_revert(app.id)
            return app.id
    raise InvestigationError(f"no active remedy on {path} in this investigation")

"""Applying and reverting remedies inside an investigation: each one an event with the
file's before and after bytes, tied to the hypothesis it addresses."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

from sleuth.hypotheses import EventKind
from sleuth.probes import SshPool, Target, TransportError
from sleuth.probes.remedies import RemedyError, RemedyPlan, apply_plan, preview, revert_file
from sleuth.probes.remote_files import ORIGINAL_SUFFIX, read_file, remote_path, write_file

from .investigation import Investigation, InvestigationError

__all__ = [
    "RemedyError",
    "apply_remedy",
    "apply_remote",
    "latest_shapes",
    "plan_remedy",
    "plan_remote",
    "revert_remedy",
    "revert_remote",
]

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
        EventKind.REMEDY_PREVIEWED,
        {"remedy": remedy, "path": str(Path(path).resolve()), "before_sha": plan.before_sha, "after_sha": plan.after_sha,
         "blocked": plan.blocked},
    )
    return plan


def _last_preview(inv: Investigation, remedy: str, path: str) -> dict[str, Any] | None:
    found = None
    for event in inv.store.events():
        if event.kind == EventKind.REMEDY_PREVIEWED and event.data["remedy"] == remedy and event.data["path"] == path:
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


# ---------------------------------------------------------------- remote targets


def _mirror(inv: Investigation, target: Target, rpath: str) -> Path:
    """Where the remote file's copy lives while it is previewed (under .sleuth/remote/)."""
    return inv.path.parent / "remote" / target.name / rpath.lstrip("/")


def _run(coro):
    async def go():
        pool = SshPool()
        try:
            return await coro(pool)
        finally:
            await pool.close()

    try:
        return asyncio.run(go())
    except (TransportError, OSError) as exc:
        raise RemedyError(str(exc)) from None


def plan_remote(inv: Investigation, remedy: str, target: Target, path: str, shapes: list | None = None) -> tuple[RemedyPlan, str]:
    """Fetch the remote file (SFTP, or through the container hop) and plan on a local copy."""
    rpath = remote_path(target, path)
    data = _run(lambda pool: read_file(target, rpath, pool))
    local = _mirror(inv, target, rpath)
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(data)
    plan = plan_remedy(inv, remedy, local, target.name, shapes)
    return plan, rpath


def apply_remote(inv: Investigation, plan: RemedyPlan, target: Target, rpath: str, hypothesis: str | None = None) -> int | None:
    if plan.blocked:
        raise RemedyError("not applied: " + "; ".join(plan.blocked))
    if not plan.changes:
        return None
    now = _run(lambda pool: read_file(target, rpath, pool))
    if now != plan.before:
        raise RemedyError(f"{target.name}:{rpath} changed since the preview; preview again")
    try:
        compile(plan.after, rpath, "exec")
    except SyntaxError as exc:
        raise RemedyError(f"{rpath}:{exc.lineno}: the remedied file would not parse; nothing written") from None
    _run(lambda pool: write_file(target, rpath, plan.after, pool))
    plan.path.write_bytes(plan.after)
    record = {
        "path": f"{target.name}:{rpath}",
        "before_sha": plan.before_sha,
        "after_sha": plan.after_sha,
        "diff": plan.diff,
        "before": plan.before.decode("utf-8"),
        "after": plan.after.decode("utf-8"),
        "original_kept": rpath + ORIGINAL_SUFFIX,
    }
    hyp = hypothesis or ADDRESSES.get(plan.remedy)
    return inv.record_application(plan.remedy, target.name, [record], hypothesis=hyp if hyp in inv.state.hypotheses else None)


def revert_remote(inv: Investigation, target: Target, path: str) -> int:
    rpath = remote_path(target, path)
    want = f"{target.name}:{rpath}"
    for app in sorted(inv.state.applications.values(), key=lambda a: -a.id):
        if app.active and any(f["path"] == want for f in app.files):
            f = next(f for f in app.files if f["path"] == want)
            now = _run(lambda pool: read_file(target, rpath, pool))
            before = f["before"].encode("utf-8")
            if now != before:
                if hashlib.sha256(now).hexdigest() != f["after_sha"]:
                    raise RemedyError(f"{want} changed since the remedy was applied; not reverted (the original is in the session and in {rpath}{ORIGINAL_SUFFIX})")
                _run(lambda pool, data=before: write_file(target, rpath, data, pool, keep_original=False))
            inv.record_revert(app.id)
            return app.id
    raise InvestigationError(f"no active remedy on {want} in this investigation")

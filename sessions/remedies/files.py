"""A remedy on one file, here or on a target: the recorded preview, the write checked against
that preview, the application recorded against the hypothesis it addresses, and the revert
of every file of an application — each file's before and after bytes in the event."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...hypotheses import InvestigationState, RemedyApplication
from ...probes import ReachError, Target
from ...probes.remedies import CodeFile, RemedyError, RemedyPlan, apply_plan, code_file, preview, revert, sha256
from ..investigation import Investigation
from .state import active_application, addressed_hypothesis, fx_trace_run, nothing_to_change, remedy_inputs

__all__ = [
    "apply_remedy",
    "file_on",
    "plan_remedy",
    "record_remedy",
    "restore_application",
    "revert_application",
    "revert_remedy",
    "target_name",
    "write_remedy",
]


def target_name(target: Target | str) -> str:
    """The name of *target* (a target, or its name)."""
    return target.name if isinstance(target, Target) else target


def file_on(target: Target | str, path: CodeFile | Path | str) -> CodeFile:
    """*path* as a file on *target* (read and written there: SFTP or the hop chain)."""
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
    given = shapes is not None  # --shapes or sleuth.toml: they say where their calls were compiled
    shapes, note = remedy_inputs(inv.state, remedy, target_name(target), shapes)
    plan = preview(remedy, file_on(target, path), shapes=shapes, source_note=note)
    if plan.nothing and not (given and fx_trace_run(inv.state, target_name(target)) is None):
        # say where the compile is (the latest fx-trace-state run's compile sites), or which probe finds it
        plan.blocked = [nothing_to_change(inv.state, target_name(target), remedy, str(path if not isinstance(path, CodeFile)
                                                                                       else plan.path))]
    inv.record_preview(plan.remedy, plan.file.key, plan.before_sha, plan.after_sha, plan.blocked)
    return plan


def write_remedy(state: InvestigationState, plan: RemedyPlan, into_installed_package: bool = False) -> dict[str, Any] | None:
    """Write *plan* to its file (checked against its recorded preview): the record for the
    session, or None when the file already had it. A file of an installed package only when
    *into_installed_package*. File I/O only: a worker may call it."""
    seen = state.last_preview(plan.remedy, plan.file.key)
    if seen is not None and seen["before_sha"] != plan.before_sha:
        raise RemedyError(f"{plan.path} changed since its preview; preview again")
    record = apply_plan(plan, into_installed_package=into_installed_package)
    return None if record.get("unchanged") else record


def record_remedy(
    inv: Investigation, plan: RemedyPlan, record: dict[str, Any], target: Target | str = "local", hypothesis: str | None = None
) -> int:
    """Record a written remedy against the hypothesis it addresses; the application number."""
    hyp = hypothesis or addressed_hypothesis(inv.state, plan.remedy)
    return inv.record_application(plan.remedy, target_name(target), [record],
                                  hypothesis=hyp if hyp in inv.state.hypotheses else None)


def apply_remedy(
    inv: Investigation, plan: RemedyPlan, target: Target | str = "local", hypothesis: str | None = None,
    into_installed_package: bool = False,
) -> int | None:
    """Apply *plan*; None when the file already had it (nothing changed, nothing recorded).
    A file of an installed package is written only when *into_installed_package*."""
    record = write_remedy(inv.state, plan, into_installed_package)
    return None if record is None else record_remedy(inv, plan, record, target, hypothesis)


def revert_remedy(inv: Investigation, path: CodeFile | Path | str, target: Target | str = "local") -> int:
    """Revert the latest active application that touched *path* — every file it changed, as
    it was one application — and return its number. Nothing is written unless every file
    can be put back (none edited since)."""
    file = file_on(target, path)
    app, _f = active_application(inv.state, file)
    return revert_application(inv, app, target)


def restore_application(app: RemedyApplication, target: Target | str = "local") -> list[str]:
    """Put back the original bytes of every file of *app*, or of none: each file is checked
    first (a file edited since the apply is named, with every other such file, and nothing is
    written), and a write that fails puts back what was written before it. Files only — the
    caller records the revert (``revert_application``; the UI does it on its loop). Returns
    the files restored."""
    files = [(file_on(target, f["path"].split(":", 1)[1] if ":" in f["path"] and not Path(f["path"]).is_absolute()
                      else f["path"]), f) for f in app.files]
    now: list[bytes] = []
    edited = []
    for file, f in files:  # check all first: a half-reverted tree is as bad as a half-fixed one
        data = file.read() if file.exists() else b""
        now.append(data)
        if data != f["before"].encode("utf-8") and sha256(data) != f["after_sha"]:
            edited.append(file.key)
    if edited:
        raise RemedyError(f"{', '.join(edited)} changed since {app.remedy} was applied (application #{app.id}); "
                          "nothing reverted (the originals are in the session)")
    done: list[tuple[CodeFile, bytes]] = []
    try:
        for (file, f), data in zip(files, now, strict=True):
            revert(file, f["before"].encode("utf-8"), f["after_sha"])
            done.append((file, data))
    except (RemedyError, ReachError):  # a write refused, or the target lost midway
        for file, data in reversed(done):  # all or none
            file.replace(data, keep_original=False)
        raise
    return [file.key for file, _f in files]


def revert_application(inv: Investigation, app_id: int, target: Target | str = "local") -> int:
    """Put back the original bytes of every file of application *app_id*, or none of them,
    and record the revert."""
    restore_application(inv.state.applications[app_id], target)
    inv.record_revert(app_id)
    return app_id

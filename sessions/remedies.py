"""Remedies inside an investigation: the recorded preview, one apply and one revert path for
a local or a remote file, each an event with the file's before and after bytes, tied to the
hypothesis the catalog says the remedy addresses; and which run verifies an application."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath
from typing import Any

from ..hypotheses import InvestigationState, RemedyApplication, RunInfo, trials_needed
from ..probes import ReachError, Target
from ..probes.remedies import (
    INSTALLED_FLAG,
    CodeFile,
    InstalledPackageError,
    RemedyError,
    RemedyPlan,
    apply_plan,
    code_file,
    preview,
    remote_tree,
    revert,
    sha256,
)
from ..probes.remote_files import remote_path
from .errors import InvestigationError
from .investigation import Investigation

__all__ = [
    "RemedyError",
    "active_application",
    "addressed_hypothesis",
    "applied_file",
    "apply_remedy",
    "compile_sites",
    "find_remedy_file",
    "latest_shapes",
    "nothing_to_change",
    "plan_remedy",
    "record_remedy",
    "restore_application",
    "remedy_inputs",
    "TreePlan",
    "apply_tree",
    "plan_tree",
    "revert_application",
    "revert_remedy",
    "revert_tree",
    "tree_files",
    "run_to_verify",
    "verify_params",
    "write_remedy",
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


def find_remedy_file(remedy: str, code_dir: Path) -> Path | None:
    """The first Python file under *code_dir* (hidden folders and caches skipped) that
    *remedy* would change or has something to say about. Reads files: not for a UI loop."""
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


def latest_shapes(state: InvestigationState, target: str) -> tuple[list[dict[str, Any]], int | None]:
    """The shapes the latest completed fx-trace-state run on *target* recorded."""
    for run in sorted(state.runs.values(), key=lambda r: -r.id):
        if run.probe == "fx-trace-state" and run.target == target and run.classification == "completed":
            return list(run.result.get("shapes") or []), run.id
    return [], None


def _fx_trace_run(state: InvestigationState, target: str) -> RunInfo | None:
    for run in sorted(state.runs.values(), key=lambda r: -r.id):
        if run.probe == "fx-trace-state" and run.target == target and run.classification == "completed":
            return run
    return None


def compile_sites(state: InvestigationState, target: str) -> tuple[list[dict[str, Any]], int | None]:
    """The compile sites (``sites``: where flex_attention was compiled or run eagerly, which
    library, how often) the latest completed fx-trace-state run on *target* saw, and its run."""
    run = _fx_trace_run(state, target)
    if run is None:
        return [], None
    return [s for s in run.result.get("sites") or [] if isinstance(s, dict)], run.id


def _sites_said(sites: list[dict[str, Any]]) -> str:
    return ", ".join(dict.fromkeys(str(s.get("site") or f"{s.get('file')}:{s.get('line')}") for s in sites))


_WOULD = {"lock": "the compile it would guard", "precompile": "the compile it would run before the workers start"}


def nothing_to_change(state: InvestigationState, target: str, remedy: str, where: str) -> str:
    """Why *remedy* finds nothing to change in *where* (a file or a folder) and where the
    compile is: from the compile sites of the latest fx-trace-state run on *target*, or
    which probe would find them."""
    head = f"nothing in {where} that {remedy} would change"
    run = _fx_trace_run(state, target)
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


def _name(target: Target | str) -> str:
    return target.name if isinstance(target, Target) else target


def _file(target: Target | str, path: CodeFile | Path | str) -> CodeFile:
    if isinstance(path, CodeFile):
        return path
    if isinstance(target, Target):
        return code_file(target, path)
    return code_file(Target(name=target), path)


def remedy_inputs(state: InvestigationState, remedy: str, target: str, shapes: list | None = None) -> tuple[list | None, str]:
    """(shapes, where they came from) for *remedy*: precompile takes the latest
    fx-trace-state run's unless given some."""
    if remedy != "precompile" or shapes is not None:
        return shapes, ""
    found, run = latest_shapes(state, target)
    return found, f"Shapes recorded by sleuth's fx-trace-state probe (run #{run})." if run else ""


def plan_remedy(
    inv: Investigation, remedy: str, path: CodeFile | Path | str, target: Target | str = "local", shapes: list | None = None
) -> RemedyPlan:
    """Preview *remedy* on *path* (on *target*: fetched over SFTP or the hop chain) and
    record the preview."""
    given = shapes is not None  # --shapes or sleuth.toml: they say where their calls were compiled
    shapes, note = remedy_inputs(inv.state, remedy, _name(target), shapes)
    plan = preview(remedy, _file(target, path), shapes=shapes, source_note=note)
    if plan.nothing and not (given and _fx_trace_run(inv.state, _name(target)) is None):
        # say where the compile is (the latest fx-trace-state run's compile sites), or which probe finds it
        plan.blocked = [nothing_to_change(inv.state, _name(target), remedy, str(path if not isinstance(path, CodeFile)
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
    return inv.record_application(plan.remedy, _name(target), [record], hypothesis=hyp if hyp in inv.state.hypotheses else None)


def apply_remedy(
    inv: Investigation, plan: RemedyPlan, target: Target | str = "local", hypothesis: str | None = None,
    into_installed_package: bool = False,
) -> int | None:
    """Apply *plan*; None when the file already had it (nothing changed, nothing recorded).
    A file of an installed package is written only when *into_installed_package*."""
    record = write_remedy(inv.state, plan, into_installed_package)
    return None if record is None else record_remedy(inv, plan, record, target, hypothesis)


def active_application(state: InvestigationState, file: CodeFile) -> tuple[int, dict[str, Any]]:
    """(application, its record of *file*) of the latest active remedy on *file*."""
    for app in sorted(state.applications.values(), key=lambda a: -a.id):
        if app.active:
            for f in app.files:
                if f["path"] == file.key:
                    return app.id, f
    raise InvestigationError(f"no active remedy on {file.key} in this investigation")


def revert_remedy(inv: Investigation, path: CodeFile | Path | str, target: Target | str = "local") -> int:
    """Revert the latest active application that touched *path* — every file it changed, as
    it was one application — and return its number. Nothing is written unless every file
    can be put back (none edited since)."""
    file = _file(target, path)
    app, _f = active_application(inv.state, file)
    return revert_application(inv, app, target)


def restore_application(app: RemedyApplication, target: Target | str = "local") -> list[str]:
    """Put back the original bytes of every file of *app*, or of none: each file is checked
    first (a file edited since the apply is named, with every other such file, and nothing is
    written), and a write that fails puts back what was written before it. Files only — the
    caller records the revert (``revert_application``; the UI does it on its loop). Returns
    the files restored."""
    files = [(_file(target, f["path"].split(":", 1)[1] if ":" in f["path"] and not Path(f["path"]).is_absolute()
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


# ---------------------------------------------------------------- whole trees

_SKIP_DIRS = {"__pycache__", "node_modules", "site-packages", "build", "dist"}


def tree_files(root: Path) -> list[Path]:
    """The Python files of a code tree: hidden folders, caches, venvs and builds skipped."""
    out = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts[:-1]
        if any(p.startswith(".") or p in _SKIP_DIRS for p in parts):
            continue
        if any((root.joinpath(*parts[: i + 1]) / "pyvenv.cfg").exists() for i in range(len(parts))):
            continue
        out.append(path)
    return out


@dataclass
class TreePlan:
    """A remedy over a whole code tree: one plan per module it has something to say about."""

    remedy: str
    root: PurePath  # a local folder, or a folder on the target
    plans: list[RemedyPlan]
    skipped: list[str]  # files sleuth could not read as Python, and why

    @property
    def blocked(self) -> list[str]:
        return [b for p in self.plans for b in p.blocked]

    @property
    def changes(self) -> bool:
        return any(p.changes for p in self.plans)

    def relative(self, plan: RemedyPlan) -> str:
        try:
            return PurePosixPath(plan.path.relative_to(self.root.parent).as_posix()).as_posix()
        except ValueError:  # listed under another spelling of the root (a/./b, a link): its own path
            return plan.path.as_posix()

    @property
    def installed(self) -> list[RemedyPlan]:
        """The plans whose file is part of an installed package."""
        return [p for p in self.plans if p.installed is not None]

    @property
    def diff(self) -> str:
        return "".join(p.diff_as(self.relative(p)) for p in self.plans if p.changes)


_WRAPS, _GATES = b"_sleuth_serialized", b"_SLEUTH_FIRST_PASS"  # the lock's two forms (probes/remedies)


def plan_tree(
    inv: Investigation, remedy: str, root: Path | str, target: Target | str = "local", shapes: list | None = None
) -> TreePlan:
    """Preview *remedy* on every module under *root* — a local folder, or one on *target*
    (listed and read through its hop chain or SFTP) — and record each preview."""
    shapes, note = remedy_inputs(inv.state, remedy, _name(target), shapes)
    where: PurePath
    if isinstance(target, Target) and not target.is_local:
        files: list[CodeFile | Path] = list(remote_tree(target, str(root)))
        where = PurePosixPath(remote_path(target, str(root)))
    else:
        where = Path(root)
        files = list(tree_files(where))
    plans, skipped = [], []
    for path in files:
        try:
            plan = preview(remedy, path, shapes=shapes, source_note=note)
        except RemedyError as exc:
            skipped.append(str(exc))
            continue
        if plan.findings and not plan.nothing:
            plans.append(plan)
    if any(_WRAPS in p.after for p in plans):  # the tree holds its compile: the lock wraps it there, and
        # the workers' first-pass gate (for a compile that lives in a library) is not needed elsewhere
        plans = [p for p in plans if _WRAPS in p.after or (_GATES not in p.after and not all(
            f["left_unlocked"] for f in p.findings))]
    if not plans:
        raise RemedyError(nothing_to_change(inv.state, _name(target), remedy, f"{str(root).rstrip('/')}/"))
    for plan in plans:
        inv.record_preview(plan.remedy, plan.file.key, plan.before_sha, plan.after_sha, plan.blocked)
    return TreePlan(remedy, where, plans, skipped)


def apply_tree(inv: Investigation, tree: TreePlan, target: Target | str = "local", hypothesis: str | None = None,
               into_installed_package: bool = False) -> int | None:
    """Apply a tree plan as one application: every module, or none (a write that fails puts
    back the ones written before it). None when every module already had it. A module of an
    installed package is written only when *into_installed_package* (else nothing is)."""
    if tree.blocked:
        raise RemedyError("not applied: " + "; ".join(tree.blocked))
    refused = [p for p in tree.installed if p.changes]
    if refused and not into_installed_package:
        installed = refused[0].installed
        assert installed is not None
        raise InstalledPackageError(installed) if len(refused) == 1 else RemedyError(
            f"{installed.said} (and {len(refused) - 1} more module{'s' * (len(refused) > 2)} of installed packages); "
            f"not applied: sleuth changes an installed package only when asked ({INSTALLED_FLAG})")
    written: list[tuple[RemedyPlan, dict[str, Any]]] = []
    try:
        for plan in tree.plans:
            record = write_remedy(inv.state, plan, into_installed_package)
            if record is not None:
                written.append((plan, record))
    except (RemedyError, ReachError):  # a write refused, or the target lost midway
        for plan, record in reversed(written):
            revert(plan.file, plan.before, record["after_sha"])
        raise
    if not written:
        return None
    hyp = hypothesis or addressed_hypothesis(inv.state, tree.remedy)
    return inv.record_application(tree.remedy, _name(target), [r for _p, r in written],
                                  hypothesis=hyp if hyp in inv.state.hypotheses else None)


def revert_tree(inv: Investigation, root: Path | str, target: Target | str = "local") -> int:
    """Revert the latest active application whose files are all under *root*."""
    if isinstance(target, Target) and not target.is_local:
        prefix = f"{target.name}:{remote_path(target, str(root)).rstrip('/')}/"
    else:
        prefix = str(Path(root).resolve()) + "/"
    for app in sorted(inv.state.applications.values(), key=lambda a: -a.id):
        if app.active and app.files and all(f["path"].startswith(prefix) for f in app.files):
            return revert_application(inv, app.id, target)
    raise InvestigationError(f"no active remedy under {root} in this investigation")

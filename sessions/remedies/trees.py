"""A remedy over a whole code tree, here or on a target: which modules it reads, the plan of
every module it has something to say about (previews recorded), one application for all of
them or none, and its revert; and the first file under a folder a remedy would change."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath
from typing import Any

from ...probes import ReachError, Target
from ...probes.remedies import (
    INSTALLED_FLAG,
    CodeFile,
    InstalledPackageError,
    RemedyError,
    RemedyPlan,
    preview,
    remote_tree,
    revert,
)
from ...probes.remote_files import remote_path
from ..errors import InvestigationError
from ..investigation import Investigation
from .files import revert_application, target_name, write_remedy
from .state import addressed_hypothesis, nothing_to_change, remedy_inputs

__all__ = ["TreePlan", "apply_tree", "find_remedy_file", "plan_tree", "revert_tree", "tree_files"]

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
    shapes, note = remedy_inputs(inv.state, remedy, target_name(target), shapes)
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
        raise RemedyError(nothing_to_change(inv.state, target_name(target), remedy, f"{str(root).rstrip('/')}/"))
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
    return inv.record_application(tree.remedy, target_name(target), [r for _p, r in written],
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

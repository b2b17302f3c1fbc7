"""Remedies: libcst codemods applied to the user's training code, reviewable and reversible.

Each remedy is a :class:`Remedy` (its id, what it does, its transform); which hypotheses
it addresses is the catalog's to say (a hypothesis lists its remedies). ``preview`` makes a
:class:`RemedyPlan` for a :class:`CodeFile` — a local file or one on a target — with the
unified diff, what was found and what blocks it; ``apply_plan`` writes it atomically,
refusing a file changed since the preview, a plan with an unhandled form, or a result that
does not parse (applying twice changes nothing); ``revert`` restores the exact original
bytes unless the file was edited since. One path for local and remote files alike. A file
of an installed package (site-packages, dist-packages, a standard library) is said to be one
in the plan, and written only when the caller asks (``into_installed_package``). The
code a remedy inserts is standard library and torch only, marked as sleuth's, because the
drafter runs where sleuth is not installed.

Exceptions:
    RemedyError             the remedy cannot be previewed, applied or reverted; says why and where
    InstalledPackageError   a RemedyError: the file is in an installed package and nobody asked
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from ..errors import RemedyError
from .files import CodeFile, LocalFile, RemoteFile, code_file, remote_tree
from .installed import INSTALLED_FLAG, InstalledPackage, installed_package

if TYPE_CHECKING:
    from .common import Findings

# The codemods (libcst) load when a remedy is previewed or applied, not with every command.


def _lock(source: str, file: CodeFile, shapes: list[dict[str, Any]], note: str) -> tuple[str, Findings, dict[str, int]]:
    from .lock import lock_transform

    return lock_transform(source)


def _precompile(source: str, file: CodeFile, shapes: list[dict[str, Any]], note: str) -> tuple[str, Findings, dict[str, int]]:
    from .precompile import precompile_transform

    return precompile_transform(source, file, shapes, note)

__all__ = [
    "INSTALLED_FLAG",
    "REMEDIES",
    "CodeFile",
    "InstalledPackage",
    "InstalledPackageError",
    "LocalFile",
    "Remedy",
    "RemedyError",
    "RemedyPlan",
    "RemoteFile",
    "apply_plan",
    "code_file",
    "installed_of",
    "remote_tree",
    "preview",
    "revert",
    "sha256",
]

Transform = Callable[[str, CodeFile, list[dict[str, Any]], str], "tuple[str, Findings, dict[str, int]]"]


@dataclass(frozen=True)
class Remedy:
    """One remedy: its id, what it does in a sentence, and the codemod that makes it."""

    id: str
    summary: str
    transform: Transform
    needs_shapes: bool = False  # precompile: the shapes the workers will see


REMEDIES: dict[str, Remedy] = {
    "lock": Remedy(
        "lock",
        "one process-wide re-entrant lock around every compiled flex_attention call, "
        "create_block_mask and FX tracing site (fixes concurrent compile and concurrent FX trace)",
        _lock,
    ),
    "precompile": Remedy(
        "precompile",
        "compile every shape before the workers start, then fail on any recompile "
        "(fixes concurrent compile; not concurrent FX trace)",
        _precompile,
        needs_shapes=True,
    ),
}


NOTHING_FOR = "nothing for {remedy} to change here"


def _syntax_error() -> type[Exception]:
    import libcst

    return libcst.ParserSyntaxError


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class InstalledPackageError(RemedyError):
    """The file is part of an installed package and the caller did not ask to change one."""

    def __init__(self, installed: InstalledPackage, flag: str = INSTALLED_FLAG) -> None:
        self.installed = installed
        super().__init__(f"{installed.said}; not applied: sleuth changes an installed package only when asked ({flag})")


def installed_of(file: CodeFile) -> InstalledPackage | None:
    """The installed package *file* is part of, if any."""
    return installed_package(file.path, isinstance(file, LocalFile))


def _is_python(file: CodeFile, before: bytes) -> bool:
    """A .py module, or a script without a suffix whose first line runs Python."""
    if file.path.suffix in (".py", ".pyw"):
        return True
    return not file.path.suffix and before.startswith(b"#!") and b"python" in before.split(b"\n", 1)[0]


@dataclass
class RemedyPlan:
    remedy: str
    file: CodeFile
    before: bytes
    after: bytes
    findings: list[dict[str, Any]] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    installed: InstalledPackage | None = None  # the file is part of this installed package
    nothing: bool = False  # blocked only because nothing here is the remedy's to change (its compile is elsewhere)

    @property
    def before_sha(self) -> str:
        return sha256(self.before)

    @property
    def after_sha(self) -> str:
        return sha256(self.after)

    @property
    def path(self) -> PurePath:
        return self.file.path

    @property
    def changes(self) -> bool:
        return self.before != self.after

    @property
    def diff(self) -> str:
        return self.diff_as(self.path.name)

    def diff_as(self, name: str) -> str:
        """The unified diff with the file called *name* (a path relative to a tree's root)."""
        return "".join(
            difflib.unified_diff(
                self.before.decode("utf-8", "replace").splitlines(True),
                self.after.decode("utf-8", "replace").splitlines(True),
                f"a/{name}",
                f"b/{name}",
            )
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "remedy": self.remedy,
            "path": str(self.path),
            "file": self.file.key,
            "before_sha": self.before_sha,
            "after_sha": self.after_sha,
            "changes": self.changes,
            "diff": self.diff,
            "findings": self.findings,
            "blocked": self.blocked,
            "installed_package": self.installed.to_dict() if self.installed else None,
        }


def preview(remedy: str, file: CodeFile | Path | str, *, shapes: list[dict[str, Any]] | None = None,
            source_note: str = "") -> RemedyPlan:
    """What *remedy* would change in *file* (a path means a local file)."""
    if remedy not in REMEDIES:
        raise RemedyError(f"unknown remedy {remedy!r}; remedies: {', '.join(REMEDIES)}")
    if not isinstance(file, CodeFile):
        file = LocalFile(file)
    path = file.path
    if "\x00" in str(path):  # a name no file can have
        raise RemedyError(f"{str(path)!r:.200}: not a usable path (a NUL byte in its name)")
    try:
        exists = file.exists()
    except ValueError as exc:  # a name the system refuses (one it cannot encode)
        raise RemedyError(f"{str(path)!r:.200}: not a usable path ({exc})") from None
    if not exists:
        raise RemedyError(f"{path}: no such file")
    before = file.read()
    if not _is_python(file, before):
        raise RemedyError(f"{path}: not a Python file (a remedy changes .py modules)")
    try:
        source = before.decode("utf-8")
        after, found, _counts = REMEDIES[remedy].transform(source, file, shapes or [], source_note)
    except UnicodeDecodeError:
        raise RemedyError(f"{path}: not UTF-8 text") from None
    except _syntax_error() as exc:
        raise RemedyError(
            f"{path}:{getattr(exc, 'raw_line', '?')}:{getattr(exc, 'raw_column', '?')}: does not parse: "
            f"{getattr(exc, 'message', exc)}"
        ) from None
    findings = [{"line": f.line, "what": f.what, "handled": f.handled, "left_unlocked": f.left_unlocked} for f in found.items]
    blocked = [f"{path}:{f.line}: {f.what}" if f.line else f"{path}: {f.what}" for f in found.unhandled]
    nothing = bool(blocked) and after == source and all(f.nothing for f in found.unhandled)
    if not blocked and after == source and not any("already" in f.what or f.left_unlocked for f in found.items):
        if not _mentions_sleuth(source, remedy):
            blocked.append(f"{path}: {NOTHING_FOR.format(remedy=remedy)} (no compiled flex_attention, block mask or tracing site)")
            nothing = True
    return RemedyPlan(remedy, file, before, after.encode("utf-8"), findings, blocked, installed_of(file), nothing)


def _mentions_sleuth(source: str, remedy: str) -> bool:
    return f"sleuth: {remedy} remedy" in source


def apply_plan(plan: RemedyPlan, *, into_installed_package: bool = False) -> dict[str, Any]:
    """Write the plan; return the record for the session (file, hashes, diff, bytes, where
    the original is kept, the installed package it changed), or one with ``unchanged`` when
    the remedy was already there. A file of an installed package is written only when
    *into_installed_package* (else :class:`InstalledPackageError`)."""
    if plan.blocked:
        raise RemedyError("not applied: " + "; ".join(plan.blocked))
    now = plan.file.read()
    if now != plan.before:
        raise RemedyError(f"{plan.file.key} changed since the preview (sha {plan.before_sha[:12]} → {sha256(now)[:12]}); preview again")
    if not plan.changes:
        return {"path": plan.file.key, "before_sha": plan.before_sha, "after_sha": plan.after_sha, "diff": "", "unchanged": True}
    if plan.installed is not None and not into_installed_package:
        raise InstalledPackageError(plan.installed)
    try:
        compile(plan.after, str(plan.path), "exec")
    except SyntaxError as exc:  # never write a file that does not parse
        raise RemedyError(f"{plan.path}:{exc.lineno}: the remedied file would not parse ({exc.msg}); nothing written") from None
    kept = plan.file.replace(plan.after)
    record: dict[str, Any] = {
        "path": plan.file.key,
        "before_sha": plan.before_sha,
        "after_sha": plan.after_sha,
        "diff": plan.diff,
        "before": plan.before.decode("utf-8"),
        "after": plan.after.decode("utf-8"),
    }
    if kept:
        record["original_kept"] = kept
    if plan.installed is not None:
        record["installed_package"] = plan.installed.to_dict()
    return record


def revert(file: CodeFile | Path | str, before: bytes, after_sha: str) -> None:
    """Put *before* back, unless the file was edited after the remedy (then refuse)."""
    if not isinstance(file, CodeFile):
        file = LocalFile(file)
    now = file.read() if file.exists() else b""
    if now == before:
        return
    if sha256(now) != after_sha:
        raise RemedyError(f"{file.key} changed since the remedy was applied; not reverted (the original is in the session)")
    file.replace(before, keep_original=False)


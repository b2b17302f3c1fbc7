"""Remedies: libcst codemods applied to the user's training code, reviewable and reversible.

``preview`` makes a :class:`RemedyPlan` (the unified diff, what was found, what blocks it);
``apply_plan`` writes it atomically — refusing a file changed since the preview, a plan
with an unhandled form, or a result that does not parse; applying twice changes nothing;
``revert_file`` restores the exact original bytes. The code a remedy inserts is standard
library and torch only, marked as sleuth's, because the drafter runs where sleuth is not
installed.

Exceptions:
    RemedyError     the remedy cannot be previewed, applied or reverted; says why and where
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libcst as cst

from ..errors import RemedyError
from .lock import lock_transform
from .precompile import precompile_transform

__all__ = ["REMEDIES", "RemedyError", "RemedyPlan", "apply_plan", "preview", "revert_file", "sha256"]

REMEDIES = {
    "lock": "one process-wide re-entrant lock around every compiled flex_attention call, "
    "create_block_mask and FX tracing site (fixes concurrent compile and concurrent FX trace)",
    "precompile": "compile every shape before the workers start, then fail on any recompile "
    "(fixes concurrent compile; not concurrent FX trace)",
}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class RemedyPlan:
    remedy: str
    path: Path
    before: bytes
    after: bytes
    findings: list[dict[str, Any]] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)

    @property
    def before_sha(self) -> str:
        return sha256(self.before)

    @property
    def after_sha(self) -> str:
        return sha256(self.after)

    @property
    def changes(self) -> bool:
        return self.before != self.after

    @property
    def diff(self) -> str:
        name = self.path.name
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
            "before_sha": self.before_sha,
            "after_sha": self.after_sha,
            "changes": self.changes,
            "diff": self.diff,
            "findings": self.findings,
            "blocked": self.blocked,
        }


@contextlib.contextmanager
def _file_errors(path: Path) -> Iterator[None]:
    """A file that cannot be read or written is a RemedyError that names it."""
    try:
        yield
    except OSError as exc:
        raise RemedyError(f"{path}: {exc.strerror or exc}; nothing written") from None


def preview(remedy: str, path: Path | str, *, shapes: list[dict[str, Any]] | None = None, source_note: str = "") -> RemedyPlan:
    path = Path(path)
    with _file_errors(path):
        return _preview(remedy, path, shapes, source_note)


def _preview(remedy: str, path: Path, shapes: list[dict[str, Any]] | None, source_note: str) -> RemedyPlan:
    if remedy not in REMEDIES:
        raise RemedyError(f"unknown remedy {remedy!r}; remedies: {', '.join(REMEDIES)}")
    if not path.is_file():
        raise RemedyError(f"{path}: no such file")
    before = path.read_bytes()
    try:
        source = before.decode("utf-8")
        if remedy == "lock":
            after, found, _counts = lock_transform(source)
        else:
            after, found, _counts = precompile_transform(source, path, shapes or [], source_note)
    except UnicodeDecodeError:
        raise RemedyError(f"{path}: not UTF-8 text") from None
    except cst.ParserSyntaxError as exc:
        raise RemedyError(f"{path}:{exc.raw_line}:{exc.raw_column}: does not parse: {exc.message}") from None
    findings = [{"line": f.line, "what": f.what, "handled": f.handled} for f in found.items]
    blocked = [f"{path}:{f.line}: {f.what}" if f.line else f"{path}: {f.what}" for f in found.unhandled]
    if not blocked and after == source and not any("already" in f.what for f in found.items):
        if not _mentions_sleuth(source, remedy):
            blocked.append(f"{path}: nothing for {remedy} to change here (no compiled flex_attention, block mask or tracing site)")
    return RemedyPlan(remedy, path, before, after.encode("utf-8"), findings, blocked)


def _mentions_sleuth(source: str, remedy: str) -> bool:
    return f"sleuth: {remedy} remedy" in source


def _atomic_write(path: Path, data: bytes) -> None:
    mode = path.stat().st_mode if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".sleuth-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def apply_plan(plan: RemedyPlan) -> dict[str, Any]:
    """Write the plan; return the record for the session (path, hashes, diff, bytes)."""
    with _file_errors(plan.path):
        return _apply_plan(plan)


def _apply_plan(plan: RemedyPlan) -> dict[str, Any]:
    if plan.blocked:
        raise RemedyError("not applied: " + "; ".join(plan.blocked))
    now = plan.path.read_bytes()
    if now != plan.before:
        raise RemedyError(f"{plan.path} changed since the preview (sha {plan.before_sha[:12]} → {sha256(now)[:12]}); preview again")
    if not plan.changes:
        return {"path": str(plan.path), "before_sha": plan.before_sha, "after_sha": plan.after_sha, "diff": "", "unchanged": True}
    try:
        compile(plan.after, str(plan.path), "exec")
    except SyntaxError as exc:  # never write a file that does not parse
        raise RemedyError(f"{plan.path}:{exc.lineno}: the remedied file would not parse ({exc.msg}); nothing written") from None
    _atomic_write(plan.path, plan.after)
    return {
        "path": str(plan.path),
        "before_sha": plan.before_sha,
        "after_sha": plan.after_sha,
        "diff": plan.diff,
        "before": plan.before.decode("utf-8"),
        "after": plan.after.decode("utf-8"),
    }


def revert_file(path: Path | str, before: bytes, after_sha: str) -> None:
    path = Path(path)
    with _file_errors(path):
        _revert_file(path, before, after_sha)


def _revert_file(path: Path, before: bytes, after_sha: str) -> None:
    now = path.read_bytes() if path.exists() else b""
    if sha256(now) == sha256(before):
        return
    if sha256(now) != after_sha:
        raise RemedyError(f"{path} changed since the remedy was applied; not reverted (the original is in the session)")
    _atomic_write(path, before)

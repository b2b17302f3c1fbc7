"""The MCP tools that change the user's code and put it back: remedy_preview, remedy_apply,
remedy_revert (the lock and precompile remedies; sessions/remedies/use.py is the use-case the
CLI shares)."""

from __future__ import annotations

from typing import Any

from ...probes.remedies import INSTALLED_FLAG, REMEDIES
from ...sessions import Investigation, RemedyError, TreePlan
from ...sessions.remedies import use
from .answers import Remedy
from .tools import TARGET_SAID, Context, Sleuth, ToolError, hints, rooted, target_of, tool

__all__ = ["MCP_INSTALLED", "TOOLS", "for_mcp"]

MCP_INSTALLED = "into_installed_package=true"  # the MCP tools' word for --into-installed-package


@tool(hints(read_only=True, idempotent=True, open_world=True), Remedy, remedy="lock or precompile",
      path="a file or a code tree (default: the target's code tree)", target=TARGET_SAID)
def remedy_preview(sl: Sleuth, remedy: str, path: str | None = None, target: str = "local",
                   ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
    """The diff a remedy (lock or precompile) would make to a file or a code tree (default:
    the target's code tree), what it found, and whether it can apply as it stands; a file of
    an installed package (site-packages) is said to be one (``installed``): remedy_apply
    writes there only with into_installed_package=true."""
    with sl.open(ctx) as inv:
        try:
            with use.one_line(path):
                plan, where = _plan(sl, inv, remedy, path, target)
        except RemedyError as exc:
            raise ToolError(for_mcp(str(exc))) from None
        answer = {**_plan_json(plan), "path": where, "applicable": not plan.blocked}
        answer["blocked"] = [for_mcp(b) for b in answer["blocked"]]
        for f in answer.get("files") or []:
            f["blocked"] = [for_mcp(b) for b in f["blocked"]]
        plans = getattr(plan, "plans", [plan])
        answer["installed"] = [p.installed.said for p in plans if p.installed is not None]
        return answer


@tool(hints(destructive=True, idempotent=True, open_world=True), Remedy, remedy="lock or precompile",
      path="a file or a code tree (default: the target's code tree)", target=TARGET_SAID,
      hypothesis="the hypothesis the remedy is for",
      into_installed_package="allow changing a file of an installed package (site-packages)")
def remedy_apply(sl: Sleuth, remedy: str, path: str | None = None, target: str = "local", hypothesis: str | None = None,
                 into_installed_package: bool = False,
                 ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
    """Apply a remedy (atomic, recorded, revertible to the exact original bytes); the next
    probe_run of the check that showed the failure verifies it. A file of an installed
    package (site-packages) is changed only with into_installed_package=true."""
    with sl.open(ctx) as inv:
        try:
            with use.one_line(path):
                plan, where = _plan(sl, inv, remedy, path, target)
                if plan.blocked:
                    raise ToolError(f"{remedy} not applied to {where}: " + "; ".join(for_mcp(b) for b in plan.blocked))
                tgt = target_of(sl, target)
                app = use.apply_plan(inv, plan, tgt, hypothesis, into_installed_package=into_installed_package)
        except RemedyError as exc:
            raise ToolError(for_mcp(str(exc))) from None
        records = inv.state.applications[app].files if app is not None else []
        changed = use.installed_changed(records, "remedy_revert")
        said = (f"applied {remedy} (application #{app}); remedy_revert puts the original bytes back"
                if app is not None else f"{remedy} is already applied; nothing changed")
        return {"applied": app is not None, "application": app, "path": where, "diff": plan.diff,
                "said": "; ".join([said, *changed]),
                "installed_packages": [r["installed_package"] for r in records if r.get("installed_package")]}


@tool(hints(destructive=True, open_world=True), Remedy,
      path="the remedied file or code tree (default: the target's code tree)", target=TARGET_SAID)
def remedy_revert(sl: Sleuth, path: str | None = None, target: str = "local", ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
    """Restore the exact original bytes of a remedied file or code tree (recorded)."""
    tgt = target_of(sl, target)
    with sl.open(ctx) as inv:
        try:
            with use.one_line(path):
                where = rooted(sl, tgt, use.remedy_path(sl.ws, tgt, path))
                app = use.revert_at(inv, tgt, where)
        except RemedyError as exc:
            raise ToolError(for_mcp(str(exc))) from None
        records = inv.state.applications[app].files
        answer: dict[str, Any] = {"reverted": app, "path": where, "files": len(records)}
        restored = use.installed_restored(records)
        if restored:
            answer["said"] = "; ".join(restored)
        return answer


def _plan(sl: Sleuth, inv: Investigation, remedy: str, path: str | None, target: str) -> tuple[Any, str]:
    if remedy not in REMEDIES:
        raise ToolError(f"unknown remedy {remedy!r}; remedies: {', '.join(sorted(REMEDIES))}")
    config = sl.config()
    tgt = target_of(sl, target)
    where = rooted(sl, tgt, use.remedy_path(sl.ws, tgt, path))
    return use.plan_at(inv, remedy, tgt, where, config), where


def _plan_json(plan: Any) -> dict[str, Any]:
    if isinstance(plan, TreePlan):
        return {"remedy": plan.remedy, "files": [p.to_dict() for p in plan.plans], "skipped": plan.skipped,
                "blocked": plan.blocked, "diff": plan.diff}
    return plan.to_dict()


def for_mcp(text: str) -> str:
    """A sentence of the CLI's as the MCP tools say it (their argument, not the CLI's flag)."""
    return text.replace(INSTALLED_FLAG, MCP_INSTALLED)


TOOLS = [remedy_preview, remedy_apply, remedy_revert]

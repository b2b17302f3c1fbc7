"""`sleuth remedy …`: preview, apply and revert the lock and precompile remedies.

Bad input — a path that is not there, not Python, not a name a file can have — is one line
and exit status 2, never a traceback (the MCP tools answer the same line). A file of an
installed package (site-packages, dist-packages, a standard library) is said to be one in
the preview and is written only with ``--into-installed-package``; the apply then says that
an installed package was changed and how to put it back.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..probes import Config, Target, load_config
from ..probes.remedies import INSTALLED_FLAG, REMEDIES, RemedyPlan
from ..sessions import RemedyError, TreePlan, Workspace
from ..sessions.remedies.use import (
    apply_plan,
    installed_changed,
    installed_restored,
    one_line,
    plan_at,
    remedy_path,
    revert_at,
)
from .errors import UsageError

__all__ = ["MCP_INSTALLED", "cmd_apply", "cmd_list", "cmd_preview", "cmd_revert", "for_mcp"]

MCP_INSTALLED = "into_installed_package=true"  # the MCP tools' word for --into-installed-package


def for_mcp(text: str) -> str:
    """A sentence of the CLI's as the MCP tools say it (their argument, not the CLI's flag)."""
    return text.replace(INSTALLED_FLAG, MCP_INSTALLED)


def _installed_sentences(plans: list[RemedyPlan]) -> list[str]:
    return [p.installed.said for p in plans if p.installed is not None]


def _shapes(args: argparse.Namespace) -> list | None:
    if not getattr(args, "shapes", None):
        return None
    try:
        return json.loads(Path(args.shapes).read_text())
    except (OSError, ValueError) as exc:
        raise RemedyError(f"--shapes {args.shapes}: {exc}") from None


def cmd_list(args: argparse.Namespace) -> int:
    catalog = Workspace.find().catalog()
    for name, remedy in REMEDIES.items():
        hyps = [h.id for h in catalog.hypotheses.values() if name in h.remedies]
        print(f"{name:<11} {remedy.summary}\n{'':<11} addresses: {', '.join(hyps)}")
    print(f"{'upgrade':<11} a known issue's fixed release in an overlay at the target, your environment untouched: "
          "sleuth upgrade ISSUE (sleuth known)\n"
          f"{'':<11} addresses: what each known issue explains")
    return 0


def _show(plan: RemedyPlan | TreePlan, as_json: bool) -> None:
    plans = plan.plans if isinstance(plan, TreePlan) else [plan]
    if as_json:
        if isinstance(plan, TreePlan):
            print(json.dumps({"remedy": plan.remedy, "root": str(plan.root), "files": [p.to_dict() for p in plans],
                              "skipped": plan.skipped, "blocked": plan.blocked, "diff": plan.diff}, indent=2))
        else:
            print(json.dumps(plan.to_dict(), indent=2))
        return
    for p in plans:
        if isinstance(plan, TreePlan):
            print(plan.relative(p))
        for f in p.findings:
            mark = "✗ " if not f["handled"] else "○ left unlocked — " if f.get("left_unlocked") else "  "
            where = f"line {f['line']}: " if f["line"] else ""
            print(f"{'  ' if isinstance(plan, TreePlan) else ''}{mark}{where}{f['what']}")
    for skipped in getattr(plan, "skipped", []):
        print(f"  (not read: {skipped})")
    installed = _installed_sentences(plans)
    if installed:
        print()
        for said in installed:
            print(f"! {said}")
    if plan.blocked:
        nothing = not isinstance(plan, TreePlan) and plan.nothing
        print("\nNOT APPLICABLE:" if nothing else "\nNOT APPLICABLE as it stands — sleuth will not write a half-fixed file:")
        for b in plan.blocked:
            print(f"  {b}")
    elif not plan.changes:
        where = plan.root if isinstance(plan, TreePlan) else plan.path
        print(f"\n{where}: {plan.remedy} is already applied; nothing to change")
    else:
        print()
        print(plan.diff, end="")
        if installed:
            where = plan.root if isinstance(plan, TreePlan) else plan.path
            print(f"\nsleuth applies this to an installed package only when asked: sleuth remedy apply {plan.remedy} {where} "
                  f"{INSTALLED_FLAG}")


def _known_remedy(name: str) -> None:
    if name not in REMEDIES:
        raise UsageError(f"unknown remedy {name!r}; remedies: {', '.join(sorted(REMEDIES))} (sleuth remedy list)")


def _asked(args: argparse.Namespace) -> tuple[Workspace, Config, Target, str]:
    """What a remedy command names: the workspace, its config, the target, the path (default:
    the target's code tree)."""
    _known_remedy(args.name)
    ws = Workspace.find()
    config = load_config(ws.config_path)
    target = config.target(args.target)
    return ws, config, target, remedy_path(ws, target, args.path)


def cmd_preview(args: argparse.Namespace) -> int:
    ws, config, target, path = _asked(args)
    with ws.open(args.session) as inv, one_line(path):
        plan = plan_at(inv, args.name, target, path, config, _shapes(args))
        _show(plan, args.json)
    return 2 if plan.blocked else 0


def cmd_apply(args: argparse.Namespace) -> int:
    ws, config, target, path = _asked(args)
    into = bool(getattr(args, "into_installed_package", False))
    with ws.open(args.session) as inv, one_line(path):
        plan = plan_at(inv, args.name, target, path, config, _shapes(args))
        if plan.blocked:
            _show(plan, False)
            raise RemedyError(f"{args.name} not applied to {path}")
        app = apply_plan(inv, plan, target, args.hypothesis, into_installed_package=into)
        names = ", ".join(plan.relative(p) for p in plan.plans if p.changes) if isinstance(plan, TreePlan) else path
        revert_with = f"sleuth remedy revert {path}" + (f" --target {target.name}" if not target.is_local else "")
        if app is None:
            print(f"{path}: {args.name} is already applied; nothing changed")
        else:
            print(plan.diff, end="")
            print(f"\napplied {args.name} to {names} (application #{app}); revert with: {revert_with}")
            for said in installed_changed(inv.state.applications[app].files, revert_with):
                print(f"! {said}")
        plans = plan.plans if isinstance(plan, TreePlan) else [plan]
        for p in plans:
            for f in p.findings:
                if f.get("left_unlocked"):
                    print(f"left unlocked: {p.path}:{f['line']}: {f['what']}")
    return 0


def cmd_revert(args: argparse.Namespace) -> int:
    ws = Workspace.find()
    target = load_config(ws.config_path).target(args.target)
    path = remedy_path(ws, target, args.path)
    with ws.open(args.session) as inv, one_line(path):
        app = revert_at(inv, target, path)
        records = inv.state.applications[app].files
        files = len(records)
        print(f"reverted application #{app} on {path}: the original bytes of its {files} file{'s' * (files != 1)} are back")
        for said in installed_restored(records):
            print(said)
    return 0

"""`sleuth remedy …`: preview, apply and revert the lock and precompile remedies."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..probes import Config, Target, load_config
from ..probes.remedies import REMEDIES, RemedyPlan
from ..sessions import (
    RemedyError,
    TreePlan,
    Workspace,
    apply_remedy,
    apply_tree,
    plan_remedy,
    plan_tree,
    revert_remedy,
    revert_tree,
)
from .errors import UsageError

__all__ = ["cmd_apply", "cmd_list", "cmd_preview", "cmd_revert"]


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
    if plan.blocked:
        print("\nNOT APPLICABLE as it stands — sleuth will not write a half-fixed file:")
        for b in plan.blocked:
            print(f"  {b}")
    elif not plan.changes:
        where = plan.root if isinstance(plan, TreePlan) else plan.path
        print(f"\n{where}: {plan.remedy} is already applied; nothing to change")
    else:
        print()
        print(plan.diff, end="")


def _where(ws: Workspace, target: Target, path: str | None) -> str:
    """PATH as given, or the target's code tree (code.local, or code.remote on a target)."""
    if path:
        return path
    code = target.code_local if target.is_local else (target.code_remote or target.workdir)
    if not code:
        raise UsageError(f"give a PATH: target {target.name} has no code tree (code = {{ local = … }} in sleuth.toml)")
    return code


def _is_tree(target: Target, path: str) -> bool:
    """A folder: here, asked of the disk; on a target, any PATH that is not a .py file."""
    return Path(path).is_dir() if target.is_local else not path.endswith(".py")


def _plan(inv, args: argparse.Namespace, target: Target, path: str, config: Config):
    # shapes: --shapes FILE, else [remedies.precompile] shapes in sleuth.toml, else the last fx-trace-state run
    shapes = _shapes(args)
    if shapes is None:
        shapes = config.remedy_params.get(args.name, {}).get("shapes")
    if _is_tree(target, path):
        return plan_tree(inv, args.name, path, target, shapes)
    return plan_remedy(inv, args.name, path, target, shapes)


def _known_remedy(name: str) -> None:
    if name not in REMEDIES:
        raise UsageError(f"unknown remedy {name!r}; remedies: {', '.join(sorted(REMEDIES))} (sleuth remedy list)")


def cmd_preview(args: argparse.Namespace) -> int:
    _known_remedy(args.name)
    ws = Workspace.find()
    config = load_config(ws.config_path)
    target = config.target(args.target)
    path = _where(ws, target, args.path)
    with ws.open(args.session) as inv:
        plan = _plan(inv, args, target, path, config)
        _show(plan, args.json)
    return 2 if plan.blocked else 0


def cmd_apply(args: argparse.Namespace) -> int:
    _known_remedy(args.name)
    ws = Workspace.find()
    config = load_config(ws.config_path)
    target = config.target(args.target)
    path = _where(ws, target, args.path)
    with ws.open(args.session) as inv:
        plan = _plan(inv, args, target, path, config)
        if plan.blocked:
            _show(plan, False)
            raise RemedyError(f"{args.name} not applied to {path}")
        if isinstance(plan, TreePlan):
            app = apply_tree(inv, plan, target, args.hypothesis)
            names = ", ".join(plan.relative(p) for p in plan.plans if p.changes)
        else:
            app = apply_remedy(inv, plan, target, args.hypothesis)
            names = path
        if app is None:
            print(f"{path}: {args.name} is already applied; nothing changed")
        else:
            print(plan.diff, end="")
            print(f"\napplied {args.name} to {names} (application #{app}); revert with: sleuth remedy revert {path}")
        plans = plan.plans if isinstance(plan, TreePlan) else [plan]
        for p in plans:
            for f in p.findings:
                if f.get("left_unlocked"):
                    print(f"left unlocked: {p.path}:{f['line']}: {f['what']}")
    return 0


def cmd_revert(args: argparse.Namespace) -> int:
    ws = Workspace.find()
    target = load_config(ws.config_path).target(args.target)
    path = _where(ws, target, args.path)
    with ws.open(args.session) as inv:
        if _is_tree(target, path):
            app = revert_tree(inv, path, target)
        else:
            app = revert_remedy(inv, path, target)
        files = len(inv.state.applications[app].files)
        print(f"reverted application #{app} on {path}: the original bytes of its {files} file{'s' * (files != 1)} are back")
    return 0

"""`sleuth remedy …`: preview, apply and revert the lock and precompile remedies."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from sleuth.probes import load_config
from sleuth.probes.remedies import REMEDIES
from sleuth.sessions import (
    RemedyError,
    Workspace,
    apply_remedy,
    plan_remedy,
    revert_remedy,
)

__all__ = ["add_remedy_commands"]


def _shapes(args: argparse.Namespace) -> list | None:
    if not getattr(args, "shapes", None):
        return None
    try:
        return json.loads(Path(args.shapes).read_text())
    except (OSError, ValueError) as exc:
        raise RemedyError(f"--shapes {args.shapes}: {exc}") from None


def cmd_list(args: argparse.Namespace) -> int:
    catalog = Workspace(".").catalog()
    for name, remedy in REMEDIES.items():
        hyps = [h.id for h in catalog.hypotheses.values() if name in h.remedies]
        print(f"{name:<11} {remedy.summary}\n{'':<11} addresses: {', '.join(hyps)}")
    return 0


def _show(plan, as_json: bool) -> None:
    if as_json:
        print(json.dumps(plan.to_dict(), indent=2))
        return
    for f in plan.findings:
        mark = "  " if f["handled"] else "✗ "
        where = f"line {f['line']}: " if f["line"] else ""
        print(f"{mark}{where}{f['what']}")
    if plan.blocked:
        print("\nNOT APPLICABLE as it stands — sleuth will not write a half-fixed file:")
        for b in plan.blocked:
            print(f"  {b}")
    elif not plan.changes:
        print(f"\n{plan.path}: {plan.remedy} is already applied; nothing to change")
    else:
        print()
        print(plan.diff, end="")


def cmd_preview(args: argparse.Namespace) -> int:
    ws = Workspace(".")
    target = load_config(ws.config_path).target(args.target)
    with ws.open(args.session) as inv:
        plan = plan_remedy(inv, args.name, args.path, target, _shapes(args))
        _show(plan, args.json)
    return 2 if plan.blocked else 0


def cmd_apply(args: argparse.Namespace) -> int:
    ws = Workspace(".")
    target = load_config(ws.config_path).target(args.target)
    with ws.open(args.session) as inv:
        plan = plan_remedy(inv, args.name, args.path, target, _shapes(args))
        if plan.blocked:
            _show(plan, False)
            raise RemedyError(f"{args.name} not applied to {args.path}")
        app = apply_remedy(inv, plan, target, args.hypothesis)
        if app is None:
            print(f"{args.path}: {args.name} is already applied; nothing changed")
        else:
            print(plan.diff, end="")
            print(f"\napplied {args.name} to {args.path} (application #{app}); revert with: sleuth remedy revert {args.path}")
    return 0


def cmd_revert(args: argparse.Namespace) -> int:
    ws = Workspace(".")
    target = load_config(ws.config_path).target(args.target)
    with ws.open(args.session) as inv:
        app = revert_remedy(inv, args.path, target)
        print(f"reverted application #{app} on {args.path}: the original bytes are back")
    return 0


def add_remedy_commands(sub: Any, add: Any) -> None:
    remedy = sub.add_parser("remedy", help="preview, apply and revert code remedies", description="preview, apply and revert code remedies")
    rsub = remedy.add_subparsers(dest="action", metavar="ACTION")
    rsub.required = True
    add("list", cmd_list, "the remedies and the hypotheses they address", rsub)
    for name, func, words in (("preview", cmd_preview, "show the diff a remedy would make"), ("apply", cmd_apply, "apply a remedy to a file (atomic, recorded)")):
        p = add(name, func, words, rsub)
        p.add_argument("name", choices=sorted(REMEDIES))
        p.add_argument("path")
        p.add_argument("--target", default="local")
        p.add_argument("--shapes", metavar="JSON", help="precompile: shapes file (default: the latest fx-trace-state run)")
        if name == "preview":
            p.add_argument("--json", action="store_true")
        else:
            p.add_argument("--hypothesis", help="the hypothesis it addresses (default: the remedy's own)")
    p = add("revert", cmd_revert, "restore the exact original bytes of a remedied file", rsub)
    p.add_argument("path")
    p.add_argument("--target", default="local", help="a remote target: PATH is on it (relative to its code.remote)")

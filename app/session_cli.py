"""The commands on the investigation itself: init, new, status, hypotheses, symptoms, links,
notes and the baseline (the parser is app/cli.py's).

The other session commands live beside it: screen_cli.py (the UI, replay), log_cli.py
(events, output), exchange_cli.py (export, import)."""

from __future__ import annotations

import argparse
from typing import Any

from ..hypotheses import STATUS_GLYPHS
from ..probes import TEMPLATE, load_config
from ..sessions import Workspace
from .errors import UsageError
from .session_args import open_investigation, print_json, run_id

__all__ = [
    "GLYPHS",
    "cmd_baseline",
    "cmd_hypotheses",
    "cmd_hypothesis_add",
    "cmd_hypothesis_remove",
    "cmd_init",
    "cmd_link",
    "cmd_new",
    "cmd_note",
    "cmd_status",
    "cmd_symptom_add",
    "cmd_symptom_list",
    "cmd_symptom_remove",
]

GLYPHS = STATUS_GLYPHS


def cmd_init(args: argparse.Namespace) -> int:
    ws = Workspace(args.dir)
    if ws.root.exists() and not ws.root.is_dir():
        raise UsageError(f"{ws.root}: is not a directory")
    if ws.dir.exists() and not ws.dir.is_dir():  # before anything is written
        raise UsageError(f"{ws.dir}: is a file; sleuth keeps its investigations in a folder of that name "
                         "(move the file away)")
    ws.root.mkdir(parents=True, exist_ok=True)
    ws.user_hypotheses.mkdir(parents=True, exist_ok=True)
    if ws.config_path.exists() and not args.force:
        load_config(ws.config_path)  # still tell the user if the existing one is broken
        print(f"{ws.config_path} exists; kept as it is")
    else:
        ws.config_path.write_text(TEMPLATE, encoding="utf-8")
        print(f"wrote {ws.config_path}")
    if ws.current_path() is None or args.title:
        inv = ws.create(args.title or ws.root.name)
        print(f"started investigation {inv.path}")
        inv.close()
    else:
        print(f"current investigation: {ws.current_path()}")
    print(f"your own hypotheses go in {ws.user_hypotheses}/*.toml (schema: docs/catalog.md)")
    return 0


def cmd_new(args: argparse.Namespace) -> int:
    ws = Workspace.find()
    inv = ws.create(args.title)
    print(f"started investigation {inv.path}")
    inv.close()
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    with open_investigation(args, create=False) as inv:
        st = inv.state
        print(f"{inv.path}: {st.title}")
        print(f"  {inv.store.event_count()} events, {len(st.runs)} runs, {len(st.flags)} flags")
        for h in st.hypotheses:
            print(f"  {GLYPHS[st.status(h)]} {h:<22} {st.status(h)}")
    return 0


def cmd_hypotheses(args: argparse.Namespace) -> int:
    with open_investigation(args) as inv:
        tree = inv.hypotheses_json()
        if args.json:
            print_json(tree)
            return 0

        def show(node: dict[str, Any], depth: int) -> None:
            ev = node["evidence"]
            links = " ".join(f"{link['kind']} {link['to']}" for link in node["links"] if link["kind"] != "refines")
            print(
                f"{'  ' * depth}{GLYPHS[node['status']]} {node['id']:<{24 - 2 * depth}} {node['status']:<12} "
                f"{ev['supports']}▲ {ev['refutes']}▼ {ev['inconclusive']}?  "
                f"probes: {', '.join(node['probes']) or '-'}  remedies: {', '.join(node['remedies']) or '-'}"
                + (f"  ({links})" if links else "")
            )
            for child in node["refinements"]:
                show(child, depth + 1)

        for node in tree:
            show(node, 0)
    return 0


def cmd_hypothesis_add(args: argparse.Namespace) -> int:
    links = [("refines", h) for h in args.refines] + [("competes", h) for h in args.competes]
    links += [("exposes", h) for h in args.exposes]
    with open_investigation(args) as inv:
        inv.add_hypothesis(args.id, args.title or args.id, args.claim or "", args.explains, links)
        print(f"added hypothesis {args.id} to {inv.path}")
    return 0


def cmd_hypothesis_remove(args: argparse.Namespace) -> int:
    with open_investigation(args) as inv:
        inv.remove_hypothesis(args.id)
        print(f"removed hypothesis {args.id} (recorded: replay shows it up to here)")
    return 0


def cmd_symptom_list(args: argparse.Namespace) -> int:
    with open_investigation(args) as inv:
        st = inv.state
        if args.json:
            print_json([{"id": s.id, "title": s.title, "text": s.text} for s in st.symptoms.values()])
            return 0
        if not st.symptoms:
            print("no symptoms yet: sleuth symptom add ID")
        for sym in st.symptoms.values():
            explained = [h for h, hyp in st.hypotheses.items() if sym.id in hyp.explains]
            print(f"{sym.id:<24} {sym.title}" + (f"  (explained by {', '.join(explained)})" if explained else ""))
    return 0


def cmd_symptom_remove(args: argparse.Namespace) -> int:
    with open_investigation(args) as inv:
        inv.remove_symptom(args.id)
        print(f"removed symptom {args.id} (recorded: replay shows it up to here)")
    return 0


def cmd_symptom_add(args: argparse.Namespace) -> int:
    with open_investigation(args) as inv:
        inv.add_symptom(args.id, args.title or "", args.text or "")
        print(f"added symptom {args.id}")
    return 0


def cmd_link(args: argparse.Namespace) -> int:
    with open_investigation(args) as inv:
        inv.link(args.src, args.kind, args.dst)
        print(f"linked {args.src} {args.kind} {args.dst}")
    return 0


def cmd_note(args: argparse.Namespace) -> int:
    with open_investigation(args) as inv:
        inv.add_note(" ".join(args.text), args.about)
        print("noted")
    return 0


def cmd_baseline(args: argparse.Namespace) -> int:
    with open_investigation(args) as inv:
        inv.mark_baseline(run_id(args.run))
        print(f"run #{run_id(args.run)} is the baseline of its target")
    return 0

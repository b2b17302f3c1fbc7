"""`sleuth known`: the known upstream issues that apply to a target's measured versions
(hypotheses/known.py holds the entries; the versions are read from the target now)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from ..hypotheses.known import applying, load_known, version_of
from ..probes import load_config
from ..sessions import Workspace, measure_state

__all__ = ["cmd_known"]


def cmd_known(args: argparse.Namespace) -> int:
    ws = Workspace.find()
    entries = load_known([ws.dir / "known"])  # a malformed entry: CatalogError, exit 2 with file:line
    if args.all:
        rows = [e.to_dict() for e in entries.values()]
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            for e in entries.values():
                print(f"{e.id:<22} {e.package} {e.affected}  {e.title}")
        return 0
    target = load_config(ws.config_path).target(args.target)
    measured = asyncio.run(measure_state(target))
    if measured.state is None:  # a transport fault or a broken interpreter: said, never a guess
        print(f"sleuth: {measured.unknown}", file=sys.stderr)
        return 1
    versions = (measured.state.get("env") or {}).get("distributions") or {}
    found = applying(entries, versions)
    rows = []
    for e in found:
        version = version_of(versions, e.package)
        rows.append({**e.to_dict(), "target": target.name, "measured": version})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no known upstream issue applies to what {target.name} has now ({len(versions)} distributions read)")
    for r in rows:
        fixed = f"fixed in {r['fixed_in']}" if r["fixed_in"] else f"no fixed-in release known (open as of {r['checked']})"
        print(f"{r['id']}  {r['title']}")
        print(f"  {target.name}: {r['package']} {r['measured']} is in {r['affected']}; {fixed}")
        print(f"  {r['source']}")
    return 0

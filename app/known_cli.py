"""`sleuth known`: the known upstream issues that apply to a target's measured versions
(hypotheses/known.py holds the entries; the versions are read from the target now)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from ..hypotheses.known import load_known, version_of
from ..hypotheses.stored import Overlay
from ..probes import load_config
from ..sessions import Workspace, measure_state
from ..sessions.known_issues import known_rows
from .errors import UsageError

__all__ = ["cmd_known", "cmd_upgrade"]


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
    rows = known_rows(ws, entries, target.name, versions)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no known upstream issue applies to what {target.name} has now ({len(versions)} distributions read)")
    for r in rows:
        fixed = f"fixed in {r['fixed_in']}" if r["fixed_in"] else f"no fixed-in release known (checked {r['checked']})"
        print(f"{r['id']}  {r['title']}")
        print(f"  {target.name}: {r['package']} {r['measured']} is in {r['affected']}; {fixed}")
        for said in r["measured_here"]:
            print(f"  {said}")
        for claim in r.get("read") or []:
            print(f"  · {claim['claim']} — read in {claim['source']}, {claim['on']}")
        if r.get("rule"):
            print(f"  said of a run when {r['probe']} finds {r['rule']}")
        elif r["signature"]:
            print(f"  said of a run whose output shows: {' or '.join(r['signature'])}")
        print(f"  {r['source']}")
    return 0


def _verifier(inv, args: argparse.Namespace, target, entry_id: str):
    """The run request that verifies the upgrade: --probe / --script, else the check of the
    latest run on the target that showed the issue, with its parameters."""
    from ..probes import builtin_probes
    from ..sessions import CheckAsk, request_for_check, request_for_probe, resolve_check, verify_params
    from .probe_cli import _params

    config = load_config(Workspace.find().config_path)
    if args.probe or args.script:  # the check given, resolved as `probe run` resolves it
        ask = CheckAsk(probe=args.probe, script=args.script, target=target.name, params=_params(args.param))
        resolved = resolve_check(ask, config, root=Path.cwd(), name=lambda arg: f"--{arg}")
        return request_for_check(inv, resolved, config)
    showed = [m for m in inv.state.known_matches if m.id == entry_id and m.target == target.name]
    if not showed:
        raise UsageError(f"no run on {target.name} has shown {entry_id} yet: give the check to verify with "
                         "(--probe ID or --script FILE), or --no-verify to make the overlay only")
    run = inv.state.runs[showed[-1].run]
    probes = builtin_probes()
    if run.probe not in probes:
        raise UsageError(f"#{run.id}, the latest run that showed {entry_id}, ran {run.probe}: give it again to verify "
                         "with (--script FILE), or --probe ID")
    params = {k: v for k, v in run.params.items() if k != "baseline_run"}
    # a race: enough trials that a clean result would be strong, given how often it failed before
    params.update(verify_params(inv.state, run))
    params.update(_params(args.param))
    return request_for_probe(inv, probes[run.probe], target, params)


def cmd_upgrade(args: argparse.Namespace) -> int:
    from ..probes.broker import BrokerClient
    from ..sessions import run_probe
    from ..sessions.overlay import describe_contents, describe_plan, remove_upgrade, try_upgrade
    from .timeline import run_findings
    from .views import verified_by

    ws = Workspace.find()
    entries = ws.known()
    entry = entries.get(args.issue)
    if entry is None:
        raise UsageError(f"unknown known issue {args.issue!r}; known issues: {', '.join(entries)} (sleuth known --all)")
    target = load_config(ws.config_path).target(args.target)
    with ws.open(args.session) as inv:
        if args.revert:
            async def revert() -> int:
                agents = BrokerClient(ws.dir)
                try:
                    return await remove_upgrade(inv, target, entry.id, runner=agents)
                finally:
                    await agents.close()

            app = inv.state.applications[asyncio.run(revert())]
            assert app.upgrade is not None
            still = [a for a in inv.state.applications.values() if a.active and a.target == target.name and a.upgrade
                     and a.upgrade.package == entry.package]
            other = still[-1].upgrade if still else None
            where = (f"upgrade #{still[-1].id} ({other.issue}, {entry.package}=={other.version}) is still "
                     f"active there: runs import {entry.package} from its overlay" if other
                     else f"runs there import {entry.package} from the environment again")
            held = describe_contents(app.upgrade, short=True)
            print(f"reverted upgrade #{app.id}: the overlay {app.upgrade.path} on {target.name} is removed"
                  + (f" ({held})" if held else "") + f"; {where} (the environment was never written)")
            return 0
        request = None if args.no_verify else _verifier(inv, args, target, entry.id)

        async def go():
            agents = BrokerClient(ws.dir)
            try:
                def planned(plan: dict) -> None:
                    if not args.json and not plan.get("failed"):  # a failed dry run: the install says why
                        print(f"before the install: {describe_plan(plan, entry.package)}", file=sys.stderr, flush=True)

                made = await try_upgrade(inv, target, entry, version=args.version, no_deps=args.no_deps,
                                         index_url=args.index_url, find_links=args.find_links, no_index=args.no_index,
                                         runner=agents, on_plan=planned)
                report = None
                if made.application is not None and request is not None:
                    report = await run_probe(inv, target, request, force=True, runner=agents)
                return made, report
            finally:
                await agents.close()

        made, report = asyncio.run(go())
        out: dict = {"issue": entry.id, "target": target.name, "install": {
            "run": made.run, "classification": made.classification, "reason": made.reason,
            "application": made.application, "overlay": made.overlay, "installed_before": made.installed_before}}
        if made.application is None:
            if args.json:
                print(json.dumps(out, indent=2))
            print(f"sleuth: {made.classification}: {made.reason}; nothing was applied (the install's output: "
                  f"sleuth output {made.run})", file=sys.stderr)
            return 1
        app = inv.state.applications[made.application]
        assert made.overlay is not None
        lines = [f"#{made.run} upgrade on {target.name}: {made.reason} (application #{app.id}; {entry.package} in "
                 f"the environment: {made.installed_before or 'not installed'}, untouched)"]
        held = describe_contents(Overlay.from_dict(made.overlay))
        if held:
            lines.append(f"  {held}")
        if report is not None:
            data = report.to_json(inv)
            data["findings"] = run_findings(inv.state, report.run)
            imported = version_of(((inv.state.runs[report.run].state or {}).get("env") or {}).get("distributions") or {},
                                  entry.package)
            lines.append(f"#{report.run} {data['probe']} under the overlay: {data['classification']} — "
                         f"{entry.package} {imported or '(none)'} imported")
            lines += [f"  {e['verdict']} {e['hypothesis']}" for e in data["evidence"]]
            lines += [f"  ⓚ {f['text']}" if f["kind"] == "known" else f"  ⚑ {f['kind']}: {f['text']}"
                      for f in data["findings"]]
            said = verified_by(inv.state, report.run)
            lines += [f"  ✔ {s}" for s in said] or [f"  no verification: #{report.run} did not ask what showed "
                                                   f"{entry.id} before (see the notes: sleuth events)"]
            if held:
                lines.append(f"  (judged under that whole overlay: {describe_contents(Overlay.from_dict(made.overlay), short=True)})")
            out["verification"] = {**data, "verified": [v.to_dict() for v in app.verified if v.run == report.run]}
        lines.append(f"revert: sleuth upgrade --revert {entry.id} --target {target.name} (removes the overlay)")
        if args.json:
            print(json.dumps(out, indent=2, default=str))
        else:
            print("\n".join(lines))
        return 0

"""`sleuth demo [DIR] [--auto]`: the whole investigation on the bundled example drafter,
on this machine, with no server: reproduce the race, check the environment against a
baseline, look at the caches, repeat a check with nothing changed (sleuth flags it),
apply the lock, verify, and write the postmortem."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
import time
from pathlib import Path

from sleuth.probes import AgentPool, builtin_probes, load_config
from sleuth.sessions import (
    CircularRetest,
    Workspace,
    apply_remedy,
    plan_remedy,
    request_for_probe,
    run_probe,
    run_to_verify,
    verify_params,
    write_postmortem,
)

from .errors import UsageError

__all__ = ["cmd_demo", "add_demo_command"]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "drafter"
CONFIG = """\
# sleuth.toml for the demo: the local target, with the example drafter as its code.
[targets.local]
code = { local = "drafter" }

# The reproduction: the drafter's own entry point, short, one cold-cache trial.
[probes.compile-race]
entry = "drafter/train.py"
trials = 1
args = ["--steps", "6"]
"""


HINT = (
    "Guided demo — ↑/↓ move in the tree.  1) On ▷ compile-race press r: the drafter races (about a minute).  "
    "2) On ▷ env-fingerprint press r, then b to make it the baseline, then r again: no drift.  "
    "3) r once more with nothing changed: sleuth asks before a circular retest.  "
    "4) On ✚ lock press f, a to apply, y to re-run the reproduction.  5) e writes postmortem.md; q quits."
)


def _say(step: int, text: str) -> None:
    print(f"\n[{step}] {text}", flush=True)


MARKER = ".sleuth-demo.json"  # what the demo wrote here: {relative path: sha256}


def _demo_files() -> dict[str, bytes]:
    files = {f"drafter/{p.name}": p.read_bytes() for p in sorted(EXAMPLE.glob("*.py"))}
    files["sleuth.toml"] = CONFIG.encode()
    return files


def setup(directory: Path, force: bool = False) -> Workspace:
    """Write the demo into *directory*. Never over a file sleuth did not write (or that changed
    since it did: the lock applied, your edit); a non-empty directory that is not an earlier
    demo only with *force*, and then beside what is there."""
    if not EXAMPLE.is_dir():
        raise UsageError(f"the example drafter is not at {EXAMPLE}: this sleuth installation is incomplete; reinstall it")
    files = _demo_files()
    marker = directory / MARKER
    wrote: dict[str, str] = json.loads(marker.read_text()) if marker.is_file() else {}
    conflicts = [rel for rel in files if (directory / rel).exists()
                 and hashlib.sha256((directory / rel).read_bytes()).hexdigest() != wrote.get(rel)]
    if conflicts:
        raise UsageError(
            f"{directory}: {', '.join(conflicts)} {'is' if len(conflicts) == 1 else 'are'} not as the demo wrote "
            f"{'it' if len(conflicts) == 1 else 'them'} (yours, or changed since — the lock the demo applied, an edit); "
            "sleuth demo never overwrites them: give it another directory"
        )
    present = sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
    others = [n for n in present if n not in (".sleuth", MARKER, "drafter", "sleuth.toml", "postmortem.md", "postmortem-output")]
    if others and not wrote and not force:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise UsageError(f"{directory} is not empty ({shown}) and not an earlier demo: give an empty or new directory, "
                         "or --force to put the demo beside what is there")
    for rel, data in files.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    marker.write_text(json.dumps({rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}, indent=1))
    return Workspace(directory)


def cmd_demo(args: argparse.Namespace) -> int:
    directory = Path(args.dir).resolve()
    ws = setup(directory, force=args.force)
    inv = ws.create("drafter race demo")
    inv.add_symptom("fx-trace-error")
    print(f"demo in {directory}: the example drafter is in drafter/, the investigation in {inv.path.name}")
    if not args.auto:
        inv.close()
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            print(
                "\nNot at a terminal, so the UI is not opened. Open it with\n"
                f"  cd {directory} && sleuth\nor run the whole investigation headless with\n  sleuth demo --auto {args.dir}"
            )
            return 0
        from .tui import SleuthApp

        os.chdir(directory)  # the probes' entry paths are relative to the demo directory
        SleuthApp.live(Workspace(directory), hint=HINT).run()
        return 0
    started = time.monotonic()
    config = load_config(ws.config_path)
    target = config.target("local")
    probes = builtin_probes()

    os.chdir(directory)  # the probes' entry paths are relative to the demo directory

    async def run(probe: str, params: dict, flagged: CircularRetest | None = None):
        req = request_for_probe(inv, probes[probe], target, config.params_for(probe, params))
        check = flagged.check if flagged is not None else None  # run what was asked about, without a second read
        report = await run_probe(inv, target, req, force=flagged is not None, agents=agents, check=check)
        data = report.to_json(inv)
        verdicts = [f"{e['verdict']} {e['hypothesis']}" for e in data["evidence"]]
        verdicts += [
            (f"verifies the {app.remedy} fixed {v['hypothesis']}" if v["outcome"] == "fixed" else f"the {app.remedy} did not fix {v['hypothesis']}")
            + (f" ({v['strength']})" if v.get("strength") else "")
            for app in inv.state.applications.values()
            for v in app.verifications
            if v["run"] == report.run
        ]
        verdicts = ", ".join(verdicts) or "no evidence"
        print(f"    run #{data['run_id']} {probe}: {data['classification']} in {data['seconds']:.1f} s — {verdicts}")
        return report

    agents = AgentPool(warm=("torch",))  # one resident agent runs every probe of the demo

    async def hunt() -> None:
        try:
            await steps()
        finally:
            await agents.close()

    async def steps() -> None:
        _say(1, "Reproduce: the drafter with 4 threads and cold caches, and a single-thread control")
        await run("compile-race", {})
        _say(2, "Version drift? Fingerprint the environment, mark it as the baseline, check against it")
        first = await run("env-fingerprint", {})
        inv.mark_baseline(first.run)
        await run("env-fingerprint", {})
        _say(3, "Cache invalidation? Look at the compile caches")
        await run("cache-inventory", {})
        _say(4, "Check the environment again, with nothing changed")
        try:
            await run("env-fingerprint", {})
        except CircularRetest as flag:
            print(f"    ⟲ sleuth: circular retest — {flag}")
            print("    (running it anyway, so the postmortem can show what it cost)")
            await run("env-fingerprint", {}, flagged=flag)
        _say(5, "Apply the lock remedy to drafter/model.py")
        plan = plan_remedy(inv, "lock", directory / "drafter" / "model.py", "local")
        for f in plan.findings:
            print(f"    line {f['line']}: {f['what']}")
        app = apply_remedy(inv, plan, "local", "compile-race")
        print(f"    applied (application #{app}); {plan.diff.count(chr(10) + '+') } lines added")
        reproduction = run_to_verify(inv.state, "local", "lock")
        extra = verify_params(inv.state, reproduction) if reproduction else {}
        trials = extra.get("trials", 1)
        _say(6, f"Re-run the reproduction under the lock, {trials} trials: enough that a clean result means the lock "
                "fixed it, given how often it failed before (cold caches again; the control already passed)")
        await run("compile-race", {"control": False, **extra})

    try:
        asyncio.run(hunt())
    finally:
        out = write_postmortem(inv, directory / "postmortem.md")
        inv.close()
    _say(7, "Write the postmortem")
    with Workspace(directory).open() as again:
        for h in again.hypotheses_json():
            print(f"    {h['id']:<20} {h['status']}")
    print(f"\npostmortem: {out}\nfull output of each run: {out.with_name('postmortem-output')}/\n"
          f"the session: {directory / '.sleuth'} (sleuth replay --json, sleuth events)\n"
          f"done in {time.monotonic() - started:.0f} s")
    return 0


def add_demo_command(sub, add) -> None:
    p = add("demo", cmd_demo, "the whole investigation on the bundled example drafter, here, no server needed")
    p.add_argument("dir", nargs="?", default="sleuth-demo", help="where (default: ./sleuth-demo)")
    p.add_argument("--auto", action="store_true", help="run it headless and write the postmortem")
    p.add_argument("--force", action="store_true", help="use a non-empty directory (never overwriting a file sleuth did not write)")


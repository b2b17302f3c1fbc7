"""`sleuth demo [DIR] [--auto]`: the whole investigation on the bundled example drafter,
on this machine, with no server: reproduce the race, check the environment against a
baseline, repeat a check with nothing changed (sleuth flags it), measure the compile cache,
apply the lock, verify, and write the postmortem."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shlex
import sys
import time
from pathlib import Path

from ..probes import AgentPool, Config, builtin_probes, load_config
from ..sessions import (
    CircularRetest,
    Investigation,
    RunReport,
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
from .timeline import run_findings

__all__ = ["cmd_demo"]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "drafter"
CACHES = ".sleuth/caches"  # the demo's own compile caches, under its directory
CONFIG = """\
# sleuth.toml for the demo: the local target, with the example drafter as its code, and
# compile caches of its own: the default /tmp/torchinductor_$USER is every environment's of
# this user, so the demo's first look at the cache is cold on any machine.
[targets.local]
code = {{ local = "drafter" }}
env = {{ TORCHINDUCTOR_CACHE_DIR = {inductor}, TRITON_CACHE_DIR = {triton} }}

# The reproduction: the drafter's own entry point, short, one cold-cache trial; its own
# flags make the single-thread control, and it races by FX tracing (its default).
[probes.compile-race]
entry = "drafter/train.py"
trials = 1
args = ["--steps", "6"]
control_args = ["--threads", "1"]
race = "fx-trace"

# The same entry, watched at its flex_attention calls.
[probes.fx-trace-state]
entry = "drafter/train.py"
"""


def _ran(probe: str, **want: object):
    def done(st, _root: Path) -> bool:
        return any(r.probe == probe and r.classification is not None
                   and all(r.result.get(k) == v for k, v in want.items()) for r in st.runs.values()
                   if not r.params.get("known_good"))
    return done


def _verify_step(st) -> str:
    """Step 5 as the hunt stands: sleuth offers to verify only what reproduced (on a torch that
    fixed this face of the race, nothing did, and the lock has nothing to fix)."""
    reproduction = run_to_verify(st, "local", "lock")
    if reproduction is not None:
        trials = verify_params(st, reproduction).get("trials")
        return (f"y re-runs the reproduction under the lock ({trials} trials, side by side as the cores allow; the run "
                "header says how far): it verifies the fix.")
    return ("The race did not reproduce here, so sleuth offers no verification: a clean run cannot say the lock "
            "fixed anything (ⓚ on the run: this torch may have fixed it). r on ▷ compile-race runs it under the lock "
            "anyway.")


def _guide():
    from .tui.widgets import Guide, GuideStep

    return Guide("Guided demo", (
        GuideStep("↑/↓ to ▷ compile-race (under compile race), r: the drafter races (about a minute).",
                  _ran("compile-race")),
        GuideStep("On ▷ env-fingerprint press r: compared with the known-good baseline the demo recorded before the "
                  "failure (#1) — no drift. (b marks a run as the baseline: do it while training works.)",
                  _ran("env-fingerprint", has_baseline=True)),
        GuideStep("r again with nothing changed: sleuth asks before a circular retest (n: don't run).",
                  lambda st, _root: any(f.kind == "circular-retest" for f in st.flags)),
        GuideStep("On ✚ lock (under compile race) press f, then a to apply it.",
                  lambda st, _root: any(a.remedy == "lock" for a in st.applications.values())),
        GuideStep(_verify_step, lambda st, _root: any(a.verified for a in st.applications.values())),
        GuideStep("e writes postmortem.md; q quits.", lambda _st, root: (root / "postmortem.md").is_file()),
    ))


class Progress:
    """A long run, as it goes: each of a probe's runs as it ends ("trial 2 of 5 passed in 41 s ·
    3 of 6 runs done, 2 running · 43 s"), from its ``progress`` records; at a terminal, a line
    that counts the seconds between them."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.live = sys.stdout.isatty()
        self._tick: asyncio.Task | None = None
        self._shown = False

    def __enter__(self) -> Progress:
        if self.live:
            self._tick = asyncio.get_running_loop().create_task(self._count())
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._tick is not None:
            self._tick.cancel()
        self._clear()

    async def _count(self) -> None:
        while True:
            await asyncio.sleep(1)
            sys.stdout.write(f"\r    … {time.monotonic() - self.started:.0f} s")
            sys.stdout.flush()
            self._shown = True

    def _clear(self) -> None:
        if self._shown:
            sys.stdout.write("\r\033[K")
            self._shown = False

    def record(self, rec: dict) -> None:
        if rec.get("kind") != "progress":
            return
        said = str(rec.get("said") or "")
        if rec.get("event") == "started" and rec.get("done") == 0 and rec.get("running") == 1:
            if not isinstance(rec.get("of"), int) or rec["of"] < 2:
                return
            width = rec.get("side_by_side") or 1
            said = f"{rec['of']} runs, " + (f"{width} side by side" if width > 1 else "one after another")
        elif rec.get("event") != "ended":
            return
        self._clear()
        print(f"      {said}", flush=True)


def _say(step: int, text: str) -> None:
    print(f"\n[{step}] {text}", flush=True)


MARKER = ".sleuth-demo.json"  # what the demo wrote here: {relative path: sha256}


def _demo_files(directory: Path) -> dict[str, bytes]:
    files = {f"drafter/{p.name}": p.read_bytes() for p in sorted(EXAMPLE.glob("*.py"))}
    caches = directory / CACHES
    # a TOML basic string is a JSON string for any path (quotes and backslashes escaped alike)
    files["sleuth.toml"] = CONFIG.format(inductor=json.dumps(str(caches / "inductor")),
                                         triton=json.dumps(str(caches / "triton"))).encode()
    return files


def open_command(given: str) -> str:
    """The one command that opens the demo's hunt in the UI from where the user ran the demo
    (*given*: the directory as they typed it): the project's own sleuth.toml is found from
    there, so runs from the UI use the demo's target and code."""
    return f"cd {shlex.quote(given)} && sleuth"


def setup(directory: Path, force: bool = False) -> Workspace:
    """Write the demo into *directory*. Never over a file sleuth did not write (or that changed
    since it did: the lock applied, your edit); a non-empty directory that is not an earlier
    demo only with *force*, and then beside what is there."""
    if not EXAMPLE.is_dir():
        raise UsageError(f"the example drafter is not at {EXAMPLE}: this sleuth installation is incomplete; reinstall it")
    files = _demo_files(directory)
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


def _known_here(st, entries, target: str) -> list[str]:
    """Each known issue that explains a hypothesis of the hunt, where it stands on *target*'s
    latest measured versions: the race's entries on 2.13 and on 2.14 differ (issue 33)."""
    from ..hypotheses.known import describe_standing

    known = st.known_state(target)
    versions = ((known[0] if known else {}).get("env") or {}).get("distributions") or {}
    if not versions:
        return []
    tested = {h for h, ev in st.evidence.items() if ev}
    out = []
    for e in entries.values():
        if e.package != "torch" or not set(e.explains) & tested:
            continue
        runs = sorted({m.run for m in st.known_matches if m.id == e.id and m.target == target})
        out.append(describe_standing(e, versions, runs))
    return out


async def _known_good(inv, target, probes, config, agents=None) -> int:
    """Fingerprint the environment before the failure is reproduced and mark it as the
    baseline: the method the demo teaches (in real life, while training still works)."""
    req = request_for_probe(inv, probes["env-fingerprint"], target, config.params_for("env-fingerprint", {"known_good": True}))
    report = await run_probe(inv, target, req, runner=agents)
    inv.mark_baseline(report.run)
    inv.add_note("known-good environment fingerprinted before the failure and marked as the baseline", about=f"#{report.run}")
    return report.run


def cmd_demo(args: argparse.Namespace) -> int:
    directory = Path(args.dir).resolve()
    ws = setup(directory, force=args.force)
    inv = ws.create("drafter race demo")
    inv.add_symptom("fx-trace-error")
    print(f"demo in {directory}: the example drafter is in drafter/, the investigation in {inv.path.name}")
    if not args.auto:
        return _in_the_ui(args, directory, ws, inv)
    started = time.monotonic()
    config = load_config(ws.config_path)
    os.chdir(directory)  # the probes' entry paths are relative to the demo directory
    hunt = _Hunt(inv, config, directory)
    try:
        asyncio.run(hunt.hunt())
    finally:
        out = write_postmortem(inv, directory / "postmortem.md")
        inv.close()
    _say(7, "Write the postmortem")
    with Workspace(directory).open() as again:
        for h in again.hypotheses_json():
            print(f"    {h['id']:<20} {h['status']}")
        known = _known_here(again.state, Workspace(directory).known(), "local")
        if known:
            print("    what upstream knows of the race, for what this target has now (sleuth known):")
            print("\n".join(f"    ⓚ {line}" for line in known))
    print(f"\npostmortem: {out}\nfull output of each run: {out.with_name('postmortem-output')}/\n"
          f"the session: {directory / '.sleuth'} (sleuth replay --json, sleuth events)\n"
          f"done in {time.monotonic() - started:.0f} s\n\n"
          f"Open the hunt in the UI:  {open_command(args.dir)}")
    return 0


def _in_the_ui(args: argparse.Namespace, directory: Path, ws: Workspace, inv: Investigation) -> int:
    """The demo at a terminal: the baseline fingerprinted, then the UI with the guide; elsewhere, how to open it."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        inv.close()
        print(
            "\nNot at a terminal, so the UI is not opened. Open it with\n"
            f"  {open_command(args.dir)}\nor run the whole investigation headless with\n"
            f"  sleuth demo --auto {shlex.quote(args.dir)}"
        )
        return 0
    os.chdir(directory)
    print("fingerprinting the known-good environment (the baseline, before the failure)…", flush=True)
    config = load_config(ws.config_path)
    baseline = asyncio.run(_known_good(inv, config.target("local"), builtin_probes(), config))
    print(f"run #{baseline} is the baseline")
    from .tui import SleuthApp

    SleuthApp.live(Workspace(directory), hint=_guide()).run()
    print(f"the hunt is kept: open it again with  {open_command(args.dir)}")
    return 0


class _Hunt:
    """The headless demo's steps, each a run on the local target in one resident agent."""

    def __init__(self, inv: Investigation, config: Config, directory: Path) -> None:
        self.inv, self.config, self.directory = inv, config, directory
        self.target = config.target("local")
        self.probes = builtin_probes()
        self.agents = AgentPool(warm=("torch",))  # one resident agent runs every probe of the demo

    async def hunt(self) -> None:
        try:
            await self.steps()
        finally:
            await self.agents.close()

    async def run(self, probe: str, params: dict, flagged: CircularRetest | None = None) -> RunReport:
        inv = self.inv
        req = request_for_probe(inv, self.probes[probe], self.target, self.config.params_for(probe, params))
        check = flagged.check if flagged is not None else None  # run what was asked about, without a second read
        with Progress() as progress:
            report = await run_probe(inv, self.target, req, force=flagged is not None, runner=self.agents, check=check,
                                     on_record=progress.record)
        data = report.to_json(inv)
        verdicts = [f"{e['verdict']} {e['hypothesis']}" for e in data["evidence"]]
        verdicts += inv.state.verified_by(report.run)
        said = ", ".join(verdicts) or "no evidence"
        print(f"    run #{data['run_id']} {probe}: {data['classification']} in {data['seconds']:.1f} s — {said}")
        for found in run_findings(inv.state, report.run):
            if found["kind"] == "known":  # what upstream already knows of what this run saw
                print(f"    ⓚ {found['text']}")
        return report

    async def steps(self) -> None:
        _say(0, "Before the failure: fingerprint the known-good environment and mark it as the baseline")
        base = await _known_good(self.inv, self.target, self.probes, self.config, self.agents)
        print(f"    run #{base} env-fingerprint: the baseline")
        _say(1, "Reproduce: the drafter with 4 threads and cold caches, and a single-thread control")
        await self.run("compile-race", {})
        _say(2, "Version drift? Fingerprint the environment now and compare it with the known-good baseline")
        await self.run("env-fingerprint", {})
        _say(3, "Check the environment again, with nothing changed")
        try:
            await self.run("env-fingerprint", {})
        except CircularRetest as flag:
            print(f"    ⟲ sleuth: circular retest — {flag}")
            print("    (running it anyway, so the postmortem can show what it cost)")
            await self.run("env-fingerprint", {}, flagged=flag)
        _say(4, "Cache invalidation? Measure it: inductor's own hit/miss counters on a compile against the caches")
        await self.run("compile-cache", {})  # it compiles: the caches change, so it comes after the retest
        await self.lock()

    async def lock(self) -> None:
        """Steps 5 and 6: the lock applied to the drafter, then the reproduction re-run under it."""
        inv = self.inv
        _say(5, "Apply the lock remedy to drafter/model.py")
        plan = plan_remedy(inv, "lock", self.directory / "drafter" / "model.py", "local")
        for f in plan.findings:
            print(f"    line {f['line']}: {f['what']}")
        app = apply_remedy(inv, plan, "local", "compile-race")
        print(f"    applied (application #{app}); {plan.diff.count(chr(10) + '+') } lines added")
        reproduction = run_to_verify(inv.state, "local", "lock")
        extra = verify_params(inv.state, reproduction) if reproduction else {}
        trials = extra.get("trials", 1)
        seen = [r for r in inv.state.runs.values() if r.probe == "compile-race" and r.classification == "completed"]
        if not any(int(r.result.get("failed_trials") or 0) for r in seen):
            _say(6, f"Re-run the reproduction under the lock, {trials} trial(s): the race did not reproduce here "
                    "before the lock, so a clean run cannot say the lock fixed anything (the torch here may have "
                    "fixed this face of it: see the known issues below)")
        else:
            _say(6, f"Re-run the reproduction under the lock, {trials} trials: enough that a clean result means the "
                    "lock fixed it, given how often it failed before (cold caches again; the control already passed)")
        await self.run("compile-race", {"control": False, **extra})

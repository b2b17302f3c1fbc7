"""Benchmark: how a fleet fan-out scales with its members, and what bounds it.

Sixteen members vs one, through the same resident agents (one per member) and the same
``run_fleet`` the CLI and the UI use: each member's state read, its run, its recorded
output and the comparison. The members are targets on this machine (no sshd needed, so it
also runs where there is none, e.g. a GPU host), which makes the far ends share this
machine's cores with sleuth: the figures say how much CPU the sixteen took (every process,
from /proc/stat) and so the floor a machine with this many cores can reach — on a real
fleet each member's far end is its own machine.

Two probes: a trivial one forked from the agent (as the built-in fleet probes run:
env-fingerprint, cache-inventory, target-check) and the same in a fresh interpreter.

    python bench/fleet_scale.py [--runs 9] [--members 16] [--json]
Goal (issue 16): sixteen members ≤ 3× one member.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sleuth.hypotheses import load_catalog  # noqa: E402
from sleuth.probes import AgentPool, Config, Fleet, Target, probe_from_file  # noqa: E402
from sleuth.sessions import Investigation, run_fleet  # noqa: E402


def busy_cpu() -> float:
    """CPU seconds spent by every process on this machine so far (all cores)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


async def measure(tmp: Path, runs: int, n: int, fork: bool) -> dict:
    script = tmp / f"trivial_{'fork' if fork else 'fresh'}.py"
    script.write_text(f'PROBE = {{"id": "trivial", "title": "trivial", "timeout": 60, "fork": {fork}}}\n'
                      'emit("result", ok=True)\n')
    probe = probe_from_file(script)
    members = {f"m{i:02d}": Target(f"m{i:02d}", python=sys.executable) for i in range(n)}
    config = Config(None, {**members, "one": Target("one", fleet=Fleet("list", names=("m00",))),
                           "all": Target("all", fleet=Fleet("list", names=tuple(members)))})
    inv = Investigation.create(tmp / f"fleet-{fork}.sleuth", "bench", load_catalog())
    agents = AgentPool()

    async def fan(fleet: str) -> tuple[float, float, float]:
        cpu0, own0 = busy_cpu(), time.process_time()
        t0 = time.perf_counter()
        report = await run_fleet(inv, config, config.target(fleet), probe, {}, runner=agents, force=True)
        wall = time.perf_counter() - t0
        assert report.comparison is not None and not report.comparison.unreachable, report.comparison.unreachable
        return wall, busy_cpu() - cpu0, time.process_time() - own0

    try:
        await fan("all")  # the agents start
        ones = [await fan("one") for _ in range(runs)]
        alls = [await fan("all") for _ in range(max(runs // 2, 3))]
    finally:
        await agents.close()
        inv.close()
    cores = len(os.sched_getaffinity(0))
    one = statistics.median(w for w, _, _ in ones)
    many = statistics.median(w for w, _, _ in alls)
    cpu_many = statistics.median(c for _, c, _ in alls)
    return {
        "one_s": round(one, 4),
        "many_s": round(many, 4),
        "vs_one": round(many / one, 2),
        "cpu_one_s": round(statistics.median(c for _, c, _ in ones), 4),
        "cpu_many_s": round(cpu_many, 3),
        "sleuth_cpu_many_s": round(statistics.median(s for _, _, s in alls), 3),
        "cpu_floor_s": round(cpu_many / cores, 4),
        "vs_cpu_floor": round(many / (cpu_many / cores), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--members", type=int, default=16)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        forked = asyncio.run(measure(Path(tmp), args.runs, args.members, True))
        fresh = asyncio.run(measure(Path(tmp), args.runs, args.members, False))
    cores = len(os.sched_getaffinity(0))
    result = {"cores": cores, "members": args.members, "forked": forked, "fresh": fresh,
              "fleet16_vs_one": forked["vs_one"], "fleet16_fresh_vs_one": fresh["vs_one"]}
    if args.json:
        print(json.dumps(result))
        return
    n = args.members
    print(f"a fleet of {n} local members vs one, median wall seconds ({cores} cores here)")
    for name, r in (("forked from the agent", forked), ("fresh interpreter", fresh)):
        print(f"  {name:<24} one {r['one_s']:.4f}   {n}: {r['many_s']:.4f}   ratio {r['vs_one']:.2f}×  (goal ≤ 3)")
        print(f"  {'':<24} CPU of the {n} (every process) {r['cpu_many_s']:.3f} s, sleuth's own {r['sleuth_cpu_many_s']:.3f} s;"
              f" floor on {cores} cores {r['cpu_floor_s']:.4f} s → {r['vs_cpu_floor']:.2f}× the floor")


if __name__ == "__main__":
    main()

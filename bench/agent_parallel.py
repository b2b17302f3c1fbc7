"""Benchmark: eight probes at once on one resident agent, against one probe alone.

The local target (no sshd needed): one `AgentPool` agent, a trivial forked probe (as the
fleet and the state reads are). Prints the median of one run, of eight started together,
their ratio, and where the time went during the eight: the agent's own CPU (in series: one
process) and the children's (in parallel where there are cores), from /proc.

    python bench/agent_parallel.py            # a table
    python bench/agent_parallel.py --json     # {"agent_parallel8_vs_one": ..., ...}
Goal (issue 24): eight at once ≤ 2× one, on a host with 16 cores (bench/h200_agent_parallel.sh).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sleuth.probes import AgentPool, ProgramSpec, Target, execute  # noqa: E402

TRIVIAL = "emit('result', ok=True)\n"
HZ = os.sysconf("SC_CLK_TCK")


class Null:
    def write(self, stream: str, data: bytes) -> None:
        pass

    def flush(self) -> None:
        pass


def cpu_of(pid: int) -> tuple[float, float]:
    """(own CPU seconds, CPU seconds of its children that were waited for)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / HZ
    children = (int(fields[13]) + int(fields[14])) / HZ
    return own, children


async def main_async(runs: int, width: int) -> dict:
    target = Target(name="local", python=sys.executable, origin="bench")
    pool = AgentPool()
    spec = ProgramSpec(probe="trivial", source=TRIVIAL, fork=True)

    async def one() -> None:
        out = await execute(target, spec, Null(), runner=pool)
        assert out.classification == "completed", out.reason

    try:
        agent = await pool.get(target)
        assert agent is not None
        pid = agent.pid
        for _ in range(3):
            await one()
        singles, groups = [], []
        for _ in range(runs):  # interleaved: the machine's moods fall on both alike
            t0 = time.perf_counter()
            await one()
            singles.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await asyncio.gather(*(one() for _ in range(width)))
            groups.append(time.perf_counter() - t0)
        own0, kids0 = cpu_of(pid)
        me0 = time.process_time()
        t0 = time.perf_counter()
        for _ in range(runs):
            await asyncio.gather(*(one() for _ in range(width)))
        wall = (time.perf_counter() - t0) / runs
        own1, kids1 = cpu_of(pid)
        me1 = time.process_time()
    finally:
        await pool.close()
    t_one, t_many = statistics.median(singles), statistics.median(groups)
    return {
        "cores": os.cpu_count(),
        "width": width,
        "one_s": round(t_one, 4),
        "parallel_s": round(t_many, 4),
        "agent_parallel8_vs_one": round(t_many / t_one, 3),
        "agent_cpu_per_run_ms": round((own1 - own0) / (runs * width) * 1000, 2),
        "children_cpu_per_run_ms": round((kids1 - kids0) / (runs * width) * 1000, 2),
        "sleuth_cpu_per_run_ms": round((me1 - me0) / (runs * width) * 1000, 2),
        "parallel_wall_s": round(wall, 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--width", type=int, default=8)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    r = asyncio.run(main_async(args.runs, args.width))
    if args.json:
        print(json.dumps(r))
        return
    print(f"{'one trivial forked probe (median)':<46} {r['one_s']:.4f} s")
    print(f"{f'{args.width} at once on the same agent (median)':<46} {r['parallel_s']:.4f} s")
    print(f"{'agent_parallel8_vs_one':<46} {r['agent_parallel8_vs_one']:.2f}×  (goal ≤ 2 on 16 cores; {r['cores']} here)")
    print(f"{'the agent own CPU a run (in series)':<46} {r['agent_cpu_per_run_ms']:.2f} ms")
    print(f"{'a child CPU (in parallel where cores allow)':<46} {r['children_cpu_per_run_ms']:.2f} ms")
    print(f"{'sleuth own CPU a run (in series)':<46} {r['sleuth_cpu_per_run_ms']:.2f} ms")


if __name__ == "__main__":
    main()

"""Benchmark: capture through the agent broker (the CLI's path) vs through an agent pool in
the same process (the UI's path), into a real session store.

The CLI's `sleuth probe run` reaches its target's agent through the broker (issue 16): the
far end's output goes agent → broker → the command, which stores it. The target is local (no
sshd needed), so only the broker hop differs. Interleaved pairs, medians.

    python bench/broker_capture.py [--megabytes 200] [--pairs 5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sleuth.probes import AgentPool, ProgramSpec, Target, execute  # noqa: E402
from sleuth.probes.broker import BrokerClient  # noqa: E402
from sleuth.sessions import Store  # noqa: E402


def generator(megabytes: int) -> str:
    return ("import os\n"
            "block = (b'{\"step\": 1, \"loss\": 0.25, \"lr\": 0.0003, \"tokens_per_s\": 12345.6}\\n' * 20000)[: 1 << 20]\n"
            "block = block[: block.rfind(b'\\n') + 1]\n"
            f"for _ in range({megabytes}):\n    os.write(1, block)\n")


async def measure(tmp: Path, megabytes: int, pairs: int) -> dict:
    (tmp / ".sleuth").mkdir()
    target = Target("here", python=sys.executable)
    store = Store.create(tmp / "s.sleuth")
    broker, pool = BrokerClient(tmp / ".sleuth"), AgentPool()
    spec = ProgramSpec(probe="gen", source=generator(megabytes), fork=True)
    run = 0

    async def one(agents) -> float:
        nonlocal run
        run += 1
        cap = store.capture(run)
        t0 = time.perf_counter()
        out = await execute(target, spec, cap, runner=agents)
        cap.close()
        seconds = time.perf_counter() - t0
        assert out.classification == "completed", out.reason
        return store.output_summary(run)["bytes"] / seconds / 1e6

    try:
        await one(broker), await one(pool)  # both agents up
        rows = [(await one(pool), await one(broker)) for _ in range(pairs)]
    finally:
        await broker.ask("stop")
        await pool.close()
        store.close()
    return {
        "megabytes": megabytes,
        "in_process_mb_s": round(statistics.median(r[0] for r in rows), 1),
        "broker_mb_s": round(statistics.median(r[1] for r in rows), 1),
        "broker_vs_in_process": round(statistics.median(b / p for p, b in rows), 3),
        "pairs": [[round(x, 1) for x in r] for r in rows],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--megabytes", type=int, default=200)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        r = asyncio.run(measure(Path(tmp), args.megabytes, args.pairs))
    if args.json:
        print(json.dumps(r))
        return
    print(f"capture of {r['megabytes']} MB from a local target into a session store (median MB/s)")
    print(f"  through an agent pool in this process (the UI)   {r['in_process_mb_s']:>8.1f}")
    print(f"  through the agent broker (the CLI)               {r['broker_mb_s']:>8.1f}")
    print(f"  broker_vs_in_process                             {r['broker_vs_in_process']:>8.2f}×")


if __name__ == "__main__":
    main()

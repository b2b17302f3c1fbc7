"""Benchmark: an 8-rank DDP job (tests/support/ddp_job.py: torch's own DDP, gloo on CPU, torchrun) read
by `sleuth probe run stacks --json` (issue 32).

1. Healthy, looked at --looks times in a row (default 20): how many looks named an odd rank or
   a straggler (the goal: none).
2. Rank 2 stopped from outside (SIGSTOP): the time until the JSON names rank 2 "stopped", with
   every other rank's native wait read (py-spy --native), against the baseline in the same run:
   `py-spy dump --native` of every process one after another, as a person does by hand (the
   same native evidence, without /proc or the reading), and the plain `py-spy dump` by hand.

    python bench/stacks_ddp.py [--json] [--looks 20] [--ranks 8]
Goal (issue 32): the 8-rank DDP hang to the named odd rank with native frames ≤ 2 s on loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sleuth.probes.py_spy import local_py_spy  # noqa: E402


def sleuth(d: Path, *args: str) -> tuple[float, dict]:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "sleuth.app.cli", *args], cwd=d, capture_output=True, text=True,
                         check=True)
    return time.perf_counter() - t, json.loads(out.stdout)


def by_hand(pids: list[int], native: bool) -> float:
    spy = local_py_spy()
    assert spy, "py-spy is a dependency of sleuth"
    t = time.perf_counter()
    for pid in pids:
        subprocess.run([spy, "dump", "--pid", str(pid), "--json", *(["--native"] if native else ["--nonblocking"])],
                       capture_output=True)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--looks", type=int, default=20)
    ap.add_argument("--ranks", type=int, default=8)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sleuth-bench-ddp-"))
    pids_dir = tmp / "pids"
    pids_dir.mkdir()
    d = tmp / "proj"
    d.mkdir()
    subprocess.run([sys.executable, "-m", "sleuth.app.cli", "init"], cwd=d, check=True, capture_output=True)
    log = (tmp / "job.log").open("w")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                            str(args.ranks), str(ROOT / "tests" / "support" / "ddp_job.py"), "--step-delay", "0", "--pids",
                            str(pids_dir)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    out: dict = {"ranks": args.ranks}
    try:
        end = time.monotonic() + 180
        while time.monotonic() < end:
            text = (tmp / "job.log").read_text()
            if len(list(pids_dir.iterdir())) == args.ranks and all(f"rank {r} step 20" in text
                                                                   for r in range(args.ranks)):
                break
            time.sleep(0.3)
        pids = {int(p.name[4:]): int(p.read_text()) for p in pids_dir.iterdir()}
        run = ("probe", "run", "stacks", "--json", "--force", "--target", "local")
        sleuth(d, *run)  # the broker warm, as for a user's second command
        named = []
        verdicts = []
        for _ in range(args.looks):
            _took, data = sleuth(d, *run)
            found = next(r for r in data["records"] if r["kind"] == "result")
            verdicts.append(found["verdict"])
            named += [o["rank"] for o in found["odd_ranks"]]
        out["healthy_looks"] = args.looks
        out["healthy_verdicts"] = {v: verdicts.count(v) for v in sorted(set(verdicts))}
        out["healthy_named"] = named
        os.kill(pids[2], signal.SIGSTOP)
        time.sleep(1.5)
        took, data = sleuth(d, *run)
        found = next(r for r in data["records"] if r["kind"] == "result")
        odd = [(o["rank"], o["kind"]) for o in found["odd_ranks"]]
        assert odd == [("rank 2", "stopped")], found["sentences"]
        waits = {r["label"]: (r.get("native_wait") or {}).get("frame") for r in found["per_rank"]}
        out["stopped_s"] = round(took, 3)
        out["stopped_native_read"] = found.get("native_read")
        out["stopped_waits"] = waits
        others = [pid for r, pid in sorted(pids.items()) if r != 2]
        out["by_hand_native_s"] = round(by_hand(others, native=True), 3)
        out["by_hand_plain_s"] = round(by_hand(list(pids.values()), native=False), 3)
        out["sleuth_vs_by_hand_native"] = round(out["stopped_s"] / out["by_hand_native_s"], 3)
        os.kill(pids[2], signal.SIGCONT)
    finally:
        for pid in (int(p.read_text()) for p in pids_dir.iterdir()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        job.wait()
        subprocess.run([sys.executable, "-m", "sleuth.app.cli", "agent", "stop"], cwd=d, capture_output=True)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark: a hung job's stacks, every rank, to the named odd rank (issue 26).

Two jobs on this machine:
  * an 8-rank gloo job (tests/support/hang_job.py --fault mismatch, torch's launcher): rank 2 waits
    in another collective than the others;
  * 64 plain Python processes with RANK/WORLD_SIZE set (no torch, so 64 fit in memory): two
    threads each, all waiting in one function but rank 5, which waits in another.

For each, the time of `sleuth probe run stacks --json` (the CLI as a user runs it, its broker
warm: the second call) until the JSON names the odd rank, against the baseline measured in
the same run: `py-spy dump` of every process one after another, as a person does by hand,
taking as many samples of each as sleuth does (the same evidence, without its reading).
Also the single-sample floor of that baseline.

    python bench/stacks_hang.py [--json] [--no-gloo] [--ssh]
Goal (issue 26): the 8-rank hang to the named odd rank in ≤ 2 s on loopback.
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
sys.path.insert(0, str(ROOT / "tests"))

from sleuth.probes.py_spy import local_py_spy  # noqa: E402

FAKE = """
import os, sys, threading, time
def sync_gradients(ev):
    ev.wait()
def log_loss(ev):
    ev.wait()
ev = threading.Event()
threading.Thread(target=lambda: ev.wait(), name="loader", daemon=True).start()
open(os.path.join(sys.argv[1], "rank%s" % os.environ["RANK"]), "w").write(str(os.getpid()))
(log_loss if os.environ["RANK"] == "5" else sync_gradients)(ev)
"""


def sleuth(d: Path, *args: str) -> tuple[float, dict]:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "sleuth.app.cli", *args], cwd=d, capture_output=True, text=True,
                         check=True)
    took = time.perf_counter() - t
    return took, json.loads(out.stdout)


def by_hand(pids: list[int], samples: int) -> float:
    spy = local_py_spy()
    assert spy, "py-spy is a dependency of sleuth: pip install py-spy"
    t = time.perf_counter()
    for _ in range(samples):
        for pid in pids:
            subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, check=False)
    return time.perf_counter() - t


def wait_pids(d: Path, n: int, timeout: float = 180.0) -> list[int]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = list(d.iterdir())
        if len(found) == n:
            time.sleep(0.5)
            return [int(p.read_text()) for p in found]
        time.sleep(0.2)
    raise SystemExit(f"only {len(list(d.iterdir()))} of {n} processes started")


def measure(project: Path, pids: list[int], odd: str, samples: int, target: str = "local") -> dict:
    sleuth(project, "probe", "run", "stacks", "--json", "--force", "--target", target)  # starts the broker
    took, data = sleuth(project, "probe", "run", "stacks", "--json", "--force", "--target", target)
    result = next(r for r in data["records"] if r["kind"] == "result")
    named = [o["rank"] for o in result.get("odd_ranks") or []]
    return {"stacks_s": round(took, 3), "by_hand_s": round(by_hand(pids, samples), 3),
            "by_hand_one_sample_s": round(by_hand(pids, 1), 3), "named": named, "named_right": named == [odd],
            "verdict": result.get("verdict"), "processes": result.get("processes"), "window_s": result.get("window_s")}


def kill(pids: list[int], group: int | None) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if group is not None:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-gloo", action="store_true", help="skip the 8-rank torch job")
    ap.add_argument("--ssh", action="store_true", help="also through real sshd on loopback (jump + pct), py-spy copied")
    args = ap.parse_args()
    out: dict = {}
    samples = 5  # the stacks probe's default
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        project = base / "proj"
        project.mkdir()
        subprocess.run([sys.executable, "-m", "sleuth.app.cli", "init"], cwd=project, capture_output=True, check=True)
        if not args.no_gloo:
            pids_dir = base / "gloo"
            pids_dir.mkdir()
            job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "8",
                                    str(ROOT / "tests" / "support" / "hang_job.py"), "--fault", "mismatch", "--pids", str(pids_dir)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            h = None
            try:
                pids = wait_pids(pids_dir, 8)
                time.sleep(3.0)  # past step 3: rank 2 is in the other collective
                out["gloo8"] = measure(project, pids, "rank 2", samples)
                if args.ssh:  # the same job read through real sshd on loopback: a jump host, then pct exec
                    from support.sshd_harness import SshHarness

                    h = SshHarness(base / "sshd").setup().start()
                    toml = project / "sleuth.toml"
                    toml.write_text(toml.read_text() + "\n" + h.toml("ct200")
                                    + f'env = {{ XDG_CACHE_HOME = "{base / "far-cache"}" }}\n')
                    out["gloo8_ssh"] = measure(project, pids, "rank 2", samples, "ct200")
            finally:
                if h is not None:
                    h.stop()
                kill(pids if "pids" in locals() else [], job.pid)
        pids_dir = base / "fake"
        pids_dir.mkdir()
        script = base / "fake_rank.py"
        script.write_text(FAKE)
        procs = [subprocess.Popen([sys.executable, str(script), str(pids_dir)],
                                  env={**os.environ, "RANK": str(i), "WORLD_SIZE": "64"}) for i in range(64)]
        try:
            pids = wait_pids(pids_dir, 64)
            out["procs64"] = measure(project, pids, "rank 5", samples)
        finally:
            kill([p.pid for p in procs], None)
            for p in procs:
                p.wait()
        subprocess.run([sys.executable, "-m", "sleuth.app.cli", "agent", "stop"], cwd=project, capture_output=True)
    for m in out.values():
        m["stacks_vs_by_hand"] = round(m["stacks_s"] / m["by_hand_s"], 3)
    for key in ("gloo8", "gloo8_ssh"):
        if key in out:
            out[key]["under_2s"] = out[key]["stacks_s"] <= 2.0
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for key, m in out.items():
        print(f"{key}: sleuth stacks {m['stacks_s']:.2f} s (window {m['window_s']} s) named {m['named']} "
              f"[{m['verdict']}]; by hand ({samples} py-spy dumps of each, in turn) {m['by_hand_s']:.2f} s, one each "
              f"{m['by_hand_one_sample_s']:.2f} s; ratio {m['stacks_vs_by_hand']}")


if __name__ == "__main__":
    main()

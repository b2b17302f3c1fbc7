"""Benchmark: what the remedies cost, on the GPU they are for.

  * lock: steady-state calls per second of a compiled flex_attention (bf16, 16 heads, head
    dim 128, sliding window 1024, sequence 4096 on CUDA; small on CPU) through the exact
    helper the lock remedy inserts, against the same calls unlocked (the baseline), on one
    thread and on four;
  * precompile: the seconds it adds at start (the remedied program prints them), and that
    no compile happens while workers run;
  * the example drafter with --race compile (cold caches): errors and compiles while
    workers run, unremedied vs lock vs precompile.

    python bench/remedy_overhead.py --prepare DIR     # with sleuth installed: remedied copies
    python bench/remedy_overhead.py --run DIR [--json] # needs only torch (the GPU box)
    python bench/remedy_overhead.py [--json]           # both, here

Goals (issue 4): lock overhead ≤ 2 %; no compile after precompile.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the example drafter as one module and split across two (the tracing site in features.py)
VARIANTS = ("original", "lock", "precompile", "split-original", "split-lock", "split-precompile")


def prepare(out: Path, device: str) -> None:
    sys.path.insert(0, str(ROOT))
    import asyncio

    from sleuth.probes import ProgramSpec, execute, load_config
    from sleuth.probes.catalog import builtin_probes
    from sleuth.probes.remedies.lock import LOCK_HELPER, lock_transform
    from sleuth.probes.remedies.precompile import precompile_transform

    sys.path.insert(0, str(ROOT / "tests"))
    from sleuth.probes.remedies import LocalFile
    from support.drafter_split import split

    src = ROOT / "examples" / "drafter"
    for name in VARIANTS:
        shutil.rmtree(out / name, ignore_errors=True)
        shutil.copytree(src, out / name, ignore=shutil.ignore_patterns("__pycache__"))
        if name.startswith("split-"):
            split(out / name)
    for name in ("lock", "split-lock"):  # split-lock: both modules, one process-wide lock
        for module in ("model.py", "features.py"):
            path = out / name / module
            if path.exists():
                path.write_text(lock_transform(path.read_text())[0])
    (out / "lock_helper.py").write_text(LOCK_HELPER)

    class Sink:
        def write(self, stream: str, data: bytes) -> None:
            pass

        def flush(self) -> None:
            pass

    probe = builtin_probes()["fx-trace-state"]
    spec = ProgramSpec(probe=probe.id, source=probe.source, filename=probe.path.name, parts=probe.part_sources,
                       params={"entry": str(out / "original" / "train.py"), "args": ["--race", "compile", "--steps", "4"]})
    outcome = asyncio.run(execute(load_config(None).target("local"), spec, Sink()))
    shapes = next(r for r in outcome.records if r["kind"] == "result")["shapes"]
    for s in shapes:
        for t in ("q", "k", "v"):
            s[t]["device"] = device
    (out / "shapes.json").write_text(json.dumps(shapes, indent=1))
    for name in ("precompile", "split-precompile"):
        train = out / name / "train.py"
        train.write_text(precompile_transform(train.read_text(), LocalFile(train), shapes, "Shapes from bench/remedy_overhead.py.")[0])


def lock_overhead(out: Path, device: str) -> dict:
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    helper: dict = {}
    exec((out / "lock_helper.py").read_text(), helper)
    cuda = device.startswith("cuda")
    B, H, S, D, W = (1, 16, 4096, 128, 1024) if cuda else (1, 4, 256, 32, 64)
    dtype = torch.bfloat16 if cuda else torch.float32
    q, k, v = (torch.randn(B, H, S, D, device=device, dtype=dtype) for _ in range(3))
    mask = create_block_mask(lambda b, h, qi, ki: (qi >= ki) & (qi - ki <= W), None, None, S, S, device=device)
    plain = torch.compile(flex_attention)
    locked = helper["_sleuth_serialized"](plain)
    plain(q, k, v, block_mask=mask)
    locked(q, k, v, block_mask=mask)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def rate(fn, calls: int, threads: int = 1) -> float:
        sync()
        t0 = time.perf_counter()
        if threads == 1:
            for _ in range(calls):
                fn(q, k, v, block_mask=mask)
        else:
            def loop() -> None:
                for _ in range(calls // threads):
                    fn(q, k, v, block_mask=mask)
            ts = [threading.Thread(target=loop) for _ in range(threads)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
        sync()
        return calls / (time.perf_counter() - t0)

    calls = 400 if cuda else 200
    results = {}
    for threads in (1, 4):
        a, b = [], []
        for _ in range(7):  # interleaved, so drift hits both alike
            a.append(rate(plain, calls, threads))
            b.append(rate(locked, calls, threads))
        pa, pb = statistics.median(a), statistics.median(b)
        results[f"threads{threads}"] = {"unlocked_calls_s": round(pa, 1), "locked_calls_s": round(pb, 1),
                                       "overhead_pct": round((pa - pb) / pa * 100, 2)}
    results["shape"] = [B, H, S, D]
    results["dtype"] = str(dtype)
    return results


def model_lock_overhead(out: Path, device: str) -> dict:
    """Serializing a whole compiled model's forward (what the lock does to torch.compile(model))
    against serializing only its flex_attention call: the example drafter's model, four
    threads, steady state."""
    import copy

    import torch

    sys.path.insert(0, str(out / "original"))
    from model import Drafter

    helper: dict = {}
    exec((out / "lock_helper.py").read_text(), helper)
    cuda = device.startswith("cuda")
    dim, seq = (1024, 2048) if cuda else (64, 128)
    base = Drafter(dim=dim, heads=8, vocab=4096).to(device)
    plain = torch.compile(base)
    whole = helper["_sleuth_serialized"](torch.compile(copy.deepcopy(base)))
    tokens = torch.randint(0, 4096, (1, seq), device=device)
    hidden = torch.randn(1, seq, dim, device=device)
    with torch.no_grad():
        plain(tokens, hidden)
        whole(tokens, hidden)

    def rate(model, calls: int = 200, threads: int = 4) -> float:
        def loop() -> None:
            with torch.no_grad():
                for _ in range(calls // threads):
                    model(tokens, hidden)
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        ts = [threading.Thread(target=loop) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        if cuda:
            torch.cuda.synchronize()
        return calls / (time.perf_counter() - t0)

    a, b = [], []
    for _ in range(5):
        a.append(rate(plain))
        b.append(rate(whole))
    pa, pb = statistics.median(a), statistics.median(b)
    return {"unlocked_forwards_s": round(pa, 1), "whole_forward_locked_s": round(pb, 1),
            "overhead_pct": round((pa - pb) / pa * 100, 2), "dim": dim, "seq": seq, "threads": 4}


def drafter_runs(out: Path, device: str, trials: int, partial: Path | None = None) -> dict:
    runs: dict = {}
    plan = [(name, "compile") for name in VARIANTS] + [("original", "fx-trace"), ("split-original", "fx-trace"),
                                                        ("split-lock", "fx-trace")]
    for name, race in plan:
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, str(out / name / "train.py"), "--race", race, "--device", device, "--cold-cache",
             "--trials", str(trials), "--steps", "30"],
            capture_output=True, text=True, timeout=900,
        )
        wall = time.perf_counter() - t0
        try:
            summary = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            summary = {"errors": {"no summary": 1}, "stderr": proc.stderr[-1500:]}
        m = re.search(r"sleuth: precompiled (\d+) flex_attention shape\(s\) in ([0-9.]+) s", proc.stderr)
        runs[f"{name} ({race})"] = {
            "exit": proc.returncode,
            "errors": summary.get("errors"),
            "compiles_during_workers": summary.get("compiles_during_workers"),
            "trials": summary.get("trials"),
            "steps": summary.get("steps"),
            "wall_s": round(wall, 2),
            "precompile_s": [float(x) for x in re.findall(r"shape\(s\) in ([0-9.]+) s", proc.stderr)] if m else None,
            "torch": summary.get("torch"),
            "first_error": next((ln for ln in proc.stderr.splitlines() if "Error" in ln), None),
        }
        if partial is not None:  # what finished so far, should the whole run be cut short
            partial.write_text(json.dumps(runs, indent=1))
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prepare", metavar="DIR")
    ap.add_argument("--run", metavar="DIR")
    ap.add_argument("--device", default=None)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--partial", metavar="FILE", help="write the drafter runs finished so far here")
    ap.add_argument("--skip-lock", action="store_true", help="only the drafter runs")
    ap.add_argument("--model-only", action="store_true", help="only the whole-model lock cost")
    args = ap.parse_args()
    device = args.device
    if device is None:
        try:
            import torch

            device = "cuda:0" if torch.cuda.is_available() else "cpu"
        except ImportError:
            device = "cpu"
    if args.prepare:
        prepare(Path(args.prepare), args.device or "cuda:0")
        print(f"prepared {args.prepare}")
        return
    work = Path(args.run) if args.run else Path(tempfile.mkdtemp())
    if not args.run:
        prepare(work, device)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="bench-inductor-"))
    if args.model_only:
        print(json.dumps({"device": device, "whole_model_lock": model_lock_overhead(work, device)}))
        return
    partial = Path(args.partial) if args.partial else None
    lock = None if args.skip_lock else lock_overhead(work, device)
    if partial is not None and lock is not None:
        partial.with_name("lock_overhead.json").write_text(json.dumps(lock, indent=1))
    result = {"device": device, "lock": lock, "drafter": drafter_runs(work, device, args.trials, partial)}
    if args.json:
        print(json.dumps(result))
        return
    for threads in (1, 4) if result["lock"] else ():
        r = result["lock"][f"threads{threads}"]
        print(f"  {threads} thread(s): unlocked {r['unlocked_calls_s']:>9.1f} calls/s   locked {r['locked_calls_s']:>9.1f} calls/s   "
              f"overhead {r['overhead_pct']:+.2f} %  (goal ≤ 2 %)")
    print(f"device {device}; example drafter, cold caches:")
    for name, r in result["drafter"].items():
        print(f"  {name:<11} exit {r['exit']}  errors {r['errors']}  compiles while workers ran {r['compiles_during_workers']}"
              f"  wall {r['wall_s']} s" + (f"  precompile {r['precompile_s']} s" if r["precompile_s"] else ""))


if __name__ == "__main__":
    main()

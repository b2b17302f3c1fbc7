"""Train the example drafter with N worker threads — and hit the compile race.

    python examples/drafter/train.py [--threads 4] [--steps 30] [--device cpu | --devices cuda:0,cuda:1]
                                     [--race fx-trace|compile] [--cold-cache] [--seed 0]

--devices: one drafter copy per device (the same weights), worker i drives devices[i % n] —
as in the seed, where drafter threads each drive their own GPU and compile on first use
there; the target side (its feature extractor) stays on the first device. The JSON has
per-device counts ("per_device": {device: {"steps", "errors"}}).

--race fx-trace (default): a target-side thread FX-traces the target model while drafter
threads call the compiled flex_attention: torch raises "Detected that you are using FX to
symbolically trace a dynamo-optimized function" in the drafter threads.
--race compile: each worker drafts at its own sequence length, so the workers compile
concurrently while the others call compiled code (the seed's case on torch 2.11 GPUs).

Exit status 1 with the first error on stderr when the race hits, 0 when clean. The last
line of stdout is always JSON: {"errors": {type: count}, "compiles_during_workers": n,
"steps": n, ...}.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import threading
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--steps", type=int, default=30, help="steps per worker")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--devices", help="comma-separated devices (cuda:0,cuda:1): one drafter copy each; overrides --device")
    ap.add_argument("--race", choices=["fx-trace", "compile"], default="fx-trace")
    ap.add_argument("--cold-cache", action="store_true", help="start from empty inductor/triton caches")
    ap.add_argument("--seq", type=int, default=128, help="sequence length (worker i uses seq + 16*i with --race compile)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backward", action="store_true", help="train through flex_attention (GPU only: no CPU backward)")
    ap.add_argument("--trials", type=int, default=1, help="repeat the threaded phase (fresh threads; recompiles with --race compile)")
    ap.add_argument("--then-single", action="store_true", help="after the threads, run the steps single-threaded too (single_checksum)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cold_cache:
        fresh = tempfile.mkdtemp(prefix="drafter-cache-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(fresh, "inductor")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(fresh, "triton")

    import torch
    from model import Drafter, TargetModel, extract_features
    from torch._dynamo.utils import counters

    torch.manual_seed(args.seed)
    devices = [torch.device(d.strip()) for d in (args.devices or args.device).split(",") if d.strip()]
    device = devices[0]  # the target side
    base = Drafter()
    drafters = {str(d): copy.deepcopy(base).to(d) for d in devices}  # the same weights on every device
    target = TargetModel().to(device)
    per_device: dict[str, dict] = {str(d): {"steps": 0, "errors": {}} for d in devices}
    errors: dict[str, int] = {}
    first_error: list[str] = []
    losses: list[float] = []
    steps_done = [0]
    lock = threading.Lock()

    def seq_len(worker: int) -> int:
        return args.seq + (16 * worker if args.race == "compile" else 0)

    def device_of(worker: int) -> torch.device:
        return devices[worker % len(devices)]

    def record(exc: BaseException, worker: int | None = None) -> None:
        with lock:
            name = type(exc).__name__
            errors[name] = errors.get(name, 0) + 1
            where = per_device[str(device if worker is None else device_of(worker))]["errors"]
            where[name] = where.get(name, 0) + 1
            if not first_error:
                first_error.append(traceback.format_exc())

    def draft_step(worker: int, step: int) -> float:
        g = torch.Generator().manual_seed(args.seed * 1000 + worker * 100 + step)
        s = seq_len(worker)
        on = device_of(worker)
        tokens = torch.randint(0, 512, (1, s), generator=g).to(on)
        hidden = torch.randn(1, s, 64, generator=g).to(on)
        with torch.set_grad_enabled(args.backward):
            logits = drafters[str(on)](tokens, hidden)
            loss = torch.nn.functional.cross_entropy(logits.view(-1, 512), tokens.view(-1))
        if args.backward:
            loss.backward()
        return loss.item()

    first_steps = threading.Semaphore(0)
    all_compiled = threading.Event()

    def worker(index: int) -> None:
        for step in range(args.steps):
            try:
                loss = draft_step(index, step)
            except Exception as exc:  # the race: keep going, count it
                record(exc, index)
                continue
            finally:
                if step == 0:
                    first_steps.release()
            with lock:
                losses.append(loss)
                steps_done[0] += 1
                per_device[str(device_of(index))]["steps"] += 1
        # As in training, a worker does not stop while the others are still starting up
        # (compiling their first shape): it keeps drafting; these calls are not counted.
        extra = 0
        while args.race == "compile" and not all_compiled.is_set():
            try:
                draft_step(index, extra % args.steps)
            except Exception as exc:
                record(exc, index)
            extra += 1

    def watch_first_steps() -> None:
        for _ in range(args.threads):
            first_steps.acquire()
        all_compiled.set()

    stop = threading.Event()
    trial_log: list[dict] = []

    def feature_extractor() -> None:
        x = torch.randn(1, 8, 64, device=device)
        while not stop.is_set():
            try:
                extract_features(target, x)
            except Exception as exc:
                record(exc)
            stop.wait(0.005)  # the next batch's features

    def run_workers(trial: int) -> int:
        stop.clear()
        all_compiled.clear()
        watcher = threading.Thread(target=watch_first_steps, name="watch-first-steps", daemon=True)
        draft_step(0, 0)  # the usual warm-up: one call on the main thread, first shape, first device only
        threads = [threading.Thread(target=worker, args=(i,), name=f"drafter-{i}") for i in range(args.threads)]
        if args.race == "fx-trace":
            threads.append(threading.Thread(target=feature_extractor, name="target-features"))
        compiles_before = counters["stats"]["unique_graphs"]
        watcher.start()
        for t in threads:
            t.start()
        for t in threads[: args.threads]:
            t.join()
        stop.set()
        for t in threads[args.threads :]:
            t.join()
        return counters["stats"]["unique_graphs"] - compiles_before

    def single_threaded() -> float:
        # the same steps and the same feature extraction, one after another
        total = 0.0
        for step in range(args.steps):
            try:
                total += draft_step(0, step)
            except Exception as exc:
                record(exc, 0)
                continue
            steps_done[0] += 1
            per_device[str(device_of(0))]["steps"] += 1
        extract_features(target, torch.randn(1, 8, 64, device=device))
        return total

    single_checksum = None
    if args.threads == 1:
        losses.append(single_threaded())
        compiles_during = 0
    else:
        compiles_during = 0
        for trial in range(args.trials):
            if trial and args.race == "compile":
                # every trial compiles its shapes again, as a fresh process would
                torch._dynamo.reset()
                torch.compiler.set_stance("default")
            before = dict(errors)
            compiles_during_trial = run_workers(trial)
            compiles_during += compiles_during_trial
            trial_log.append({"errors": {k: v - before.get(k, 0) for k, v in errors.items() if v - before.get(k, 0)},
                              "compiles_during_workers": compiles_during_trial})
        if args.then_single:
            single_checksum = round(single_threaded(), 6)

    summary = {
        "errors": errors,
        "compiles_during_workers": compiles_during,
        "steps": steps_done[0],
        "threads": args.threads,
        "devices": [str(d) for d in devices],
        "per_device": per_device,
        "race": args.race,
        "cold_cache": args.cold_cache,
        "torch": torch.__version__,
        "checksum": round(sum(losses), 6),
        "trials": trial_log,
        "single_checksum": single_checksum if args.threads > 1 else round(sum(losses), 6),
    }
    if first_error:
        sys.stderr.write(first_error[0])
    print(json.dumps(summary), flush=True)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

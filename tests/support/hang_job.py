"""A small data-parallel training loop on gloo (CPU) that stops the way multi-GPU jobs stop.

    python -m torch.distributed.run --nproc-per-node 4 hang_job.py --fault mismatch

--fault healthy     every rank steps: load a batch, compute, all_reduce the gradients
--fault mismatch    rank 2 logs its loss with an all_reduce on another group (ranks 2, 3)
                    while the others sync gradients on the world: a collective mismatch
--fault deadlock    rank 1's main thread holds the batch lock and waits for its loader
                    thread, which waits for that lock: a deadlock inside one rank
--fault straggler   rank 3 loads each batch slowly: it makes progress, the others wait

It prints one line per step on rank 0 ("step N") and writes its pid per rank to --pids DIR.
--loader-workers N  batches come from a DataLoader with N worker processes per rank (forked:
                    they inherit the rank's RANK, as in every real job that uses workers)
--dump-fr-after S   each rank writes torch's Flight Recorder dump S seconds after it starts, where
                    the NCCL watchdog writes it on a timeout ($TORCH_FR_DUMP_TEMP_FILE + rank, a
                    pickle), as gloo has no such watchdog
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist

BATCH_LOCK = threading.Lock()


def load_batch(rank: int, fault: str) -> torch.Tensor:
    if fault == "straggler" and rank == 3:
        time.sleep(0.4)  # a slow disk on one node
    return torch.full((64,), float(rank))


class Batches(torch.utils.data.Dataset):
    def __init__(self, rank: int, fault: str) -> None:
        self.rank, self.fault = rank, fault

    def __len__(self) -> int:
        return 10**9

    def __getitem__(self, i: int) -> torch.Tensor:
        return load_batch(self.rank, self.fault)


def loader_thread(fault: str, rank: int, wanted: threading.Event, filled: threading.Event) -> None:
    while True:
        if wanted.is_set():
            with BATCH_LOCK:  # waits for the lock main holds while it waits for us
                filled.set()
            wanted.clear()
        time.sleep(0.01)


def sync_gradients(grad: torch.Tensor) -> None:
    dist.all_reduce(grad)


def log_loss(loss: torch.Tensor, group) -> None:
    dist.all_reduce(loss, group=group)


def dump_flight_recorder_after(seconds: float, rank: int) -> None:
    def dump() -> None:
        time.sleep(seconds)
        from torch._C._distributed_c10d import _dump_fr_trace  # pyright: ignore[reportAttributeAccessIssue]

        path = os.environ["TORCH_FR_DUMP_TEMP_FILE"] + str(rank)
        Path(path + ".tmp").write_bytes(_dump_fr_trace(includeCollectives=True, onlyActive=False))
        os.replace(path + ".tmp", path)

    threading.Thread(target=dump, name="dumper", daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fault", default="healthy", choices=["healthy", "mismatch", "deadlock", "straggler"])
    parser.add_argument("--pids")
    parser.add_argument("--steps", type=int, default=10**9)
    parser.add_argument("--dump-fr-after", type=float)
    parser.add_argument("--loader-workers", type=int, default=0)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if args.pids:
        Path(args.pids, f"rank{rank}").write_text(str(os.getpid()))
    if args.dump_fr_after is not None:
        dump_flight_recorder_after(args.dump_fr_after, rank)
    side = dist.new_group([2, 3]) if dist.get_world_size() >= 4 else None
    wanted, filled = threading.Event(), threading.Event()
    threading.Thread(target=loader_thread, args=(args.fault, rank, wanted, filled), name="loader", daemon=True).start()
    batches = iter(torch.utils.data.DataLoader(Batches(rank, args.fault), batch_size=None,
                                               num_workers=args.loader_workers)) if args.loader_workers else None
    for step in range(args.steps):
        batch = next(batches) if batches is not None else load_batch(rank, args.fault)
        grad = batch * 0.5
        if args.fault == "deadlock" and rank == 1 and step == 3:
            with BATCH_LOCK:
                wanted.set()
                filled.wait()  # waits for the loader, holding the lock the loader needs
        if args.fault == "mismatch" and rank == 2 and step == 3:
            log_loss(grad.sum().reshape(1), side)
        sync_gradients(grad)
        if rank == 0:
            print(f"step {step}", flush=True)
        time.sleep(0.02)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

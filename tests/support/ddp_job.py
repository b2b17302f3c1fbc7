"""Training as PyTorch's own DDP tutorial writes it (multigpu_torchrun.py: a Trainer with
_run_batch / _run_epoch / train, DistributedSampler, DDP(model), loss.backward()), on gloo and
the CPU, started by torchrun:

    python -m torch.distributed.run --standalone --nproc-per-node 4 ddp_job.py --pids DIR

Nothing in it knows about sleuth and it has no fault flags: faults are put in from outside
(SIGSTOP, a stop/continue duty cycle, a cgroup CPU quota), as they happen to users. The one
exception is --uneven, a real bug of this shape: each rank gets its own number of batches and
no `Join` context, so one rank runs an extra step and its backward's all_reduce waits for ranks
that have left the loop (they wait in the barrier at the end).

Each rank writes its pid to DIR/rank<RANK> and prints "rank R step N" per step.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Points(Dataset):
    def __init__(self, size: int) -> None:
        self.size = size
        self.data = [(torch.rand(32), torch.rand(1)) for _ in range(size)]

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int):
        return self.data[index]


class Trainer:
    def __init__(self, model: torch.nn.Module, train_data: DataLoader, optimizer: torch.optim.Optimizer,
                 step_delay: float, rank: int | None = None) -> None:
        self.rank = int(os.environ["RANK"]) if rank is None else rank
        self.model = DDP(model)
        self.train_data = train_data
        self.optimizer = optimizer
        self.step_delay = step_delay
        self.steps = 0

    def _run_batch(self, source: torch.Tensor, targets: torch.Tensor) -> None:
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.mse_loss(output, targets)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self, epoch: int) -> None:
        if isinstance(self.train_data.sampler, DistributedSampler):
            self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            self._run_batch(source, targets)
            self.steps += 1
            print(f"rank {self.rank} step {self.steps}", flush=True)
            time.sleep(self.step_delay)  # the rest of a step (data, logging) without holding a CPU

    def train(self, max_epochs: int) -> None:
        for epoch in range(max_epochs):
            self._run_epoch(epoch)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pids", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=10**6)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--step-delay", type=float, default=0.02)
    parser.add_argument("--uneven", action="store_true", help="rank 1 gets one batch more (no Join)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = int(os.environ["RANK"])
    (args.pids / f"rank{rank}").write_text(str(os.getpid()))
    model = torch.nn.Sequential(torch.nn.Linear(32, args.width), torch.nn.ReLU(), torch.nn.Linear(args.width, 1))
    size = 4 * 8 * 16
    if args.uneven:
        # each rank reads its own shard, and rank 1's has one batch more: with no `Join`, its
        # last backward's all_reduce waits for ranks that have left the loop for the barrier
        loader = DataLoader(Points(16 * (4 + (rank == 1))), batch_size=16)
        sampler = None
    else:
        sampler = DistributedSampler(Points(size))
        loader = DataLoader(Points(size), batch_size=16, shuffle=False, sampler=sampler)
    trainer = Trainer(model, loader, torch.optim.SGD(model.parameters(), lr=0.01), args.step_delay)
    trainer.train(1 if args.uneven else args.epochs)
    print(f"rank {rank} done", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""The other launch of PyTorch's DDP tutorial (multigpu.py): `torch.multiprocessing.spawn`
starts the ranks, each gets its rank as the function's first argument and sets
MASTER_ADDR/MASTER_PORT itself — nothing in a rank's environment says which rank it is.
The same Trainer as ddp_job.py, gloo on the CPU:

    python ddp_spawn_job.py --pids DIR [--world-size 4]

No fault flags: faults are put in from outside. Each rank writes its pid to DIR/rank<RANK> and
prints "rank R step N" per step.
"""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from ddp_job import Points, Trainer
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


def ddp_setup(rank: int, world_size: int, port: int) -> None:
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group(backend="gloo", rank=rank, world_size=world_size)


def main(rank: int, world_size: int, port: int, pids: Path, step_delay: float) -> None:
    torch.set_num_threads(1)
    ddp_setup(rank, world_size, port)
    (pids / f"rank{rank}").write_text(str(os.getpid()))
    model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    data = Points(4 * 8 * 16)
    loader = DataLoader(data, batch_size=16, shuffle=False, sampler=DistributedSampler(data))
    trainer = Trainer(model, loader, torch.optim.SGD(model.parameters(), lr=0.01), step_delay, rank=rank)
    trainer.train(10**6)
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--pids", type=Path, required=True)
    parser.add_argument("--world-size", type=int, default=4)
    parser.add_argument("--step-delay", type=float, default=0.02)
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    mp.spawn(main, args=(args.world_size, free, args.pids, args.step_delay), nprocs=args.world_size)

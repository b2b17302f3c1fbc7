"""A Lightning job as its docs write one: a LightningModule, a DataLoader, and
`Trainer(accelerator="cpu", devices=4, strategy="ddp")`, started as a plain script:

    python lightning_job.py --pids DIR

Lightning's launcher makes this process rank 0 and starts ranks 1..3 as children (they carry
LOCAL_RANK, NODE_RANK and WORLD_SIZE, no RANK). The loop, the backward and DDP's all_reduce
all run inside lightning's and torch's packages. No fault flags: faults come from outside.
Each rank writes its pid to DIR/rank<R> and prints "rank R step N".

`--workers N` gives the DataLoader N workers (as Lightning's warning about num_workers advises),
started by `--mp-context` (spawn, forkserver: Python 3.14's default on Linux): rank 0 starts
them after Lightning put LOCAL_RANK=0 in its os.environ, so they and their resource tracker
carry LOCAL_RANK=0 while the launcher's own /proc environment says nothing.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Regressor(L.LightningModule):
    def __init__(self, pids: Path, width: int, delay: float) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, width), torch.nn.ReLU(), torch.nn.Linear(width, 1))
        self.pids, self.delay = pids, delay

    def on_fit_start(self) -> None:
        (self.pids / f"rank{self.global_rank}").write_text(str(os.getpid()))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        print(f"rank {self.global_rank} step {self.global_step}", flush=True)
        time.sleep(self.delay)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pids", type=Path, required=True)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--step-delay", type=float, default=0.0)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--mp-context", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = TensorDataset(torch.rand(4096, 32), torch.rand(4096, 1))
    trainer = L.Trainer(accelerator="cpu", devices=4, strategy="ddp", max_epochs=-1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    loader = DataLoader(data, batch_size=16, num_workers=args.workers, persistent_workers=args.workers > 0,
                        multiprocessing_context=args.mp_context if args.workers else None)
    trainer.fit(Regressor(args.pids, args.width, args.step_delay), loader)


if __name__ == "__main__":
    main()

"""Hang verdicts on training code sleuth did not write (issue 32): torch's own DDP, the shape of
PyTorch's DDP tutorial (tests/ddp_job.py: torchrun, DistributedSampler, DDP(model),
loss.backward(), gloo on CPU), and a Lightning Trainer (tests/lightning_job.py: strategy ddp,
its launcher is rank 0). The gradient all_reduce runs in C++ (DDP's reducer), so no Python
frame of torch.distributed shows it; faults come from outside the job, as they happen to
users: a SIGSTOP (a debugger or a frozen process leaves a rank so), a stop/continue duty cycle
that slows one rank about 4×. Each is read by `sleuth probe run stacks` through the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_cli import sleuth

DDP_JOB = Path(__file__).with_name("ddp_job.py")
LIGHTNING_JOB = Path(__file__).with_name("lightning_job.py")
BACKWARD = next(i for i, line in enumerate(DDP_JOB.read_text().splitlines(), 1) if line.strip() == "loss.backward()")
BARRIER = next(i for i, line in enumerate(DDP_JOB.read_text().splitlines(), 1) if line.strip() == "dist.barrier()")


class Launched:
    """A job of *n* ranks started as its users start it; every rank killed at the end."""

    def __init__(self, tmp: Path, argv: list[str], n: int) -> None:
        k = sum(1 for _ in tmp.glob("pids*"))
        self.pids_dir = tmp / f"pids{k}"
        self.pids_dir.mkdir()
        self.log = (tmp / f"job{k}.log").open("w")
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK")}
        self.proc = subprocess.Popen([*argv, "--pids", str(self.pids_dir)], stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True, env=env, cwd=tmp)
        self.n = n

    def wait(self, steps: int = 20, timeout: float = 120.0) -> Launched:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            text = Path(self.log.name).read_text()
            if len(list(self.pids_dir.iterdir())) == self.n and all(f"rank {r} step {steps}" in text
                                                                   for r in range(self.n)):
                return self
            assert self.proc.poll() is None, text[-3000:]
            time.sleep(0.2)
        raise AssertionError(f"the job did not start: {Path(self.log.name).read_text()[-3000:]}")

    @property
    def pids(self) -> dict[int, int]:
        return {int(p.name[4:]): int(p.read_text()) for p in self.pids_dir.iterdir()}

    def steps(self) -> int:
        return Path(self.log.name).read_text().count(" step ")

    def stop(self) -> None:
        for pid in self.pids.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.log.close()


@pytest.fixture
def launch(tmp_path: Path):
    started: list[Launched] = []

    def start(kind: str, n: int = 4, *args: str, steps: int = 20) -> Launched:
        if kind == "ddp":
            argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n),
                    str(DDP_JOB), "--step-delay", "0", *args]
        else:
            argv = [sys.executable, str(LIGHTNING_JOB), *args]
        j = Launched(tmp_path, argv, n)
        started.append(j)
        return j.wait(steps)

    yield start
    for j in started:
        j.stop()


class DutyCycle:
    """Slows one process from outside, as a noisy neighbour or a throttled node does: stopped
    75 ms of every 100 (SIGSTOP / SIGCONT), about 4× slower."""

    def __init__(self, pid: int, run_s: float = 0.025, stop_s: float = 0.075) -> None:
        self.pid, self.run_s, self.stop_s = pid, run_s, stop_s
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._cycle, daemon=True)

    def _cycle(self) -> None:
        while not self.done.is_set():
            os.kill(self.pid, signal.SIGSTOP)
            time.sleep(self.stop_s)
            os.kill(self.pid, signal.SIGCONT)
            time.sleep(self.run_s)
        os.kill(self.pid, signal.SIGCONT)

    def __enter__(self) -> DutyCycle:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


def project(tmp_path: Path) -> Path:
    d = tmp_path / "proj"
    d.mkdir(exist_ok=True)
    sleuth(d, "init")
    return d


def stacks(d: Path, *args: str) -> tuple[dict, dict, dict[str, str]]:
    data = json.loads(sleuth(d, "probe", "run", "stacks", "--json", "--force", "--target", "local", *args).stdout)
    found = next(r for r in data["records"] if r["kind"] == "result")
    return data, found, {e["hypothesis"]: e["verdict"] for e in data["evidence"]}


def rows(found: dict) -> dict[str, dict]:
    return {r["label"]: r for r in found["per_rank"]}


@pytest.mark.slow
def test_a_stopped_ddp_rank_is_named_stopped_and_the_others_wait_in_the_reducer(tmp_path: Path, launch):
    d = project(tmp_path)
    j = launch("ddp")
    _data, healthy, v = stacks(d)
    assert healthy["verdict"] == "healthy" and healthy["odd_ranks"] == [], healthy["sentences"]
    assert v == {"hang": "refutes", "collective-mismatch": "refutes", "deadlock": "refutes", "straggler": "refutes"}, (
        v, healthy["sentences"])

    os.kill(j.pids[2], signal.SIGSTOP)  # as a debugger, a frozen container or job control leaves a rank
    time.sleep(1.5)
    _data, found, v = stacks(d)
    assert found["verdict"] == "stopped", found["sentences"]
    [odd] = found["odd_ranks"]
    assert (odd["rank"], odd["kind"], odd["state"]) == ("rank 2", "stopped", "T")
    said = found["sentences"][0]
    assert said.startswith("rank 2 is stopped (T: a stop signal, job control or a debugger left it stopped)"), said
    assert f"ranks 0, 1, 3 wait in Trainer._run_batch at ddp_job.py:{BACKWARD} (DDP reducer) `loss.backward()`, in " \
           "c10d::Reducer::finalize_backward (the DDP reducer's gradient all_reduce): they wait for it" in said
    per = rows(found)
    assert {k: r["state"] for k, r in per.items()} == {"rank 0": "S", "rank 1": "S", "rank 2": "T", "rank 3": "S"}
    assert all(per[f"rank {n}"]["native_wait"]["frame"] == "c10d::Reducer::finalize_backward" for n in (0, 1, 3))
    assert per["rank 2"]["native_read"] is False  # ptrace cannot suspend a stopped process: not asked
    # a stopped rank explains the hang; what it would have done is not seen: no kind is refuted
    assert v == {"hang": "supports", "collective-mismatch": "inconclusive", "deadlock": "inconclusive",
                 "straggler": "inconclusive"}, v
    # the ranks table and the postmortem say the state and the native wait
    from sleuth.app.views import ranks_table

    table = ranks_table(found).plain
    line2 = next(ln for ln in table.splitlines() if ln.startswith("◆ rank 2"))
    assert "stopped (T)" in line2, table
    line0 = next(ln for ln in table.splitlines() if ln.startswith("  rank 0"))
    assert "c10d::Reducer::finalize_backward" in line0, table
    md = tmp_path / "pm.md"
    sleuth(d, "export", "-o", str(md))
    assert "| **rank 2** (stopped) | stopped (T) |" in md.read_text()
    os.kill(j.pids[2], signal.SIGCONT)
    before = j.steps()
    time.sleep(1.5)
    assert j.steps() > before  # never harmed the job: it goes on once continued


@pytest.mark.slow
def test_a_ddp_rank_slowed_from_outside_is_named_the_straggler_with_its_strength(tmp_path: Path, launch):
    d = project(tmp_path)
    j = launch("ddp")
    with DutyCycle(j.pids[1]):
        time.sleep(1.0)
        _data, found, v = stacks(d)
    assert found["verdict"] == "straggler", found["sentences"]
    [odd] = found["odd_ranks"]
    assert (odd["rank"], odd["kind"]) == ("rank 1", "straggler")
    said = found["sentences"][0]
    assert said.startswith("rank 1 is a straggler: ") and "stopped and continued from outside" in said, said
    assert "chance" in odd["strength"]  # stated with its strength
    assert v["straggler"] == "supports" and v["hang"] == "supports", v


@pytest.mark.slow
def test_uneven_inputs_without_join_are_a_mismatch_inside_ddp(tmp_path: Path, launch):
    """Rank 1 has one batch more: its last backward's all_reduce (in C++, DDP's reducer) waits
    while the others wait in the barrier after the loop."""
    d = project(tmp_path)
    j = launch("ddp", 4, "--uneven", steps=4)
    end = time.monotonic() + 30
    while Path(j.log.name).read_text().count(" done") < 3:
        assert time.monotonic() < end
        time.sleep(0.2)
    time.sleep(1.0)
    _data, found, v = stacks(d)
    assert found["verdict"] == "mismatch", found["sentences"]
    [odd] = found["odd_ranks"]
    assert (odd["rank"], odd["line"], odd["native_wait"]["frame"]) == ("rank 1", BACKWARD,
                                                                        "c10d::Reducer::finalize_backward")
    assert found["sentences"][0].startswith(f"rank 1 waits in Trainer._run_batch at ddp_job.py:{BACKWARD} (DDP reducer)")
    assert f"ranks 0, 2, 3 wait in main at ddp_job.py:{BARRIER} (barrier) `dist.barrier()`" in found["sentences"][0]
    assert v["collective-mismatch"] == "supports", v


@pytest.mark.slow
def test_a_lightning_job_has_its_launcher_as_rank_0_and_a_stopped_rank_is_the_one_named(tmp_path: Path, launch):
    d = project(tmp_path)
    j = launch("lightning")
    data, found, _v = stacks(d)
    ranks = {int(r["rank"]): r for r in data["records"] if r["kind"] == "rank"}
    assert {k: r["pid"] for k, r in ranks.items()} == j.pids
    assert ranks[0]["rank_from"] == "launcher" and ranks[1]["rank_from"] == "LOCAL_RANK"
    assert found["missing"] == 0 and not any("elsewhere" in s for s in found["sentences"]), found["sentences"]

    os.kill(j.pids[2], signal.SIGSTOP)
    time.sleep(1.5)
    _data, found, v = stacks(d)
    [odd] = found["odd_ranks"]
    assert (odd["rank"], odd["kind"]) == ("rank 2", "stopped"), found["sentences"]
    said = found["sentences"][0]
    assert said.startswith("rank 2 is stopped (T"), said
    assert "ranks 0, 1, 3 wait in" in said and "under lightning's LightningModule.backward" in said, said
    assert all(r["framework"]["package"] == "lightning" for r in found["per_rank"])
    assert v["hang"] == "supports" and v["collective-mismatch"] == "inconclusive", v
    os.kill(j.pids[2], signal.SIGCONT)

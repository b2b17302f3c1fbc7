"""Hangs and stragglers (issue 26) on a real multi-process gloo job on CPU: four ranks on
127.0.0.1 started by torch's own launcher (tests/support/hang_job.py), each fault and a healthy run,
read by `sleuth probe run stacks` as a user runs it — on the local target, through the real
sshd (jump + pct stand-in, py-spy copied to the far end), and as another user without ptrace
rights. The reading itself (hypotheses/hang/) is unit-tested on records shaped like the
probe's in tests/unit/test_hang_reading.py."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import sleuth
from support.project import new_project

JOB = Path(__file__).parents[1] / "support" / "hang_job.py"


def _line(text: str) -> int:
    """The line of hang_job.py that holds *text* (the lines the readings must name)."""
    return next(i for i, line in enumerate(JOB.read_text().splitlines(), 1) if text in line)


LOG_LOSS, SYNC = _line("dist.all_reduce(loss, group=group)"), _line("dist.all_reduce(grad)")
SLOW, LOADER, WAIT = _line("time.sleep(0.4)"), _line("with BATCH_LOCK:  # waits"), _line("filled.wait()")


class Job:
    """A 4-rank gloo job; stopped (every rank killed) at the end of the test."""

    def __init__(self, tmp: Path, fault: str, env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> None:
        n = sum(1 for _ in tmp.glob(f"pids-{fault}*"))
        self.pids_dir = tmp / f"pids-{fault}{n or ''}"
        self.pids_dir.mkdir()
        self.log = (tmp / f"job-{fault}{n or ''}.log").open("w")
        env = {**{k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}, **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
             str(JOB), "--fault", fault, "--pids", str(self.pids_dir), *args],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        self.fault = fault

    def wait(self, timeout: float = 90.0) -> Job:
        """Until every rank runs and the fault has happened (rank 0 logged step 3, or the hung
        ranks stopped at step 3 and had a second to settle)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            text = Path(self.log.name).read_text()
            if len(list(self.pids_dir.iterdir())) == 4 and "step 2" in text:
                time.sleep(2.0)
                return self
            assert self.proc.poll() is None, text
            time.sleep(0.2)
        raise AssertionError(f"the job did not start: {Path(self.log.name).read_text()}")

    @property
    def pids(self) -> dict[int, int]:
        return {int(p.name[4:]): int(p.read_text()) for p in self.pids_dir.iterdir()}

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
def job(tmp_path: Path):
    started: list[Job] = []

    def start(fault: str, env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> Job:
        j = Job(tmp_path, fault, env, args)
        started.append(j)
        return j.wait()

    yield start
    for j in started:
        j.stop()


async def _ui_marks_the_odd_rank(d: Path) -> None:
    from sleuth.app.tui import SleuthApp
    from sleuth.sessions import Workspace
    from support.pilot import select, text_of

    app = SleuthApp.live(Workspace(d))
    async with app.run_test(size=(160, 48)) as pilot:
        await select(pilot, "run", "1", "collective-mismatch")
        await pilot.pause()
        from textual.widgets import OptionList

        timeline = [str(o.prompt) for o in app.screen.query_one("#timeline", OptionList).options]
        assert any("#1 stacks" in t and f"⧗ mismatch: rank 2 waits in log_loss at hang_job.py:{LOG_LOSS}" in t for t in timeline), timeline
        pinned = text_of(app, "#pinned")
        assert f"rank 2 waits in log_loss at hang_job.py:{LOG_LOSS} (all_reduce)" in pinned
        import re

        rows = {m.group(2): line for line in pinned.splitlines() if (m := re.match(r"^(◆ |  )(rank \d+) ", line))}
        assert rows["rank 2"].startswith("◆ rank 2") and f"log_loss hang_job.py:{LOG_LOSS}" in rows["rank 2"]
        assert "stuck" in rows["rank 2"] and "all_reduce" in rows["rank 2"]
        assert rows["rank 0"].startswith("  rank 0") and f"sync_gradients hang_job.py:{SYNC}" in rows["rank 0"]


def run_stacks(d: Path, *args: str, check: int | None = 0) -> dict:
    proc = sleuth(d, "probe", "run", "stacks", "--json", "--force", *args, check=check)
    return json.loads(proc.stdout)


def verdicts(data: dict) -> dict[str, str]:
    return {e["hypothesis"]: e["verdict"] for e in data["evidence"]}


def result(data: dict) -> dict:
    return next(r for r in data["records"] if r["kind"] == "result")


def project(tmp_path: Path, extra: str = "") -> Path:
    return new_project(tmp_path / "proj", toml=extra)


# ------------------------------------------------------------------ a real gloo job

@pytest.mark.slow
@pytest.mark.parametrize("fault", ["mismatch", "deadlock", "straggler", "healthy"])
def test_stacks_of_a_real_gloo_job_on_the_local_target(tmp_path: Path, job, fault: str):
    d = project(tmp_path)
    j = job(fault)
    data = run_stacks(d, "--target", "local")
    found = result(data)
    ranks = [r for r in data["records"] if r["kind"] == "rank"]
    assert sorted(int(r["rank"]) for r in ranks) == [0, 1, 2, 3]
    assert {int(r["rank"]): r["pid"] for r in ranks} == j.pids  # the ranks, not the launcher or sleuth
    assert all(isinstance(r["samples"][0], list) and r["samples"][0] for r in ranks), ranks  # every thread's stack
    v = verdicts(data)
    said = [f["text"] for f in data["findings"] if f["kind"] == "hang"]
    job_py = str(JOB)
    if fault == "mismatch":
        assert v == {"hang": "supports", "collective-mismatch": "supports", "deadlock": "refutes",
                     "straggler": "refutes"}, v
        [odd] = found["odd_ranks"]
        assert (odd["rank"], odd["function"], odd["file"], odd["line"]) == ("rank 2", "log_loss", job_py, LOG_LOSS)
        # the job's line of code and the native wait under it (py-spy --native: gloo's work wait)
        assert said[0] == (f"rank 2 waits in log_loss at hang_job.py:{LOG_LOSS} (all_reduce) `dist.all_reduce(loss, "
                           "group=group)`, in c10d::Work::wait (a ProcessGroup work wait); ranks 0, 1, 3 wait in "
                           f"sync_gradients at hang_job.py:{SYNC} (all_reduce) `dist.all_reduce(grad)`, in "
                           "c10d::Work::wait (a ProcessGroup work wait): a collective mismatch (another collective, "
                           "another call site or another group)")
        assert {r["label"]: (r["state"], (r["native_wait"] or {}).get("frame")) for r in found["per_rank"]} == {
            f"rank {n}": ("S", "c10d::Work::wait") for n in range(4)}
    elif fault == "deadlock":
        assert v == {"hang": "supports", "collective-mismatch": "refutes", "deadlock": "supports",
                     "straggler": "refutes"}, v
        [odd] = found["odd_ranks"]
        assert (odd["rank"], odd["kind"], odd["collective"]) == ("rank 1", "deadlock", None)
        assert "a deadlock inside rank 1" in said[0] and f"loader in loader_thread at hang_job.py:{LOADER}" in said[0]
        assert f"MainThread in main at hang_job.py:{WAIT} `filled.wait()" in said[0]
    elif fault == "straggler":
        assert v["straggler"] == "supports" and v["collective-mismatch"] == "refutes", v
        [odd] = found["odd_ranks"]
        assert (odd["rank"], odd["function"], odd["line"], odd["stuck"]) == ("rank 3", "load_batch", SLOW, False)
        assert said[0].startswith(f"rank 3 is a straggler: in load_batch at hang_job.py:{SLOW} `time.sleep(0.4)")
        assert "chance" in said[0] and "it holds the others back" in said[0]  # named with its strength
    else:
        assert found["healthy"] and v == {"hang": "refutes", "collective-mismatch": "refutes", "deadlock": "refutes",
                                          "straggler": "refutes"}, (v, found["sentences"], found["per_rank"])
        assert said[0].startswith("healthy: all 4 ranks move")
    if fault == "mismatch":  # the UI's ranks × frames view and the postmortem's Hang section
        import asyncio

        asyncio.run(_ui_marks_the_odd_rank(d))
        md = tmp_path / "pm.md"
        sleuth(d, "export", "-o", str(md))
        hang = md.read_text().split("## Hang")[1].split("\n## ")[0]
        assert "### #1 stacks on local: mismatch (4 of 4 processes sampled" in hang
        assert f"- rank 2 waits in log_loss at hang_job.py:{LOG_LOSS} (all_reduce)" in hang
        assert "| rank | state | main thread | native wait | framework |" in hang
        assert f"| **rank 2** (mismatch) | stuck | log_loss at hang_job.py:{LOG_LOSS} | c10d::Work::wait (a ProcessGroup " \
               "work wait) | — |" in hang
        assert f"| rank 0 | stuck | sync_gradients at hang_job.py:{SYNC} | c10d::Work::wait" in hang
    # never harm the job: every rank still alive, and a healthy job still steps
    for pid in j.pids.values():
        os.kill(pid, 0)
    if fault == "healthy":
        before = Path(j.log.name).read_text().count("step ")
        time.sleep(1.0)
        assert Path(j.log.name).read_text().count("step ") > before


@pytest.mark.slow
def test_stacks_through_the_real_sshd_copies_py_spy_and_names_the_odd_rank(tmp_path: Path, sshd, job):
    cache = tmp_path / "far-cache"
    d = project(tmp_path, sshd.toml("ct200") + f'env = {{ XDG_CACHE_HOME = "{cache}" }}\n')
    job("mismatch")
    data = run_stacks(d, "--target", "ct200")
    assert (cache / "sleuth" / "bin" / "py-spy").is_file()  # not on the far end's PATH nor beside its python
    assert result(data)["py_spy"] == str(cache / "sleuth" / "bin" / "py-spy")
    [odd] = result(data)["odd_ranks"]
    assert (odd["rank"], odd["function"], odd["line"]) == ("rank 2", "log_loss", LOG_LOSS)
    assert verdicts(data)["collective-mismatch"] == "supports"


@pytest.mark.slow
def test_a_job_of_another_user_without_ptrace_rights_is_a_clear_finding(tmp_path: Path, job):
    if os.geteuid() != 0:
        pytest.skip("needs root to run the probe as another user (setpriv)")
    import shutil
    import tempfile

    outside = Path(tempfile.mkdtemp(prefix="sleuth-nobody-"))  # a folder that user can reach (pytest's is 0700)
    outside.chmod(0o755)
    wrapper = outside / "python-as-nobody"
    wrapper.write_text("#!/bin/sh\nexec setpriv --reuid 65534 --regid 65534 --clear-groups /usr/bin/python3 \"$@\"\n")
    wrapper.chmod(0o755)
    spy = outside / "bin" / "py-spy"
    spy.parent.mkdir()
    from sleuth.probes.py_spy import local_py_spy

    spy.write_bytes(Path(local_py_spy() or "").read_bytes())
    spy.chmod(0o755)
    d = project(outside, f'[targets.nobody]\npython = "{wrapper}"\n')  # its folder too: the probe runs there
    job("mismatch")
    try:
        data = run_stacks(d, "--target", "nobody", "--param", "match=hang_job.py", "--param", f"py_spy={spy}",
                          check=None)
    finally:
        sleuth(d, "agent", "stop", check=None)
        shutil.rmtree(outside)
    found = [f for f in data["findings"] if f["kind"] == "ptrace"]
    assert len(found) == 1, (data["classification"], data["reason"], data["findings"])
    assert "the job runs as uid 0 and sleuth's agent as uid 65534: only root or the job's own user may read its " \
           "stacks" in found[0]["text"]
    assert "fix: run the target as the job's user (ssh user in sleuth.toml), or as root" in found[0]["text"]
    assert result(data)["denied"] == 4 and result(data)["sampled"] == 0
    assert {e["verdict"] for e in data["evidence"]} <= {"inconclusive"}  # no stacks: nothing is claimed


@pytest.mark.slow
def test_a_fleet_of_two_nodes_reads_the_jobs_ranks_together_and_names_the_odd_ranks_node(tmp_path: Path):
    """Two "nodes" on this machine: each its own PID namespace (unshare) with its own sshd and
    its half of a 4-rank gloo job (torch's launcher, --nnodes 2): a node sees only its own
    ranks, as on two hosts. `probe run stacks --target nodes` reads both and names rank 2 on
    node b; each node alone could not (its run says the other ranks are elsewhere)."""
    import shutil
    import socket

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare for two PID namespaces")
    from support.sshd_harness import SSHD, SshHarness, free_port

    h = SshHarness(tmp_path / "nodes").setup()
    port = free_port()
    procs, logs = [], []
    names = {"jump": "a", "gpu": "b"}
    try:
        for i, server in enumerate(("jump", "gpu")):
            pids = tmp_path / f"pids-{names[server]}"
            pids.mkdir()
            job_cmd = (f"{sys.executable} -m torch.distributed.run --nnodes 2 --node-rank {i} --nproc-per-node 2 "
                       f"--master-addr 127.0.0.1 --master-port {port} {JOB} --fault mismatch --pids {pids}")
            log = (tmp_path / f"node-{names[server]}.log").open("w")
            logs.append(log)
            procs.append(subprocess.Popen(
                ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "sh", "-c",
                 f"{SSHD} -D -e -f {h.servers[server].config} & exec {job_cmd}"],
                stdout=log, stderr=subprocess.STDOUT))
        end = time.monotonic() + 120
        while time.monotonic() < end:
            ready = all(len(list((tmp_path / f"pids-{n}").iterdir())) == 2 for n in ("a", "b"))
            text = (tmp_path / "node-a.log").read_text()
            if ready and "step 2" in text:
                break
            assert all(p.poll() is None for p in procs), (tmp_path / "node-a.log").read_text()
            time.sleep(0.3)
        time.sleep(2.0)
        for server in ("jump", "gpu"):
            with socket.create_connection(("127.0.0.1", h.servers[server].port), timeout=10):
                pass
        targets = ""
        for server, name in names.items():
            targets += (f"[targets.{name}]\nssh = \"{h.user}@127.0.0.1\"\nport = {h.servers[server].port}\n"
                        f"identity = \"{h.client_key}\"\nknown_hosts = \"{h.known_hosts}\"\n"
                        f"python = \"{sys.executable}\"\nconnect_timeout = 5\n\n")
        d = project(tmp_path, targets + '[targets.nodes]\nmembers = ["a", "b"]\n')
        data = json.loads(sleuth(d, "probe", "run", "stacks", "--target", "nodes", "--json", "--force").stdout)
        hang = data["hang"]
        assert sorted(r["label"] for r in hang["per_rank"]) == ["rank 0", "rank 1", "rank 2", "rank 3"]
        assert {r["label"]: r["member"] for r in hang["per_rank"]} == {"rank 0": "a", "rank 1": "a", "rank 2": "b",
                                                                       "rank 3": "b"}
        [odd] = hang["odd_ranks"]
        assert (odd["rank"], odd["member"], odd["function"], odd["line"]) == ("rank 2", "b", "log_loss", LOG_LOSS)
        assert hang["sentences"][0].startswith(f"rank 2 on b waits in log_loss at hang_job.py:{LOG_LOSS} (all_reduce) "
                                               "`dist.all_reduce(loss, group=group)`")
        assert f"; ranks 0, 1, 3 wait in sync_gradients at hang_job.py:{SYNC} (all_reduce)" in hang["sentences"][0]
        alone = json.loads(sleuth(d, "replay", "--json").stdout)["runs"]
        a_run = next(r for r in alone if r["target"] == "a")
        assert "2 are elsewhere" in " ".join(a_run["result"]["sentences"])
        hyps = {h["id"]: h for h in json.loads(sleuth(d, "hypotheses", "--json").stdout)}
        assert hyps["hang"]["status"] == "supported"
        statuses = {c["id"]: c["status"] for c in hyps["hang"]["refinements"]}
        assert statuses["collective-mismatch"] == "supported", statuses
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for log in logs:
            log.close()


@pytest.mark.slow
def test_a_job_started_with_the_hook_gives_its_stacks_without_ptrace_and_an_unhooked_one_is_never_signalled(
        tmp_path: Path, job):
    """`probe run --shell CMD --hook` starts the job with sleuth's sitecustomize (faulthandler on
    SIGUSR2, one file per process); `stacks --param via=hook` reads every rank through it, no
    ptrace; a job started without it is left alone (SIGUSR2 would kill it) and said so."""
    from support.cli import SLEUTH

    cache = tmp_path / "cache"
    d = project(tmp_path, f'[targets.mine]\npython = "{sys.executable}"\nenv = {{ XDG_CACHE_HOME = "{cache}" }}\n')
    pids = tmp_path / "pids-hooked"
    pids.mkdir()
    launch = subprocess.Popen(
        [SLEUTH, "probe", "run", "--target", "mine", "--hook", "--quiet", "--shell",
         f"{sys.executable} -m torch.distributed.run --standalone --nproc-per-node 4 {JOB} --fault mismatch "
         f"--pids {pids}"], cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 90
        while len(list(pids.iterdir())) < 4 and time.monotonic() < end:
            time.sleep(0.2)
        time.sleep(5.0)  # past step 3
        ranks = {int(p.name[4:]): int(p.read_text()) for p in pids.iterdir()}
        dumps = cache / "sleuth" / "hook" / "dumps"
        assert all((dumps / f"hooked-{pid}").is_file() for pid in ranks.values()), ranks.values()
        data = run_stacks(d, "--target", "mine", "--param", "via=hook")
        found = result(data)
        assert (found["sampled"], found["py_spy"], found["verdict"]) == (4, None, "mismatch"), found["sentences"]
        [odd] = found["odd_ranks"]
        assert (odd["rank"], odd["function"], odd["line"]) == ("rank 2", "log_loss", LOG_LOSS)
        # the hook also serves torch's Flight Recorder (--hook turned it on): it names rank 2 too
        assert (found["flight_recorder"], found["fr_behind"], found["fr_agrees"]) == (4, ["rank 2"], True), found
        assert any(t.startswith("flight recorder: ranks 0, 1, 3 are in gloo:all_reduce #4 on group 0 (default_pg), "
                                "which rank 2 has not entered (its last there: #3); rank 2 waits in gloo:all_reduce "
                                "#1 on group 1") for t in found["sentences"]), found["sentences"]
        assert all("sleuth-flight-recorder" not in r["threads"] for r in found["per_rank"]), found["per_rank"]
        assert all("Current thread" in (dumps / f"stacks-{pid}.txt").read_text() or
                   "Thread 0x" in (dumps / f"stacks-{pid}.txt").read_text() for pid in ranks.values()), ranks.values()
        other = job("mismatch")  # started without the hook
        alone = run_stacks(d, "--target", "mine", "--param", "via=hook", "--param",
                           "pid=" + ",".join(map(str, other.pids.values())))
        assert [f["kind"] for f in alone["findings"] if f["kind"] == "no-hook"] == ["no-hook"]
        assert [f["kind"] for f in alone["findings"] if f["kind"] == "flight-recorder-off"] == ["flight-recorder-off"]
        assert result(alone)["sampled"] == 0
        for pid in other.pids.values():
            os.kill(pid, 0)  # alive: never signalled
    finally:
        for pid in (int(p.read_text()) for p in pids.iterdir()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        launch.wait(timeout=60)
        sleuth(d, "agent", "stop", check=None)


@pytest.mark.slow
def test_the_flight_recorder_dump_a_watchdog_left_is_read_and_a_stale_one_refused(tmp_path: Path, job):
    """A job not started by sleuth, with the Flight Recorder on and its dumps written where the
    NCCL watchdog writes them on a timeout (a pickle per rank): the stacks probe reads them
    (plain data only) and names the rank that never entered the collective; a dump older than
    the process is not this job's and is said so."""
    d = project(tmp_path)
    prefix = tmp_path / "fr" / "trace_rank_"
    prefix.parent.mkdir()
    j = job("deadlock", env={"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_FR_DUMP_TEMP_FILE": str(prefix)},
            args=("--dump-fr-after", "4"))
    end = time.monotonic() + 30
    while len(list(prefix.parent.glob("trace_rank_?"))) < 4:
        assert time.monotonic() < end, "no dumps"
        time.sleep(0.2)
    data = run_stacks(d, "--target", "local")
    found = result(data)
    assert found["verdict"] == "deadlock" and found["flight_recorder"] == 4, found["sentences"]
    assert (found["fr_behind"], found["fr_agrees"]) == (["rank 1"], True)
    assert any(t.startswith("flight recorder: ranks 0, 2, 3 are in gloo:all_reduce #4 on group 0 (default_pg), which "
                            "rank 1 has not entered (its last there: #3); rank 1 waits in no collective")
               for t in found["sentences"]), found["sentences"]
    rank0 = next(r for r in data["records"] if r["kind"] == "rank" and r["rank"] == "0")
    assert rank0["flight_recorder"]["source"] == "dump" and rank0["flight_recorder"]["path"] == f"{prefix}0"

    os.utime(f"{prefix}0", (0, 0))  # a dump from before this job started
    again = run_stacks(d, "--target", "local")
    rank0 = next(r for r in again["records"] if r["kind"] == "rank" and r["rank"] == "0")
    assert rank0["flight_recorder"]["error"] == "the dump there is older than the process"
    assert result(again)["flight_recorder"] == 3
    for pid in j.pids.values():
        os.kill(pid, 0)


@pytest.mark.slow
def test_data_loader_workers_are_their_ranks_helpers_not_ranks(tmp_path: Path, job):
    """Every real job with DataLoader workers has, per rank, forked children with the rank's
    RANK: they are not ranks (counted as ranks they were the majority and made the real
    ranks look odd), and the rank's idle queue-feeder threads are no deadlock."""
    d = project(tmp_path)
    j = job("mismatch", args=("--loader-workers", "2"))
    data = run_stacks(d, "--target", "local")
    found = result(data)
    ranks = [r for r in data["records"] if r["kind"] == "rank"]
    assert {int(r["rank"]): r["pid"] for r in ranks} == j.pids
    assert len(found["helpers"]) == 8 and {h["rank"] for h in found["helpers"]} == {"0", "1", "2", "3"}
    assert all(h["ppid"] == j.pids[int(h["rank"])] for h in found["helpers"]), found["helpers"]
    assert found["verdict"] == "mismatch", found["sentences"]
    [odd] = found["odd_ranks"]
    assert (odd["rank"], odd["function"], odd["line"]) == ("rank 2", "log_loss", LOG_LOSS)
    assert any(t.startswith("8 child processes of the ranks (pt_data_worker ×8), started with their rank's environment, "
                            "are the ranks' helpers") for t in found["sentences"]), found["sentences"]


@pytest.mark.slow
def test_two_real_jobs_are_named_apart_and_one_is_read_with_its_job_param(tmp_path: Path, job):
    d = project(tmp_path)
    stale, fresh = job("healthy"), job("mismatch")
    both = result(run_stacks(d, "--target", "local"))
    assert both["verdict"] == "several-jobs", both["sentences"]
    by_pids = {frozenset(j["pids"]): j["job"] for j in both["jobs"]}
    assert set(by_pids) == {frozenset(stale.pids.values()), frozenset(fresh.pids.values())}
    assert set(verdicts(run_stacks(d, "--target", "local")).values()) == {"inconclusive"}  # nothing read into it
    key = by_pids[frozenset(fresh.pids.values())]
    data = run_stacks(d, "--target", "local", "--param", f"job={key}")
    found = result(data)
    assert {int(r["rank"]): r["pid"] for r in data["records"] if r["kind"] == "rank"} == fresh.pids
    assert found["verdict"] == "mismatch" and [r["rank"] for r in found["odd_ranks"]] == ["rank 2"]
    assert verdicts(data)["collective-mismatch"] == "supports"


# ------------------------------------------------------------------ issue 32: torch's own DDP and a Lightning trainer
# Hang verdicts on training code sleuth did not write: tests/support/ddp_job.py (the shape of PyTorch's
# DDP tutorial: torchrun, DistributedSampler, DDP(model), loss.backward(), gloo on CPU) and
# tests/support/lightning_job.py (a Lightning Trainer, strategy ddp, its launcher is rank 0), with
# faults from outside the job: SIGSTOP, a stop/continue duty cycle. In this file so that they
# never run beside the other real jobs (stacks reads every rank on the machine; xdist keeps a
# file on one worker).

import threading  # noqa: E402

DDP_JOB = Path(__file__).parents[1] / "support" / "ddp_job.py"
LIGHTNING_JOB = Path(__file__).parents[1] / "support" / "lightning_job.py"
DDP_SPAWN_JOB = Path(__file__).parents[1] / "support" / "ddp_spawn_job.py"
BACKWARD = next(i for i, line in enumerate(DDP_JOB.read_text().splitlines(), 1) if line.strip() == "loss.backward()")
BARRIER = next(i for i, line in enumerate(DDP_JOB.read_text().splitlines(), 1) if line.strip() == "dist.barrier()")


class Launched(Job):  # Job's pids and stop; started and waited for its own way
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

    def steps(self) -> int:
        return Path(self.log.name).read_text().count(" step ")


@pytest.fixture
def launch(tmp_path: Path):
    started: list[Launched] = []

    def start(kind: str, n: int = 4, *args: str, steps: int = 20) -> Launched:
        if kind == "ddp":
            argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n),
                    str(DDP_JOB), "--step-delay", "0", *args]
        elif kind == "spawn":
            argv = [sys.executable, str(DDP_SPAWN_JOB), "--world-size", str(n), "--step-delay", "0", *args]
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


def ddp_stacks(d: Path, *args: str) -> tuple[dict, dict, dict[str, str]]:
    data = json.loads(sleuth(d, "probe", "run", "stacks", "--json", "--force", "--target", "local", *args).stdout)
    found = next(r for r in data["records"] if r["kind"] == "result")
    return data, found, {e["hypothesis"]: e["verdict"] for e in data["evidence"]}


def ddp_rows(found: dict) -> dict[str, dict]:
    return {r["label"]: r for r in found["per_rank"]}


@pytest.mark.slow
def test_a_stopped_ddp_rank_is_named_stopped_and_the_others_wait_in_the_reducer(tmp_path: Path, launch):
    d = project(tmp_path)
    j = launch("ddp")
    _data, healthy, v = ddp_stacks(d)
    for _ in range(2):  # on a loaded machine (CI, torch 2.14's build) 5 samples may not tell: sleuth says so,
        # rules nothing out, and says to read again with more samples; a user does
        if healthy["verdict"] == "healthy" and healthy["straggler_tested"]:
            break
        assert healthy["verdict"] in ("healthy", "waiting") and healthy["odd_ranks"] == [], healthy["sentences"]
        assert "--param samples=20" in healthy["sentences"][-1], healthy["sentences"]
        assert v["hang"] == v["straggler"] == "inconclusive", v
        _data, healthy, v = ddp_stacks(d, "--param", "samples=20")
    assert healthy["verdict"] == "healthy" and healthy["odd_ranks"] == [], healthy["sentences"]
    assert v == {"hang": "refutes", "collective-mismatch": "refutes", "deadlock": "refutes", "straggler": "refutes"}, (
        v, healthy["sentences"])

    os.kill(j.pids[2], signal.SIGSTOP)  # as a debugger, a frozen container or job control leaves a rank
    time.sleep(1.5)
    _data, found, v = ddp_stacks(d)
    assert found["verdict"] == "stopped", found["sentences"]
    [odd] = found["odd_ranks"]
    assert (odd["rank"], odd["kind"], odd["state"]) == ("rank 2", "stopped", "T")
    said = found["sentences"][0]
    assert said.startswith("rank 2 is stopped (T: a stop signal, job control or a debugger left it stopped)"), said
    assert f"ranks 0, 1, 3 wait in Trainer._run_batch at ddp_job.py:{BACKWARD} (DDP reducer) `loss.backward()`, in " \
           "c10d::Reducer::finalize_backward (the DDP reducer's gradient all_reduce): they wait for it" in said
    per = ddp_rows(found)
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
        _data, found, v = ddp_stacks(d)
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
    _data, found, v = ddp_stacks(d)
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
    data, found, _v = ddp_stacks(d)
    ranks = {int(r["rank"]): r for r in data["records"] if r["kind"] == "rank"}
    assert {k: r["pid"] for k, r in ranks.items()} == j.pids
    assert ranks[0]["rank_from"] == "launcher" and ranks[1]["rank_from"] == "LOCAL_RANK"
    assert found["missing"] == 0 and not any("elsewhere" in s for s in found["sentences"]), found["sentences"]

    os.kill(j.pids[2], signal.SIGSTOP)
    time.sleep(1.5)
    _data, found, v = ddp_stacks(d)
    [odd] = found["odd_ranks"]
    assert (odd["rank"], odd["kind"]) == ("rank 2", "stopped"), found["sentences"]
    said = found["sentences"][0]
    assert said.startswith("rank 2 is stopped (T"), said
    # The others wait for it, each where gloo left it: the ring all_reduce can let one rank past the
    # reducer into Lightning's next broadcast while the rest still wait in the reducer (seen in CI).
    assert said.endswith("they wait for it") and said.count("under lightning's") >= 2, said
    waiting = {int(n) for group in re.findall(r"; ranks? ([\d, ]+) waits? in ", said) for n in group.split(", ")}
    assert waiting == {0, 1, 3}, said
    assert all(r["framework"]["package"] == "lightning" for r in found["per_rank"]), found["per_rank"]
    assert v["hang"] == "supports" and v["collective-mismatch"] == "inconclusive", v
    os.kill(j.pids[2], signal.SIGCONT)


def _lightning_ranks(data: dict) -> dict[int, dict]:
    return {int(r["rank"]): r for r in data["records"] if r["kind"] == "rank"}


@pytest.mark.slow
def test_a_healthy_lightning_job_whose_rank_0_started_workers_has_all_four_ranks_here_and_reads_healthy(
        tmp_path: Path, launch):
    """Issue 45: the script the user started is Lightning's launcher and rank 0; its spawn
    data-loader workers and their resource tracker carry LOCAL_RANK=0 (Lightning's os.environ),
    its own /proc environment no rank. All four ranks are found, none elsewhere, read healthy;
    with --param match too (the launcher was taken for a launcher only there)."""
    d = project(tmp_path)
    j = launch("lightning", 4, "--workers", "1", "--mp-context", "spawn")
    assert j.pids[0] == j.proc.pid  # rank 0 is the process the user started
    data, healthy, v = ddp_stacks(d)
    for _ in range(2):  # as the DDP test: on 2 busy cores 5 samples may not tell; a user reads again with more
        if healthy["verdict"] == "healthy" and healthy["straggler_tested"]:
            break
        assert healthy["verdict"] in ("healthy", "waiting") and healthy["odd_ranks"] == [], healthy["sentences"]
        data, healthy, v = ddp_stacks(d, "--param", "samples=20")
    ranks = _lightning_ranks(data)
    assert {k: r["pid"] for k, r in ranks.items()} == j.pids, healthy["sentences"]
    assert ranks[0]["rank_from"] == "launcher" and {r["local_world"] for r in ranks.values()} == {4}
    assert {r["master_here"] for r in ranks.values()} == {True}
    assert (healthy["missing"], healthy["elsewhere"]) == (0, False)
    assert not any("elsewhere" in s or "not found" in s for s in healthy["sentences"]), healthy["sentences"]
    assert healthy["verdict"] == "healthy" and healthy["odd_ranks"] == [], healthy["sentences"]
    assert v["hang"] == "refutes", v
    # rank 0's own children (a worker, the resource tracker) are its helpers, beside the others' helpers
    zeros = [h for h in healthy["helpers"] if h["ppid"] == j.pids[0]]
    assert len(zeros) == 2 and {h["rank"] for h in zeros} == {"0"}, healthy["helpers"]

    data, found, _v = ddp_stacks(d, "--param", f"match={LIGHTNING_JOB.name}")
    assert {k: r["pid"] for k, r in _lightning_ranks(data).items()} == j.pids, found["sentences"]
    assert found["missing"] == 0 and not any("elsewhere" in s or "not found" in s for s in found["sentences"])


@pytest.mark.slow
def test_a_lightning_jobs_launcher_stopped_from_outside_is_rank_0_named_the_odd_one(tmp_path: Path, launch):
    """Issue 45: rank 0 is the launcher itself; SIGSTOPped, it is the rank named, the other
    three wait for it, and no rank is said to be elsewhere."""
    d = project(tmp_path)
    j = launch("lightning", 4, "--workers", "1", "--mp-context", "spawn")
    os.kill(j.proc.pid, signal.SIGSTOP)
    try:
        time.sleep(1.5)
        data, found, v = ddp_stacks(d)
    finally:
        os.kill(j.proc.pid, signal.SIGCONT)
    assert {k: r["pid"] for k, r in _lightning_ranks(data).items()} == j.pids, found["sentences"]
    assert found["verdict"] == "stopped", found["sentences"]
    [odd] = found["odd_ranks"]
    assert (odd["rank"], odd["kind"], odd["state"]) == ("rank 0", "stopped", "T"), found["sentences"]
    said = found["sentences"][0]
    assert said.startswith("rank 0 is stopped (T: a stop signal, job control or a debugger left it stopped)"), said
    assert said.endswith("they wait for it"), said
    waiting = {int(n) for group in re.findall(r"; ranks? ([\d, ]+) waits? in ", said) for n in group.split(", ")}
    assert waiting == {1, 2, 3}, said
    assert found["missing"] == 0 and not any("elsewhere" in s or "not found" in s for s in found["sentences"])
    assert v["hang"] == "supports", v
    before = j.steps()
    time.sleep(1.5)
    assert j.steps() > before  # continued, the job goes on


@pytest.mark.slow
def test_ranks_torch_multiprocessing_spawn_started_are_read_from_torch_and_a_stopped_one_is_named(tmp_path: Path, launch):
    """The tutorial's other launch (multigpu.py): mp.spawn puts no rank in the environment. The
    rank is torch's own spawn frame's `i`; nothing else of the job's locals leaves the machine."""
    d = project(tmp_path)
    j = launch("spawn")
    data, found, _v = ddp_stacks(d)
    ranks = {int(r["rank"]): r for r in data["records"] if r["kind"] == "rank"}
    assert {k: r["pid"] for k, r in ranks.items()} == j.pids, found["sentences"]
    assert {(r["rank_from"], r["world_size"], r["world_from"]) for r in ranks.values()} == {
        ("torch.multiprocessing.spawn", "4", "world_size")}
    result = next(r for r in data["records"] if r["kind"] == "result")
    assert [x["pid"] for x in result["launchers"]] == [j.proc.pid]
    assert found["missing"] == 0 and not any("elsewhere" in s or "world size taken" in s for s in found["sentences"])
    output = sleuth(d, "output", str(data["run_id"])).stdout
    assert "pytorch-errorfile" not in output and "SpawnProcess" not in output  # the spawn frames' other locals

    os.kill(j.pids[1], signal.SIGSTOP)
    time.sleep(1.5)
    _data, found, v = ddp_stacks(d)
    [odd] = found["odd_ranks"]
    assert (odd["rank"], odd["kind"], odd["state"]) == ("rank 1", "stopped", "T"), found["sentences"]
    said = found["sentences"][0]
    assert said.startswith("rank 1 is stopped (T") and said.endswith("they wait for it"), said
    assert f"ranks 0, 2, 3 wait in Trainer._run_batch at ddp_job.py:{BACKWARD}" in said, said
    assert v["hang"] == "supports" and v["collective-mismatch"] != "supports", v
    os.kill(j.pids[1], signal.SIGCONT)

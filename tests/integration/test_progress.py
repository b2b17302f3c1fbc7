"""A long probe says how far it is (issue 46): compile-race's runs side by side, each one's
output whole and in order, and a ``progress`` record at each start and end — shown by the CLI
as it comes, by the UI in the run header, and by the demo, one line per run that ended.

The entry here is a small threaded script, not the drafter: what is tested is how the runs are
scheduled and said, which needs no compile."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import SLEUTH
from support.pilot import select, settle, text_of

JOB = '''\
import argparse, os, threading, time
ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=2)
args = ap.parse_args()
def work(i):
    for k in range(3):
        print(f"job {os.getpid()} thread {i} step {k}", flush=True)
        time.sleep(0.2)
threads = [threading.Thread(target=work, args=(i,)) for i in range(args.threads)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(f"job {os.getpid()} done", flush=True)
'''


def project(root: Path, trials: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "job.py").write_text(JOB)
    (root / "sleuth.toml").write_text(
        f'[targets.local]\npython = "{sys.executable}"\n\n'
        f'[probes.compile-race]\nentry = "job.py"\ntrials = {trials}\nthreaded_args = ["--threads", "2"]\n'
        'control_args = ["--threads", "1"]\ncold_cache = false\n'
    )
    subprocess.run([SLEUTH, "new", "progress"], cwd=root, check=True, capture_output=True)
    return root


@pytest.mark.slow
def test_runs_go_side_by_side_each_said_whole_and_in_order(tmp_path: Path):
    root = project(tmp_path / "proj", trials=3)
    env = {**os.environ, "SLEUTH_RACE_SIDE_BY_SIDE": "2"}
    proc = subprocess.run([SLEUTH, "probe", "run", "compile-race", "--no-agent"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the CLI says each step as it comes, in words
    said = re.findall(r"^⟨progress⟩ (.*)$", proc.stdout, re.M)
    assert said[0] == "trial 1 of 3 started (2 side by side) · 0 of 4 runs done, 1 running · 0 s", said
    ended = [s for s in said if " started" not in s]
    assert len(ended) == 4 and all(re.search(r" passed \(\d threads?\) in \d+ s · \d of 4 runs done", s) for s in ended), said
    assert ended[-1].startswith("single-thread control passed") and "4 of 4 runs done, 0 running" in ended[-1], said
    # the records: two at a time, never more; the result's fields as before
    out = subprocess.run([SLEUTH, "output", "1"], cwd=root, capture_output=True, text=True, check=True).stdout
    records = [json.loads(line.split(" ", 1)[1]) for line in out.splitlines() if line.startswith("@@sleuth:")]
    progress = [r for r in records if r["kind"] == "progress"]
    assert max(r["running"] for r in progress) == 2 and {r["side_by_side"] for r in progress} == {2}
    (result,) = [r for r in records if r["kind"] == "result"]
    assert (result["trials"], result["failed_trials"], result["control_failed"], result["threads"]) == (3, 0, 0, 2)
    assert [r["trial"] for r in result["runs"]] == ["trial 1 of 3", "trial 2 of 3", "trial 3 of 3", "single-thread control"]
    # each run's output is said whole under its own header: runs side by side never interleave
    blocks = re.split(r"^--- sleuth: (.+?): job\.py.*$", out, flags=re.M)[1:]
    assert len(blocks) == 8, out
    for name, body in zip(blocks[::2], blocks[1::2]):
        pids = set(re.findall(r"^job (\d+) ", body, re.M))
        assert len(pids) == 1, (name, body)


@pytest.mark.slow
def test_one_after_another_when_asked(tmp_path: Path):
    root = project(tmp_path / "proj", trials=2)
    env = {**os.environ, "SLEUTH_RACE_SIDE_BY_SIDE": "1"}
    proc = subprocess.run([SLEUTH, "probe", "run", "compile-race", "--no-agent", "--json"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    progress = [r for r in json.loads(proc.stdout)["records"] if r["kind"] == "progress"]
    assert max(r["running"] for r in progress) == 1
    assert [r["run"] for r in progress if r["event"] == "ended"] == ["trial 1 of 2", "trial 2 of 2", "single-thread control"]


@pytest.mark.slow
@pytest.mark.tui
async def test_the_run_header_says_how_far_a_long_run_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from sleuth.app.tui import SleuthApp
    from sleuth.sessions import Workspace

    root = project(tmp_path / "proj", trials=2)
    monkeypatch.chdir(root)  # where `sleuth` is opened: the local target runs there
    app = SleuthApp.live(Workspace(root))
    seen: set[str] = set()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await select(pilot, "probe", "compile-race", hypothesis="compile-race")
        await pilot.press("r")
        end = time.monotonic() + 90
        while time.monotonic() < end:
            await pilot.pause(0.1)
            header = text_of(app, "#run-header")
            if "running" in header:
                seen.add(header)
            if app.screen.live_run is None and seen:
                break
        await settle(pilot)
        pinned = text_of(app, "#pinned")
    said = [h for h in seen if "runs done" in h]
    assert said, seen
    assert any(re.search(r"running [0-9.]+ s · .*(trial \d of 2|single-thread control) \w+.* · \d of 3 runs done", h)
               for h in said), said
    assert "▸ result" in pinned and "progress" not in pinned, pinned


def test_the_demo_says_each_run_as_it_ends(capsys):
    from sleuth.app.demo import Progress

    p = Progress()
    p.live = False
    p.record({"kind": "progress", "event": "started", "run": "trial 1 of 5", "done": 0, "of": 5, "running": 1,
              "side_by_side": 2, "said": "trial 1 of 5 started (2 side by side) · 0 of 5 runs done, 1 running · 0 s"})
    p.record({"kind": "progress", "event": "started", "run": "trial 2 of 5", "done": 0, "of": 5, "running": 2,
              "side_by_side": 2, "said": "trial 2 of 5 started …"})
    p.record({"kind": "progress", "event": "ended", "run": "trial 2 of 5", "done": 1, "of": 5, "running": 1,
              "said": "trial 2 of 5 passed (4 threads) in 21 s · 1 of 5 runs done, 1 running · 21 s"})
    p.record({"kind": "result", "trials": 5})
    assert capsys.readouterr().out.splitlines() == [
        "      5 runs, 2 side by side",
        "      trial 2 of 5 passed (4 threads) in 21 s · 1 of 5 runs done, 1 running · 21 s",
    ]

"""The race kit on the stack users really have (issue 42): a drafter built on HuggingFace
transformers whose ``torch.compile(flex_attention)`` lives inside the library, written as a
user writes one (tests/fixtures/hf_drafter/train.py: its own argparse, worker threads, each
with a tiny random-init Llama; nothing downloaded). sleuth runs it as written: the flags for
the threaded run and the single-thread control are the user's, in sleuth.toml."""

from __future__ import annotations

import json
import re
import shutil
from importlib.metadata import version
from pathlib import Path

import pytest
from support.cli import sleuth, verdicts

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "hf_drafter" / "train.py"
CONFIG = """
[probes.compile-race]
entry = "train.py"
args = ["--steps", "3"]
control_args = ["--workers", "1"]
trials = 2
"""


@pytest.fixture
def hunt(tmp_path: Path) -> Path:
    d = tmp_path / "hunt"
    d.mkdir()
    shutil.copy(FIXTURE, d / "train.py")
    sleuth(d, "init")
    with open(d / "sleuth.toml", "a") as f:
        f.write(CONFIG)
    return d


@pytest.mark.slow
def test_the_race_reproduces_on_the_users_script_as_written_with_the_control_passing(hunt):
    drafter = hunt / "train.py"  # the user's script, untouched by the probe
    before = drafter.read_bytes()
    fp = json.loads(sleuth(hunt, "probe", "run", "env-fingerprint", "--json").stdout)
    data = json.loads(sleuth(hunt, "probe", "run", "compile-race", "--json", check=False, timeout=900).stdout)
    assert data["classification"] == "completed", data["reason"]
    result = next(r for r in data["records"] if r["kind"] == "result")
    threaded = [r for r in result["runs"] if not r.get("control")]
    control = next(r for r in result["runs"] if r.get("control"))
    # the threads the user's code started, measured in its own process (tqdm's monitor is said apart)
    assert result["threads"] == 3 and [r["threads"] for r in threaded] == [3, 3], result
    assert control["threads"] == 1 and control["exit"] == 0 and control["died"] == 0, control
    assert result["control_failed"] == 0 and result["failed_trials"] >= 1, result["said"]
    for trial in threaded:  # a failed trial says how many workers died and of what, and where
        if trial["failed"]:
            assert trial["exit"] == 1 and trial["died"] >= 1 and sum(trial["died_of"].values()) == trial["died"]
            assert all(d["thread"].startswith("drafter-") and d["at"] for d in trial["deaths"]), trial["deaths"]
    assert "single-thread control passed" in result["said"] and "threads died" in result["said"], result["said"]
    said = {e["hypothesis"]: e for e in data["evidence"]}
    assert {"hypothesis": "compile-race", "verdict": "supports"} in verdicts(data), data["evidence"]
    assert "control_failed 0" in said["compile-race"]["why"] and "failed_trials" in said["compile-race"]["why"]
    assert {"hypothesis": "concurrent-compile", "verdict": "supports"} in verdicts(data)  # compiles measured after the workers started
    assert not any(e["verdict"] == "refutes" for e in data["evidence"]), data["evidence"]
    # what killed the threads is the is_compiling face upstream knows (the kernels wrapper's errors)
    died_of = {t for r in threaded for t in r["died_of"]}
    if died_of & {"TypeError", "AttributeError"}:
        assert "pytorch#136833" in {k["id"] for k in data["known"]}, data["known"]
    assert drafter.read_bytes() == before
    # no false drift with transformers installed: tokenizers is a package, not a secret
    for run in (fp, data):
        assert not [f for f in run["findings"] if "<redacted>" in f["text"] or "tokenizers" in f["text"]], run["findings"]
    events = json.loads(sleuth(hunt, "events", "--json").stdout)
    seen = [e["data"]["state"]["env"]["distributions"]["tokenizers"] for e in events
            if e["kind"] == "state.observed" and "distributions" in e["data"]["state"].get("env", {})]
    assert seen and set(seen) == {version("tokenizers")}, seen


def test_the_lock_gates_the_workers_first_pass_in_the_users_own_code(hunt):
    """The compile is inside transformers: the lock changes no installed package; in the user's
    file it gates the worker's training loop (not its setup loop over parameters), keeps the
    comment where it was, applies once, and reverts byte-exact."""
    drafter = hunt / "train.py"
    before = drafter.read_bytes()
    preview = json.loads(sleuth(hunt, "remedy", "preview", "lock", "train.py", "--json").stdout)
    assert preview["blocked"] == [], preview
    started = next(i for i, line in enumerate(FIXTURE.read_text().splitlines(), 1) if "threading.Thread(target=drafter" in line)
    assert f"drafter() runs in worker threads (started at line {started})" in json.dumps(preview["findings"])
    diff = preview["diff"]
    assert "+            for step in range(args.steps):" not in diff and "+                with _SLEUTH_FIRST_PASS:" in diff
    assert "-        for p in model.model.parameters():" not in diff  # the setup loop is left alone
    sleuth(hunt, "remedy", "apply", "lock", "train.py")
    assert sleuth(hunt, "remedy", "apply", "lock", "train.py").stdout.strip().endswith("nothing changed")
    compile(drafter.read_text(), "train.py", "exec")
    sleuth(hunt, "remedy", "revert", "train.py")
    assert drafter.read_bytes() == before


def test_a_worker_that_waits_on_the_others_in_its_loop_is_said_and_left_alone(hunt):
    (hunt / "train.py").write_text(
        "import threading\n\nbarrier = threading.Barrier(2)\n\n\ndef work(i):\n    for step in range(3):\n"
        "        print(i, step)\n        barrier.wait()\n\n\n"
        "ts = [threading.Thread(target=work, args=(i,)) for i in range(2)]\nfor t in ts:\n    t.start()\n"
    )
    proc = sleuth(hunt, "remedy", "preview", "lock", "train.py", check=False)
    assert "work() waits on other threads in its loop (.wait())" in proc.stdout + proc.stderr
    assert "_SLEUTH_FIRST_PASS" not in proc.stdout


def readme_walkthrough() -> tuple[str, list[list[str]]]:
    """The README's "On your own code": its sleuth.toml block and its commands, word for word
    (each command as the shell splits it, its trailing comment dropped)."""
    import shlex

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## On your own code", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
    (toml,) = [body for lang, body in blocks if lang == "toml"]
    commands = [shlex.split(line, comments=True) for lang, body in blocks if lang == "sh"
                for line in body.splitlines() if line.startswith("sleuth ")]
    return toml, commands


@pytest.mark.slow
def test_the_readmes_own_code_walkthrough_holds_on_a_transformers_drafter(tmp_path):
    """Issue 42: the README's "On your own code" followed as written, on a transformers drafter
    (the fixture, standing for the user's train.py): the race supported with the control
    passing, the compile sites named in the library, the lock's diff in the user's file,
    verified fixed (strong), the user's bytes back."""
    toml, commands = readme_walkthrough()
    hunt = tmp_path / "my-drafter"
    hunt.mkdir()
    shutil.copy(FIXTURE, hunt / "train.py")
    before = (hunt / "train.py").read_bytes()
    sleuth(hunt, "init")
    (hunt / "sleuth.toml").write_text(toml)  # the README's sleuth.toml, as the user writes it
    assert [c[:3] for c in commands] == [["sleuth", "probe", "run"], ["sleuth", "probe", "run"],
                                         ["sleuth", "remedy", "preview"], ["sleuth", "remedy", "apply"],
                                         ["sleuth", "probe", "run"], ["sleuth", "remedy", "revert"]], commands
    said = []
    for cmd in commands:
        out = sleuth(hunt, *cmd[1:], check=False, timeout=1200)
        assert out.returncode in (0, 1), (cmd, out.stderr[-2000:])  # 1: a run that failed, said, never a crash
        said.append(out.stdout)
    race, sites, preview, _apply, verify, revert = said
    assert "supports compile-race: " in race and "control_failed 0" in race, race[-3000:]
    assert "transformers.integrations.flex_attention:" in sites, sites[-3000:]  # the library's compile, named
    assert "train.py" in preview and "_SLEUTH_FIRST_PASS" in preview, preview[-3000:]  # the diff, in the user's file
    verified = [line for line in verify.splitlines() if line.strip().startswith("✔ verified lock #")]
    assert verified and ": fixed" in verified[0] and "strong" in verified[0], verify[-3000:]
    assert "failed_trials 0" in verify or "0 of 7" in verify, verify[-3000:]
    assert (hunt / "train.py").read_bytes() == before, revert

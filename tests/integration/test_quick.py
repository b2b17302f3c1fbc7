"""A later command handed to the running agent broker and run in a child forked from it
(app/quick.py, probes/broker_exec.ExecServer): the same answer, exit status, streams and
Ctrl-C as run here; a broker of other code refuses and the command runs here."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from support.cli import SLEUTH, sleuth


def _status(d: Path) -> dict:
    return json.loads(sleuth(d, "agent", "status", "--json").stdout)


@pytest.fixture
def project(make_project):
    d = make_project()
    yield d
    sleuth(d, "agent", "stop", check=False)


def test_the_exec_socket_is_the_agent_sockets_sibling(tmp_path: Path):
    from sleuth.app.quick import exec_socket
    from sleuth.probes.broker import broker_socket

    short = tmp_path / ".sleuth"
    deep = tmp_path.joinpath(*(["d" * 30] * 4), ".sleuth")
    for d in (short, deep):
        d.mkdir(parents=True)
        assert exec_socket(d) == broker_socket(d).with_suffix(".exec"), d


@pytest.mark.slow
def test_a_later_command_is_run_by_the_broker_with_the_same_answers(project: Path):
    first = json.loads(sleuth(project, "probe", "run", "--shell", "echo one", "--json").stdout)
    assert first["classification"] == "completed" and _status(project)["commands"] == 0  # it started the broker
    second = sleuth(project, "probe", "run", "--shell", "echo two; echo err >&2", "--force")
    assert "two" in second.stdout and "err" in second.stderr and "#2 shell on local: completed" in second.stdout
    assert _status(project)["commands"] == 1  # run in a child of the broker
    # the exit status comes back: bad input is 2 with its one line; a refused retest is 3
    bad = sleuth(project, "output", "99", check=2)
    assert bad.stderr.startswith("sleuth: error:") and "Traceback" not in bad.stderr
    probe = project / "same.py"
    probe.write_text('PROBE = {"id": "same", "title": "same", "fork": True}\nemit("result", ok=True)\n')
    sleuth(project, "probe", "run", "--script", str(probe))
    retest = sleuth(project, "probe", "run", "--script", str(probe), check=3)  # no terminal: not asked, refused
    assert "circular retest" in retest.stderr
    assert _status(project)["commands"] == 4
    # what it recorded is in the session, as if run here
    events = json.loads(sleuth(project, "events", "--json").stdout)
    assert [e["data"]["run"] for e in events if e["kind"] == "run.finished"] == [1, 2, 3]


@pytest.mark.slow
def test_ctrl_c_at_the_client_interrupts_the_command_in_the_broker(project: Path):
    sleuth(project, "probe", "run", "--shell", "true")  # the broker is up
    marker = f"sleuth-quick-{os.getpid()}-{time.monotonic_ns()}"
    proc = subprocess.Popen([SLEUTH, "probe", "run", "--shell", f"echo started; exec sleep 300 # {marker}"],
                            cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "started"
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and marker in subprocess.run(["ps", "-eo", "args"], capture_output=True,
                                                                   text=True).stdout:
        time.sleep(0.2)
    assert marker not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    runs = [e for e in json.loads(sleuth(project, "events", "--json").stdout) if e["kind"] == "run.finished"]
    assert runs[-1]["data"]["classification"] == "killed"


@pytest.mark.slow
def test_a_broker_of_other_code_refuses_and_the_command_runs_here(project: Path):
    from sleuth.app.quick import exec_socket

    sleuth(project, "probe", "run", "--shell", "true")  # the broker is up
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(exec_socket(project / ".sleuth")))
        request = {"op": "exec", "argv": ["status"], "cwd": str(project), "env": {}, "digest": "another sleuth"}
        socket.send_fds(s, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
        reply = json.loads(s.makefile("rb").readline())
    assert "refused" in reply and "another sleuth" in reply["refused"]
    assert _status(project)["commands"] == 0  # the refused one never ran (agent commands are never handed over)


@pytest.mark.slow
def test_a_command_under_another_umask_or_ulimit_behaves_as_run_here(project: Path):
    """Issue 35: a served command took the broker's umask and resource limits, not the
    caller's: a postmortem exported under `umask 077` came out world-readable, a probe under
    `ulimit -n 512` saw the broker's limit. The broker steps aside for them now."""
    sleuth(project, "probe", "run", "--shell", "true")  # starts the broker (umask and limits of this shell)
    assert _status(project)["pid"]

    def sh(line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", line], cwd=project, capture_output=True, text=True, timeout=120)

    served = sh(f"{SLEUTH} export -o open.md")  # the same umask as the broker: served
    assert served.returncode == 0, served.stderr
    assert _status(project)["commands"] >= 1
    private = sh(f"umask 077; {SLEUTH} export -o private.md")
    assert private.returncode == 0, private.stderr
    assert (project / "private.md").stat().st_mode & 0o777 == 0o600
    soft = sh(f"ulimit -n 512; {SLEUTH} probe run --force --shell 'echo limit=$(ulimit -n)'")
    assert soft.returncode == 0, soft.stderr
    assert "limit=512" in soft.stdout, soft.stdout
    assert _status(project)["stepped_aside"] >= 2

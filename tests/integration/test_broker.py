"""Agents that outlive one command, against the real sshd through the jump host: the second
`sleuth probe run` reuses the agent the first started (through the broker), `sleuth agent
status|stop`, the socket is the user's alone, an edited target gets a new agent, and nothing
is left running after stop, the idle timeout or a kill -9 of the broker."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
from support.cli import SLEUTH, sleuth
from support.remote import agents_left

# what a test here counts at the far end is its own: idle brokers of earlier tests are stopped
pytestmark = pytest.mark.usefixtures("no_idle_brokers")


@pytest.fixture
def project(make_project, sshd) -> Path:
    return make_project(toml=sshd.toml("ct200"))


def status(d: Path, **env: str) -> dict:
    return json.loads(subprocess.run([SLEUTH, "agent", "status", "--json"], cwd=d, capture_output=True, text=True,
                                     check=True, env={**os.environ, **env}).stdout)


def run_json(d: Path, *more: str, env: dict | None = None) -> dict:
    proc = subprocess.run([SLEUTH, "probe", "run", "--target", "ct200", "--json", *more], cwd=d, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def gone(pid: int, seconds: float = 15.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_the_second_command_reuses_the_agent_and_stop_ends_it(project, sshd):
    first = run_json(project, "--shell", "echo one")
    assert first["classification"] == "completed" and "own session" not in first["reason"]
    s1 = status(project)
    assert s1["running"] and [a["target"] for a in s1["agents"]] == ["ct200"]
    agent = s1["agents"][0]["pid"]
    sock = Path(s1["socket"])
    assert sock == project / ".sleuth" / "agents.sock"
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600 and sock.stat().st_uid == os.getuid()
    second = run_json(project, "--shell", "echo two")
    assert second["classification"] == "completed"
    s2 = status(project)
    assert s2["pid"] == s1["pid"] and [a["pid"] for a in s2["agents"]] == [agent] and s2["runs"] >= 4
    # every byte still stored, through the broker
    assert sleuth(project, "output", str(second["run_id"])).stdout.strip().endswith("two")
    out = sleuth(project, "agent", "stop").stdout
    assert "1 agent(s) closed" in out
    assert gone(s1["pid"]) and agents_left(sshd) == []
    assert not sock.exists() and status(project) == {"running": False}


@pytest.mark.slow
def test_an_edited_target_gets_a_new_agent(project, sshd):
    run_json(project, "--shell", "echo before")
    toml = project / "sleuth.toml"
    toml.write_text(toml.read_text() + 'env = { SLEUTH_EDITED = "yes" }\n')  # the user edits ct200 between runs
    after = run_json(project, "--shell", "echo $SLEUTH_EDITED")
    assert sleuth(project, "output", str(after["run_id"])).stdout.strip().endswith("yes")
    agents = status(project)["agents"]
    assert len(agents) == 2 and {a["target"] for a in agents} == {"ct200"} and len({a["definition"] for a in agents}) == 2
    sleuth(project, "agent", "stop")
    assert agents_left(sshd) == []


@pytest.mark.slow
def test_idle_timeout_and_a_killed_broker_leave_nothing_running(project, sshd):
    run_json(project, "--shell", "true", env={"SLEUTH_AGENT_IDLE": "2"})
    s = status(project)
    assert s["idle_s"] == 2.0
    assert gone(s["pid"], 20) and agents_left(sshd, 10) == []  # idle: the broker closed its agent and went
    assert status(project) == {"running": False}
    run_json(project, "--shell", "true  # a new broker")  # `true` again in the same state: a circular retest
    s = status(project)
    os.kill(s["pid"], signal.SIGKILL)  # no goodbye: the agent's connection ends with the broker
    assert gone(s["pid"]) and agents_left(sshd, 20) == []
    again = run_json(project, "--shell", "echo back")  # a stale socket: the next command starts a new broker
    assert again["classification"] == "completed" and status(project)["pid"] != s["pid"]
    sleuth(project, "agent", "stop")


def test_no_agent_runs_in_a_session_of_its_own(project, sshd):
    data = run_json(project, "--shell", "echo alone", "--no-agent")
    assert data["classification"] == "completed"
    assert status(project) == {"running": False}


@pytest.mark.slow
def test_a_local_run_happens_where_the_command_was_given(tmp_path):
    """The broker's agent lives on between commands; a local run still starts in the
    command's own directory (relative entry paths), not in the broker's."""
    d = tmp_path / "proj"
    (d / "sub").mkdir(parents=True)
    sleuth(d, "init")
    for where in (d, d / "sub"):
        data = json.loads(sleuth(where, "probe", "run", "--shell", "pwd; ls", "--json", "--force").stdout)
        out = sleuth(where, "output", str(data["run_id"])).stdout.splitlines()
        assert out[0] == str(where)
    # ... and with the command's environment: a variable changed between commands is seen
    for value in ("first", "second"):
        proc = subprocess.run([SLEUTH, "probe", "run", "--shell", "echo $SLEUTH_TEST_VAR", "--json", "--force"], cwd=d,
                              capture_output=True, text=True, env={**os.environ, "SLEUTH_TEST_VAR": value}, check=True)
        run = json.loads(proc.stdout)["run_id"]
        assert sleuth(d, "output", str(run)).stdout.strip() == value
    assert len(status(d)["agents"]) == 1  # one agent served them all
    sleuth(d, "agent", "stop")


BLOB_SRC = (
    "import os\n"
    "blob = bytes(range(256)) * 4096 + b'{\"out\": \"stdout\", \"data\": \"\"}\\n\\x00'\n"
    "for i in range(3):\n"
    "    os.write(1, blob)\n"
    "    os.write(2, blob[::-1])\n"
)
BLOB = bytes(range(256)) * 4096 + b'{"out": "stdout", "data": ""}\n\x00'


def test_output_through_the_broker_arrives_byte_for_byte_as_frames_and_as_json_lines(tmp_path):
    """3 MiB of every byte value, a NUL and a line that looks like a broker message, on both
    streams: a command gets it whole through the broker (binary frames), and a command that
    does not ask for frames (an older sleuth) still gets JSON lines it can read."""
    import asyncio
    import base64
    import sys

    from sleuth.ipc.unixsock import caller_state
    from sleuth.probes import ProgramSpec, Target, execute
    from sleuth.probes.broker import BrokerClient, target_to_dict
    from sleuth.probes.protocol import build_program, new_nonce
    from support.remote import Sink

    d = tmp_path / "proj" / ".sleuth"
    d.mkdir(parents=True)
    target = Target("here", python=sys.executable)

    async def body():
        client = BrokerClient(d)
        try:
            sink = Sink()
            out = await execute(target, ProgramSpec(probe="t", source=BLOB_SRC, fork=True), sink, runner=client)
            assert out.classification == "completed", out.reason
            assert "own agent" not in out.via  # through the broker, not a fallback
            stdout = b"".join(x for s, x in sink.chunks if s == "stdout")
            stderr = b"".join(x for s, x in sink.chunks if s == "stderr")
            assert BLOB * 3 in stdout and stderr == BLOB[::-1] * 3
            # an older command: no "frames" in its request
            reader, writer = await asyncio.open_unix_connection(str(client.path), limit=1 << 26)
            program = build_program(ProgramSpec(probe="t", source=BLOB_SRC, fork=True), new_nonce())
            writer.write(json.dumps({"op": "run", "target": target_to_dict(target), "fork": True, "timeout": 60,
                                     "program": base64.b64encode(program).decode(), "cwd": str(tmp_path),
                                     "environ": dict(os.environ), "caller": caller_state()}).encode() + b"\n")
            got = {"stdout": b"", "stderr": b""}
            while line := await reader.readline():
                msg = json.loads(line)
                if "exit" in msg:
                    break
                got[msg["out"]] += base64.b64decode(msg["data"])
            writer.close()
            assert BLOB * 3 in got["stdout"] and got["stderr"] == BLOB[::-1] * 3
        finally:
            await client.ask("stop")

    asyncio.run(body())


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for pid {pid}")


@pytest.mark.slow
def test_a_slow_command_holds_the_far_end_back_instead_of_filling_the_broker(tmp_path):
    """400 MiB from a far end far faster than a command that stops reading for 3 s: the
    broker keeps at most its two bounds (the run's queue, the socket's) in memory, the far
    end waits, and every byte still arrives."""
    import asyncio
    import base64
    import sys

    from sleuth.ipc.unixsock import caller_state
    from sleuth.probes import ProgramSpec, Target
    from sleuth.probes.broker import BrokerClient, target_to_dict
    from sleuth.probes.protocol import build_program, new_nonce

    d = tmp_path / "proj" / ".sleuth"
    d.mkdir(parents=True)
    target = Target("here", python=sys.executable)
    src = "import os\nblock = b'x' * 1048575 + b'\\n'\nfor _ in range(400):\n    os.write(1, block)\n"

    async def body():
        client = BrokerClient(d)
        try:
            async def run(source: str, pause: float) -> int:
                program = build_program(ProgramSpec(probe="t", source=source, fork=True), new_nonce())
                reader, writer = await asyncio.open_unix_connection(str(client.path), limit=1 << 26)
                writer.write(json.dumps({"op": "run", "target": target_to_dict(target), "fork": True, "timeout": 120,
                                         "program": base64.b64encode(program).decode(), "cwd": str(tmp_path),
                                         "environ": dict(os.environ), "frames": "binary",
                                         "caller": caller_state()}).encode() + b"\n")
                got, paused = 0, False
                while True:
                    first = await reader.readexactly(1)
                    if first != b"\x00":
                        msg = json.loads(first + await reader.readline())
                        assert "exit" in msg and msg["exit"]["exit_status"] == 0, msg
                        break
                    head = await reader.readexactly(5)
                    got += len(await reader.readexactly(int.from_bytes(head[1:], "big")))
                    if not paused:
                        paused = True
                        await asyncio.sleep(pause)  # the command is busy: it reads nothing
                writer.close()
                return got

            broker = (await client.ask("status"))["pid"]  # (started by the first question)
            await run("emit('result', ok=True)", 0)  # the agent is up; the broker's memory as it idles
            before = _peak_rss_mb(broker)
            got = await run(src, 3.0)
            return got, _peak_rss_mb(broker) - before
        finally:
            await client.ask("stop")

    got, grew = asyncio.run(body())
    assert got >= 400 << 20
    assert grew < 100, f"the broker's peak memory grew by {grew:.0f} MB for a command that paused"


@pytest.mark.slow
def test_cancel_through_the_broker_kills_the_far_end_and_says_cancelled(tmp_path):
    """The UI's x and a command's Ctrl-C reach the far end through the broker: the child and
    what it started are killed, the run is killed ("cancelled after …"), and the agent serves the next run."""
    import asyncio
    import sys

    from sleuth.probes import ProgramSpec, Target, execute
    from sleuth.probes.broker import BrokerClient
    from support.remote import Sink

    d = tmp_path / "proj" / ".sleuth"
    d.mkdir(parents=True)
    target = Target("here", python=sys.executable)
    src = ("import subprocess, time\n"
           "child = subprocess.Popen(['sleep', '120'])\n"
           "emit('started', child=child.pid)\n"
           "time.sleep(120)\n")

    async def body():
        client = BrokerClient(d)
        cancel = asyncio.Event()
        started: list[int] = []

        def on_record(rec):
            if rec.get("kind") == "started":
                started.append(rec["child"])
                cancel.set()

        try:
            t0 = time.monotonic()
            out = await execute(target, ProgramSpec(probe="t", source=src, fork=True), Sink(), runner=client,
                                cancel=cancel, on_record=on_record)
            seconds = time.monotonic() - t0
            after = await execute(target, ProgramSpec(probe="t", source="emit('result', ok=True)", fork=True), Sink(),
                                  runner=client)
            return out, seconds, started, after
        finally:
            await client.ask("stop")

    out, seconds, started, after = asyncio.run(body())
    assert out.classification == "killed" and out.reason.startswith("cancelled"), (out.classification, out.reason)
    assert seconds < 30 and started and gone(started[0])  # the sleep the probe started is gone too
    assert after.classification == "completed"


def _alias_home(root: Path, sshd, identity: bool) -> Path:
    """A HOME whose ~/.ssh/config names the gpu host `gpu` (with the key, or leaving it to an
    ssh agent); no key files of its own."""
    home = root
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        f"Host gpu\n  HostName 127.0.0.1\n  Port {sshd.servers['gpu'].port}\n  User {sshd.user}\n"
        + (f"  IdentityFile {sshd.client_key}\n  IdentitiesOnly yes\n" if identity else "")
        + f"  UserKnownHostsFile {sshd.known_hosts}\n  StrictHostKeyChecking yes\n")
    (home / ".ssh").chmod(0o700)
    return home


@pytest.mark.slow
def test_a_command_from_another_home_or_ssh_agent_behaves_as_run_directly(tmp_path, sshd):
    """Issue 35: a later command was served by the broker with what the broker had when it
    started: another HOME (another ~/.ssh/config) failed with 'Name or service not known', a new
    terminal's SSH_AUTH_SOCK was not used. Now the broker steps aside for them, through the real
    sshd, and the command does what it does run directly."""
    d = tmp_path / "proj"
    d.mkdir()
    sleuth(d, "init")
    (d / "sleuth.toml").write_text((d / "sleuth.toml").read_text()
                                   + f'\n[targets.alias]\nssh = "gpu"\npython = "{sshd.python}"\nconnect_timeout = 5\n')
    base = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "SSH_AGENT_PID")}
    plain = tmp_path / "plain"
    (plain / ".ssh").mkdir(parents=True)
    with_key = _alias_home(tmp_path / "with-key", sshd, identity=True)

    def run(home: Path, *more: str, extra: dict | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([SLEUTH, "probe", "run", "--json", "--force", *more], cwd=d, capture_output=True,
                              text=True, timeout=120, env={**base, "HOME": str(home), **(extra or {})})

    try:
        first = run(plain, "--shell", "true")  # starts the broker, with a HOME that knows no `gpu`
        assert first.returncode == 0, first.stderr
        assert status(d, HOME=str(plain))["pid"]
        other = run(with_key, "--target", "alias", "--shell", "echo reached-$HOME")
        assert other.returncode == 0, other.stderr
        got = json.loads(other.stdout)
        assert got["classification"] == "completed", got
        assert "reached-" in sleuth(d, "output", str(got["run_id"])).stdout
        again = run(plain, "--target", "alias", "--shell", "true")  # the broker's own HOME: as directly, no `gpu`
        assert again.returncode == 1 and json.loads(again.stdout)["classification"] == "transport"
        assert status(d, HOME=str(plain))["stepped_aside"] >= 1
    finally:
        sleuth(d, "agent", "stop", check=False)

    # a new terminal's ssh agent: the broker started without one, the key is only in the agent
    agent_home = _alias_home(tmp_path / "agent-home", sshd, identity=False)
    sock = tmp_path / "agent.sock"
    agent = subprocess.run(["ssh-agent", "-a", str(sock), "-s"], capture_output=True, text=True, check=True)
    pid = int(agent.stdout.split("SSH_AGENT_PID=")[1].split(";")[0])
    try:
        key = tmp_path / "key"
        key.write_bytes(Path(sshd.client_key).read_bytes())
        key.chmod(0o600)
        subprocess.run(["ssh-add", str(key)], env={**base, "SSH_AUTH_SOCK": str(sock)}, check=True,
                       capture_output=True)
        key.unlink()
        no_agent = run(agent_home, "--target", "alias", "--shell", "true")  # starts the broker, no agent
        assert no_agent.returncode == 1, no_agent.stderr
        assert json.loads(no_agent.stdout)["classification"] == "transport"
        assert status(d, HOME=str(agent_home))["pid"]
        served = run(agent_home, "--target", "alias", "--shell", "echo by-agent", extra={"SSH_AUTH_SOCK": str(sock)})
        assert served.returncode == 0, served.stderr
        assert json.loads(served.stdout)["classification"] == "completed"
    finally:
        sleuth(d, "agent", "stop", check=False)
        os.kill(pid, signal.SIGTERM)

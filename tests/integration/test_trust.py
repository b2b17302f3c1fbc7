"""Issue 35: a command hands the broker its environment and its terminal only once the socket
is known to be its own user's. Another real user (nobody, through setpriv) listens where the
client looks — in a project's .sleuth/ that others can write to, in the long-path folder under
the temp directory, and behind a socket file that looks like ours — and receives nothing;
the command still runs, and says once why it did not use the broker."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from support.cli import SLEUTH, sleuth

SECRET = "s3cret-" + hashlib.sha256(b"issue 35").hexdigest()[:12]

LISTENER = r'''
import os, select, socket, sys
log, ready, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
socks = []
for p in paths:
    os.makedirs(os.path.dirname(p), exist_ok=True)
    s = socket.socket(socket.AF_UNIX)
    s.bind(p)
    os.chmod(p, 0o777)
    s.listen(8)
    socks.append(s)
open(ready, "w").write("ok")
while True:
    r, _, _ = select.select(socks, [], [])
    for s in r:
        conn, _ = s.accept()
        conn.settimeout(2)
        got = b""
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                got += data
        except OSError:
            pass
        with open(log, "ab") as f:
            f.write(b"connection to " + s.getsockname().encode() + b": " + str(len(got)).encode() + b" bytes\n" + got)
'''


@pytest.fixture
def outside():
    """A folder the other user can reach (pytest's tmp_path is 0700), and its cleanup."""
    if os.geteuid() != 0:
        pytest.skip("needs root to start a listener as another user (setpriv)")
    d = Path(tempfile.mkdtemp(prefix="sleuth-trust-"))
    d.chmod(0o777)
    procs: list[subprocess.Popen] = []
    yield d, procs
    for p in procs:
        p.kill()
        p.wait()
    subprocess.run(["rm", "-rf", str(d)], check=False)


def listen_as_nobody(where: Path, procs: list, *paths: Path) -> Path:
    script = where / "listener.py"
    script.write_text(LISTENER)
    log, ready = where / "heard.log", where / "ready"
    log.touch()
    log.chmod(0o666)
    procs.append(subprocess.Popen(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                                   "/usr/bin/python3", str(script), str(log), str(ready), *map(str, paths)]))
    end = time.monotonic() + 20
    while not ready.exists():
        assert time.monotonic() < end and procs[-1].poll() is None, "the listener did not start"
        time.sleep(0.05)
    return log


def run_owner(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SLEUTH, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MY_TOKEN": SECRET, **env})


def test_a_listener_in_a_sleuth_folder_others_can_write_to_gets_nothing(outside):
    where, procs = outside
    proj = where / "team"
    proj.mkdir()
    sleuth(proj, "init")
    dot = proj / ".sleuth"
    dot.chmod(0o777)  # a team folder others can write to (group write on a cluster is common)
    log = listen_as_nobody(where, procs, dot / "agents.exec", dot / "agents.sock")
    assert (dot / "agents.exec").stat().st_uid == 65534
    ran = run_owner(proj, "probe", "run", "--shell", "echo hi-$MY_TOKEN")
    assert ran.returncode == 0, ran.stderr
    assert f"hi-{SECRET}" in ran.stdout  # the command ran, here
    assert log.read_bytes() == b""  # not even a connection: the folder was refused first
    said = [line for line in ran.stderr.splitlines() if "not using the agent broker" in line]
    assert len(said) == 1 and f"{dot} is writable by its group and others (mode 777)" in said[0], ran.stderr
    assert SECRET not in ran.stderr
    status = run_owner(proj, "agent", "status")  # not "none runs": something is there, and it was refused
    assert status.returncode == 1 and "writable by its group and others" in status.stderr, status
    assert log.read_bytes() == b""


def test_a_listener_that_made_the_long_path_folder_first_gets_nothing(outside):
    where, procs = outside
    tmp = where / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)  # a shared temp directory, sticky, as /tmp is
    proj = where.joinpath(*(["d" * 30] * 3), "proj")  # .sleuth/agents.sock would be too long for a socket
    proj.mkdir(parents=True)
    sleuth(proj, "init")
    digest = hashlib.sha256(str((proj / ".sleuth").resolve()).encode()).hexdigest()[:16]
    private = tmp / f"sleuth-{os.getuid()}"  # where the owner's sockets would go: made by the other user first
    log = listen_as_nobody(where, procs, private / f"{digest}.exec", private / f"{digest}.sock")
    assert private.stat().st_uid == 65534
    ran = run_owner(proj, "probe", "run", "--shell", "echo hi-$MY_TOKEN", TMPDIR=str(tmp))
    assert ran.returncode == 0, ran.stderr
    assert f"hi-{SECRET}" in ran.stdout
    assert log.read_bytes() == b""
    assert f"{private} belongs to uid 65534, not to you" in ran.stderr, ran.stderr


def test_a_socket_file_made_to_look_like_ours_is_caught_by_its_peer(outside):
    """A private folder and a socket file of ours, but the process listening on it is another
    user's (SO_PEERCRED, read after connecting and before sending): nothing but the connection."""
    where, procs = outside
    proj = where / "proj"
    proj.mkdir()
    sleuth(proj, "init")
    dot = proj / ".sleuth"
    dot.chmod(0o777)
    log = listen_as_nobody(where, procs, dot / "agents.exec", dot / "agents.sock")
    for name in ("agents.exec", "agents.sock"):
        os.chown(dot / name, os.getuid(), os.getgid(), follow_symlinks=False)
    dot.chmod(0o700)  # the folder private again, the files ours: only the peer tells
    ran = run_owner(proj, "probe", "run", "--shell", "echo hi-$MY_TOKEN", "--force")
    assert ran.returncode == 0, ran.stderr
    assert f"hi-{SECRET}" in ran.stdout
    time.sleep(2.5)  # the listener logs a connection once it closes
    heard = log.read_bytes()
    assert SECRET.encode() not in heard and b"MY_TOKEN" not in heard
    assert all(line.endswith(b": 0 bytes") for line in heard.splitlines() if line.startswith(b"connection")), heard
    assert "is served by uid 65534, not by you" in ran.stderr, ran.stderr
    status = run_owner(proj, "agent", "stop")
    assert status.returncode == 1 and "is served by uid 65534, not by you" in status.stderr, status


def test_the_socket_paths_are_one_function_on_both_sides(tmp_path: Path):
    from sleuth.app.quick import exec_socket
    from sleuth.ipc.unixsock import agent_socket, command_socket
    from sleuth.probes.broker import broker_socket

    for d in (tmp_path / ".sleuth", tmp_path.joinpath(*(["d" * 30] * 4), ".sleuth")):
        d.mkdir(parents=True)
        assert broker_socket(d) == agent_socket(d) and exec_socket(d) == command_socket(d)
        assert command_socket(d).parent == agent_socket(d).parent

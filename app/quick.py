"""A command served by the broker that is already running, in a process forked from it.

The broker (`sleuth agent serve`) has sleuth imported and keeps the agents; a later command
(`sleuth probe run …` again) that starts Python, imports sleuth and connects to the broker
spends most of its time before the run itself. So the command line asks the broker first:
it hands over its argv, working directory, environment and its own stdin, stdout and stderr
(SCM_RIGHTS over the broker's owner-only Unix socket, checked first: ipc/unixsock.py), and the broker forks a child that runs
the command on those very file descriptors (a prompt reads your terminal; a pipe gets every
byte); this process waits and exits with the child's status. Ctrl-C here interrupts the
child. Where no broker runs, its code differs from this checkout's (an edited file, another
install), or it refuses, the command runs here as before; once the child has started, it is
never run twice.

Standard library only: this module decides before sleuth is imported.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import sys
from pathlib import Path

from ..ipc.unixsock import UntrustedSocket, caller_state, command_socket, connect_trusted, say_untrusted

__all__ = ["SERVED", "code_digest", "exec_socket", "try_broker"]

# commands a forked child can run as well as this process (the UI, the demo and the broker's
# own commands are not among them)
SERVED = {"probe", "target", "hypotheses", "hypothesis", "symptom", "note", "link", "baseline", "events", "output",
          "status", "export", "import", "remedy"}
_PACKAGES = ("app", "hypotheses", "probes", "sessions")


def code_digest(root: Path | None = None) -> str:
    """Which sleuth this is: the interpreter, its package folder and every module's size and
    mtime, and the distributions installed where this Python imports from (their dist-info
    names carry the versions): an edited file, another install, another venv on the same
    checkout or a dependency changed is another digest. A stat per module and a listing per
    import folder, no reading."""
    root = root or Path(__file__).resolve().parents[1]
    h = hashlib.sha256(f"{sys.executable}\0{sys.version}\0{root}".encode())
    for package in _PACKAGES:
        for folder, dirs, files in os.walk(root / package):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".py", ".toml", ".tcss")):
                    st = os.stat(os.path.join(folder, name))
                    h.update(f"{folder}/{name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    for folder in sys.path[1:]:  # [0] is the script's folder or the working directory: not the install
        try:
            names = sorted(n for n in os.listdir(folder or ".") if n.endswith((".dist-info", ".egg-info", ".pth")))
        except OSError:
            continue
        h.update(f"{folder}:{','.join(names)}\n".encode())
    return h.hexdigest()[:24]


def find_sleuth_dir(start: Path) -> Path | None:
    """The project's .sleuth/ as Workspace.find sees it: here or the nearest parent with a
    .sleuth/ or a sleuth.toml."""
    for d in (start, *start.parents):
        if (d / ".sleuth").is_dir() or (d / "sleuth.toml").is_file():
            return d / ".sleuth"
    return None


def exec_socket(sleuth_dir: Path) -> Path:
    """The broker's command socket (ipc/unixsock.py: the same function the broker uses)."""
    return command_socket(sleuth_dir)


def try_broker(argv: list[str]) -> int | None:
    """The command's exit status, run by the broker's fork; None to run it here."""
    if not argv or argv[0] not in SERVED or os.environ.get("SLEUTH_NO_BROKER_EXEC"):
        return None
    try:
        cwd = Path.cwd()
    except OSError:
        return None
    sleuth_dir = find_sleuth_dir(cwd)
    if sleuth_dir is None:
        return None
    path = exec_socket(sleuth_dir)
    try:
        sock = connect_trusted(path)  # checked before a byte of the environment is sent
    except UntrustedSocket as exc:
        say_untrusted(exc)
        return None
    except OSError:
        return None
    try:
        request = {"op": "exec", "argv": argv, "cwd": str(cwd), "env": dict(os.environ), "digest": code_digest(),
                   "caller": caller_state()}
        socket.send_fds(sock, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
    except OSError:
        sock.close()
        return None
    started = False
    previous = signal.getsignal(signal.SIGINT)

    def interrupt(_sig, _frame) -> None:  # Ctrl-C: the child gets it, as if it ran here
        try:
            sock.sendall(b'{"op": "signal"}\n')
        except OSError:
            pass

    signal.signal(signal.SIGINT, interrupt)
    try:
        reader = sock.makefile("rb")
        for line in reader:
            reply = json.loads(line)
            if "refused" in reply:
                return None
            if "started" in reply:
                started = True
            elif "exit" in reply:
                return int(reply["exit"])
    except (OSError, ValueError):
        pass
    finally:
        signal.signal(signal.SIGINT, previous)
        sock.close()
    if not started:
        return None
    print("sleuth: error: the agent broker went away while it ran this command; it was not run again "
          "(`sleuth agent status`)", file=sys.stderr)
    return 1

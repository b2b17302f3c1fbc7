"""Commands run in children forked from the agent broker (app/quick.py is the client): the
``.exec`` socket beside the broker's, each request's descriptors, the fork, the reaping."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..ipc.unixsock import peer_uid

if TYPE_CHECKING:
    from .broker_server import _Broker

__all__ = ["ExecServer", "can_reap"]


@dataclass
class _Received:
    """What a client has sent so far: the start of its request line and its descriptors."""

    buf: bytes = b""
    fds: list[int] = field(default_factory=list)


class ExecServer:
    """Commands run in children forked from the broker (app/quick.py is the client): on
    ``path`` (the agent socket's ``.exec`` sibling, 0600, the owner alone), a request line
    with the command's argv, cwd and environment arrives with its stdin, stdout and stderr
    (SCM_RIGHTS); a child forked from here runs ``handler(argv)`` on those descriptors and the
    client gets ``{"started": pid}``, then ``{"exit": status}``. A request from another
    sleuth (another ``digest``) is refused, and the client runs the command itself. A client
    that goes away takes its child with it; ``{"op": "signal"}`` is its Ctrl-C."""

    def __init__(self, broker: _Broker, path: Path, handler: Callable[[list[str]], int], digest: str) -> None:
        self.broker, self.path, self.handler, self.digest = broker, path, handler, digest
        self.children: dict[int, socket.socket] = {}
        self.sock: socket.socket | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            if os.path.lexists(self.path):
                self.path.unlink()
            sock.bind(str(self.path))
        finally:
            os.umask(old)
        sock.listen(16)
        sock.setblocking(False)
        self.sock = sock
        loop.add_reader(sock.fileno(), self._accept)

    def close(self) -> None:
        loop = asyncio.get_running_loop()
        for pid in list(self.children):
            _kill(pid, signal.SIGKILL)
        if self.sock is not None:
            loop.remove_reader(self.sock.fileno())
            self.sock.close()
            self.sock = None
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def _accept(self) -> None:
        assert self.sock is not None
        try:
            conn, _ = self.sock.accept()
        except (BlockingIOError, InterruptedError):
            return
        if hasattr(socket, "SO_PEERCRED") and peer_uid(conn) != os.getuid():
            conn.close()
            return
        conn.setblocking(False)
        asyncio.get_running_loop().add_reader(conn.fileno(), self._request, conn, _Received())

    def _request(self, conn: socket.socket, got: _Received) -> None:
        loop = asyncio.get_running_loop()
        try:
            data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, fds = b"", []
        got.fds += fds
        got.buf += data
        if data and b"\n" not in got.buf:
            return  # the rest of the line is on its way
        loop.remove_reader(conn.fileno())
        line = got.buf.split(b"\n", 1)[0]
        try:
            request = json.loads(line) if line else {}
        except ValueError:
            request = {}
        why = None
        if request.get("op") != "exec" or len(got.fds) != 3:
            why = "not a command request with its three descriptors"
        elif request.get("digest") != self.digest:
            why = "this broker runs another sleuth's code (edited since it started, or another install)"
        else:
            why = self.broker.differs(request)
        if why is not None:
            for fd in got.fds:
                os.close(fd)
            _send(conn, {"refused": why})
            conn.close()
            return
        self.broker.last = time.monotonic()
        self.broker.commands += 1
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns to the broker's loop
            _run_child(self.handler, request, got.fds)
        for fd in got.fds:
            os.close(fd)
        self.children[pid] = conn
        self.broker.active += 1
        _send(conn, {"started": pid})
        pidfd = os.pidfd_open(pid)
        loop.add_reader(pidfd, self._reaped, pid, pidfd)
        loop.add_reader(conn.fileno(), self._control, pid, conn)

    def _control(self, pid: int, conn: socket.socket) -> None:
        try:
            data = conn.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            if b'"signal"' in data:
                _kill(pid, signal.SIGINT)  # Ctrl-C at the client
            return
        asyncio.get_running_loop().remove_reader(conn.fileno())
        _kill(pid, signal.SIGTERM)  # the client went away: so does its command

    def _reaped(self, pid: int, pidfd: int) -> None:
        loop = asyncio.get_running_loop()
        loop.remove_reader(pidfd)
        os.close(pidfd)
        _pid, status = os.waitpid(pid, 0)
        conn = self.children.pop(pid, None)
        self.broker.active -= 1
        self.broker.last = time.monotonic()
        if conn is not None:
            try:
                loop.remove_reader(conn.fileno())
            except (ValueError, OSError):
                pass
            _send(conn, {"exit": os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else
                         128 + os.WTERMSIG(status)})
            conn.close()


def can_reap() -> bool:
    """Whether a child can be waited for on the loop (a pidfd), with no thread."""
    try:
        os.close(os.pidfd_open(os.getpid()))
        return True
    except (AttributeError, OSError):
        return False


def _send(conn: socket.socket, reply: dict[str, Any]) -> None:
    try:
        conn.setblocking(True)
        conn.sendall(json.dumps(reply).encode() + b"\n")
    except OSError:
        pass


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _run_child(handler: Callable[[list[str]], int], request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: the client's descriptors as 0, 1, 2, its directory and
    environment, default signals, no event loop of the broker's; run; exit with the status."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, 1 << 16)  # the broker's sockets, loop and agents' pipes are not ours
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        asyncio.events._set_running_loop(None)  # the broker's loop runs in the parent only
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own streams, for its life
        sys.stdout = open(1, "w", buffering=1 if os.isatty(1) else -1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.argv = ["sleuth", *request["argv"]]
        code = int(handler(list(request["argv"])) or 0)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # noqa: BLE001 - said, as the command itself would have
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)

"""Agents that outlive one command: a small local broker, like OpenSSH's ControlPersist.

``sleuth agent serve`` (started on demand by the first command that needs it, detached)
holds one resident agent per target definition and listens on a Unix socket owned by the
user (mode 0600, in the investigation's ``.sleuth/`` directory, or a 0700 directory of the
user's under the system's temp directory when that path is too long for a socket). Each
command connects, asks for one run, and gets the output and the exit back as it happens; a
command that stops listening cancels its run. After ``idle`` seconds with no request the
broker closes its agents (their processes at the far end end with them) and exits; ``sleuth
agent stop`` does the same now; ``sleuth agent status`` lists what it holds.

Protocol: newline-delimited JSON both ways. Request ``{"op": "run", "target": {...},
"fork": bool, "timeout": s, "program": base64, "frames": "binary"}``, then optionally
``{"op": "cancel"}``. Output comes back as binary frames between the JSON lines — a 0 byte,
the stream (0 stdout, 1 stderr) and the length as ``>BI``, then the bytes as they are — and
the run ends with the line ``{"exit": {...ExitInfo}}``. A request without ``"frames"`` (an
older sleuth) gets ``{"out": "stdout"|"stderr", "data": base64}`` lines instead; the
program itself travels base64 in the request line.
``{"op": "status"}`` and ``{"op": "stop"}`` answer one line. Only the socket's owner may
connect (checked with SO_PEERCRED where the system has it).

The broker itself (the server) is probes/broker_server.py; this module is what a command
needs: the client, the socket's path, targets as JSON.

Exceptions: :class:`BrokerError` (a ProbesError) when the broker cannot be reached or
started; the client then runs through an agent pool of its own and says so.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..ipc.unixsock import UntrustedSocket, agent_socket, caller_state, connect_trusted, folder_problem, say_untrusted
from .agent import AgentPool
from .config import Container, Fleet, Target
from .errors import BrokerError
from .hops import HopChain
from .transports import ExitInfo, OnOutput

__all__ = ["BrokerClient", "BrokerError", "broker_socket", "target_from_dict", "target_to_dict"]

DEFAULT_IDLE_S = 600.0
START_TIMEOUT_S = 15.0
MAX_LINE = 64 * 1024 * 1024
# Output goes from the broker to the command as binary frames (a 0 byte, the stream, the
# length, the bytes) between the JSON lines; base64 in JSON cost two passes over every byte
# at each end. A command that does not ask for frames gets JSON lines (an older sleuth).
_FRAME = b"\x00"
_FRAME_HEAD = struct.Struct(">BI")
_STREAMS = ("stdout", "stderr")
_SENDING_HIGH = 8 << 20  # output not yet taken by the command, before the run waits for it


# ---------------------------------------------------------------- targets over the socket


def target_to_dict(target: Target) -> dict[str, Any]:
    d = dataclasses.asdict(target)
    d["jump"] = list(target.jump)
    return d


def target_from_dict(d: dict[str, Any]) -> Target:
    d = dict(d)
    if d.get("container"):
        d["container"] = Container(**d["container"])
    if d.get("fleet"):
        fleet = dict(d["fleet"])
        fleet["names"], fleet["gpus"] = tuple(fleet.get("names", ())), tuple(fleet.get("gpus", ()))
        d["fleet"] = Fleet(**fleet)
    d["jump"] = tuple(d.get("jump", ()))
    return Target(**d)


def _definition_key(target: Target) -> str:
    """Agents are kept per definition, not per name: an edited sleuth.toml gets a new agent."""
    return hashlib.sha256(json.dumps(target_to_dict(target), sort_keys=True, default=str).encode()).hexdigest()[:12]


def broker_socket(sleuth_dir: Path) -> Path:
    """Where the broker of *sleuth_dir* listens (ipc/unixsock.py: one place for both sides); a
    folder another user can write to is refused (they could put a listener there)."""
    path = agent_socket(sleuth_dir, create=True)
    said = folder_problem(path.parent)
    if said:
        raise BrokerError(f"{said}: sleuth keeps no broker socket there (chmod go-w it)", untrusted=True)
    return path


# ---------------------------------------------------------------- the client


async def _message(reader: asyncio.StreamReader) -> tuple[str, bytes] | dict[str, Any] | None:
    """The broker's next message: (stream, bytes) for output, a dict for the rest, None when
    the broker went away (at a message's start or in its middle)."""
    try:
        first = await reader.readexactly(1)
        if first == _FRAME:
            code, length = _FRAME_HEAD.unpack(await reader.readexactly(_FRAME_HEAD.size))
            return _STREAMS[code], await reader.readexactly(length)
        line = first + await reader.readline()
    except asyncio.IncompleteReadError:
        return None
    if not line.endswith(b"\n"):
        return None
    return json.loads(line)


class BrokerClient:
    """What a command uses instead of its own AgentPool: ``run`` as AgentPool.run, through
    the broker of *sleuth_dir* (started if none listens). If the broker cannot be used, runs
    go through a pool of this client's own and the run's note says why."""

    def __init__(self, sleuth_dir: Path, idle_s: float | None = None, start: bool = True) -> None:
        self.sleuth_dir = Path(sleuth_dir)
        self.idle_s = float(idle_s if idle_s is not None else os.environ.get("SLEUTH_AGENT_IDLE", DEFAULT_IDLE_S))
        self.start = start
        self._fallback: AgentPool | None = None

    @property
    def path(self) -> Path:
        return broker_socket(self.sleuth_dir)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to this user's broker, checked before a byte is sent (ipc/unixsock.py)."""
        path = self.path
        try:
            return await self._trusted(path)
        except (FileNotFoundError, ConnectionRefusedError):
            if not self.start:
                raise BrokerError(f"no agent broker listens at {path}") from None
        self._spawn(path)
        end = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                return await self._trusted(path)
            except (FileNotFoundError, ConnectionRefusedError):
                if time.monotonic() > end:
                    log = self.sleuth_dir / "agents.log"
                    said = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
                    raise BrokerError(f"the agent broker did not start ({said[0] if said else 'no log'})") from None
                await asyncio.sleep(0.05)

    async def _here(self, why: str, chain: HopChain, program: bytes, on_output: OnOutput,
                    cancel: asyncio.Event | None, timeout: float | None, fork: bool) -> ExitInfo:
        """Run on this command's own agent pool (no broker, or one that stepped aside); the
        run's note says why."""
        if self._fallback is None:
            self._fallback = AgentPool(warm=("torch",))
        info = await self._fallback.run(chain, program, on_output, cancel=cancel, timeout=timeout, fork=fork)
        info.note = (info.note + "; " if info.note else "") + f"{why}: this command's own agent"
        return info

    @staticmethod
    async def _trusted(path: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            sock = connect_trusted(path)
        except UntrustedSocket as exc:
            say_untrusted(exc)  # once per process, on stderr; the run's note says it too
            raise BrokerError(f"not using the agent broker: {exc}; sent it nothing", untrusted=True) from None
        return await asyncio.open_unix_connection(sock=sock, limit=MAX_LINE)

    def _spawn(self, path: Path) -> None:
        self.sleuth_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.sleuth_dir / "agents.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            subprocess.Popen(
                [sys.executable, "-m", "sleuth", "agent", "serve", "--socket", str(path), "--idle", str(self.idle_s)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True,
                cwd=str(self.sleuth_dir),
            )
        finally:
            log.close()

    async def ask(self, op: str) -> dict[str, Any]:
        reader, writer = await self._connect()
        try:
            writer.write(json.dumps({"op": op}).encode() + b"\n")
            await writer.drain()
            line = await reader.readline()
            return json.loads(line) if line else {}
        finally:
            writer.close()

    async def run(self, chain: HopChain, program: bytes, on_output: OnOutput, *, cancel: asyncio.Event | None = None,
                  timeout: float | None = None, fork: bool = False) -> ExitInfo:
        try:
            reader, writer = await self._connect()
        except (BrokerError, OSError) as exc:
            return await self._here(f"no agent broker ({exc})", chain, program, on_output, cancel, timeout, fork)
        request = {"op": "run", "target": target_to_dict(chain.target), "fork": fork, "timeout": timeout,
                   "program": base64.b64encode(program).decode(), "cwd": os.getcwd(), "frames": "binary",
                   "caller": caller_state(),  # the broker steps aside where it would not act as this command
                   # a local run gets this command's environment, not the broker's (never stored)
                   "environ": dict(os.environ) if chain.target.is_local else None}
        writer.write(json.dumps(request).encode() + b"\n")
        await writer.drain()
        async def forward_cancel(cancel: asyncio.Event) -> None:  # the broker kills the run; its exit still comes
            await cancel.wait()
            writer.write(b'{"op": "cancel"}\n')
            await writer.drain()

        # (a task for the cancel, not one per message: a run's output is thousands of them)
        cancelling = asyncio.ensure_future(forward_cancel(cancel)) if cancel is not None else None
        try:
            while True:
                msg = await _message(reader)
                if msg is None:
                    return ExitInfo(transport_error="the agent broker went away during the run")
                if isinstance(msg, tuple):
                    pending = on_output(*msg)
                    if pending is not None:
                        await pending
                elif "out" in msg:
                    on_output(msg["out"], base64.b64decode(msg["data"]))
                elif "exit" in msg:
                    return ExitInfo(**msg["exit"])
                elif "aside" in msg:  # the broker would not run it as this command would: run it here
                    writer.close()
                    return await self._here(f"the agent broker stepped aside ({msg['aside']})", chain, program,
                                            on_output, cancel, timeout, fork)
                elif "error" in msg:
                    return ExitInfo(transport_error=f"agent broker: {msg['error']}")
        finally:
            if cancelling is not None:
                cancelling.cancel()
            writer.close()

    async def close(self) -> None:
        """The broker keeps its agents for the next command; only a fallback pool closes."""
        if self._fallback is not None:
            await self._fallback.close()

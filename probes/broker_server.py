"""The agent broker's server: ``sleuth agent serve`` holds one resident agent per target
definition and runs each command's request through it (the protocol is probes/broker.py's);
commands forked from it are probes/broker_exec.py's."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import os
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ..ipc.unixsock import UntrustedSocket, caller_state, connect_trusted, folder_problem, peer_uid, state_differs
from .agent import AgentPool
from .broker import (
    _FRAME,
    _FRAME_HEAD,
    _SENDING_HIGH,
    _STREAMS,
    DEFAULT_IDLE_S,
    MAX_LINE,
    _definition_key,
    target_from_dict,
)
from .broker_exec import ExecServer, can_reap
from .errors import BrokerError
from .hops import HopChain

__all__ = ["serve"]


class _Broker:
    """One broker's state: its agent pool, its callers now and when it was last used."""

    def __init__(self, path: Path, idle_s: float) -> None:
        self.path = path
        self.idle_s = idle_s
        self.pool = AgentPool(warm=("torch",))
        self.names: dict[str, str] = {}  # pool key -> the target's own name
        self.active = 0
        self.last = time.monotonic()
        self.started = time.time()
        self.stopping = asyncio.Event()
        self.runs = 0
        self.commands = 0  # commands run in forked children (app/quick.py)
        self.state = caller_state()  # what a caller must share with this process to be served by it
        self.aside = 0  # requests it stepped aside for (another HOME, SSH_AUTH_SOCK, umask, ...)

    def _peer_ok(self, writer: asyncio.StreamWriter) -> bool:
        sock = writer.get_extra_info("socket")
        if sock is None or not hasattr(socket, "SO_PEERCRED"):
            return True  # the socket's 0600 mode is the guard there
        return peer_uid(sock) == os.getuid()

    def differs(self, request: dict[str, Any]) -> str | None:
        """Why this broker would not act as the caller would (its environment, umask, groups
        differ: another HOME or ssh agent means another ssh), or None."""
        why = state_differs(self.state, request.get("caller"))
        if why is not None:
            self.aside += 1
        return why

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._peer_ok(writer):
            writer.close()
            return
        self.active += 1
        self.last = time.monotonic()
        try:
            line = await reader.readline()
            if not line:
                return
            request = json.loads(line)
            op = request.get("op")
            if op == "status":
                await self._send(writer, self.status())
            elif op == "stop":
                await self._send(writer, {"stopping": True, "agents": len(self.pool.agents)})
                self.stopping.set()
            elif op == "run":
                await self._run(request, reader, writer)
            else:
                await self._send(writer, {"error": f"unknown op {op!r}"})
        except (ConnectionError, json.JSONDecodeError, asyncio.IncompleteReadError):
            pass
        finally:
            self.active -= 1
            self.last = time.monotonic()
            try:
                writer.close()
            except (ConnectionError, RuntimeError):
                pass

    async def _send(self, writer: asyncio.StreamWriter, obj: dict[str, Any]) -> None:
        writer.write(json.dumps(obj).encode() + b"\n")
        await writer.drain()

    async def _run(self, request: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        aside = self.differs(request)
        if aside is not None:
            await self._send(writer, {"aside": aside})
            return
        target = target_from_dict(request["target"])
        key = f"{target.name}@{_definition_key(target)}"
        self.names[key] = target.name
        keyed = dataclasses.replace(target, name=key)
        if target.is_local and not target.workdir and request.get("cwd"):
            keyed = dataclasses.replace(keyed, workdir=request["cwd"])  # runs where the command was given
        self.pool.unavailable.pop(key, None)  # an agent that could not start then may start now
        program = base64.b64decode(request["program"])
        cancel = asyncio.Event()

        async def listen() -> None:  # a cancel line, or the command going away, cancels the run
            while True:
                line = await reader.readline()
                if not line or json.loads(line).get("op") == "cancel":
                    cancel.set()
                    return

        frames = request.get("frames") == "binary"
        writer.transport.set_write_buffer_limits(high=_SENDING_HIGH)

        async def drained() -> None:
            try:
                await writer.drain()
            except ConnectionError:  # the command went away: listen() cancels the run
                pass

        def output(stream: str, data: bytes) -> Awaitable[None] | None:
            if frames:
                writer.writelines((_FRAME, _FRAME_HEAD.pack(_STREAMS.index(stream), len(data)), data))
            else:
                writer.write(json.dumps({"out": stream, "data": base64.b64encode(data).decode()}).encode() + b"\n")
            # a command slower than the far end: wait for it (the far end then waits too)
            # rather than keep its output in this process's memory
            return drained() if writer.transport.get_write_buffer_size() > _SENDING_HIGH else None

        watcher = asyncio.ensure_future(listen())
        self.runs += 1
        try:
            info = await self.pool.run(HopChain.python(keyed), program, output, cancel=cancel,
                                       timeout=request.get("timeout"), fork=bool(request.get("fork")),
                                       environ=request.get("environ") if target.is_local else None)
        finally:
            watcher.cancel()
        exit_info = dataclasses.asdict(info)
        exit_info["note"] = exit_info.get("note", "").replace(key, target.name)
        exit_info["transport_error"] = (exit_info.get("transport_error") or "").replace(key, target.name) or None
        try:
            await self._send(writer, {"exit": exit_info})
        except ConnectionError:
            pass

    def status(self) -> dict[str, Any]:
        agents = []
        for key, agent in self.pool.agents.items():
            agents.append({"target": self.names.get(key, key), "definition": key.rsplit("@", 1)[-1], "pid": agent.pid,
                           "version": agent.version, "busy": agent.busy, "dead": bool(agent.dead)})
        return {"pid": os.getpid(), "socket": str(self.path), "idle_s": self.idle_s,
                "idle_for_s": round(time.monotonic() - self.last, 1) if not self.active else 0.0,
                "up_s": round(time.time() - self.started, 1), "runs": self.runs, "commands": self.commands,
                "stepped_aside": self.aside,
                "agents": agents,
                "unavailable": {self.names.get(k, k): why for k, why in self.pool.unavailable.items()}}

    async def watch_idle(self) -> None:
        while not self.stopping.is_set():
            await asyncio.sleep(min(1.0, self.idle_s / 4))
            if not self.active and time.monotonic() - self.last > self.idle_s:
                self.stopping.set()


async def serve(path: Path, idle_s: float = DEFAULT_IDLE_S, commands: Callable[[list[str]], int] | None = None,
                digest: str = "") -> None:
    """Listen on *path* until idle for *idle_s* or asked to stop; then close every agent.
    With *commands*, also run commands in forked children on the ``.exec`` socket beside it
    (app/quick.py), for a client whose sleuth has this *digest*."""
    said = folder_problem(path.parent)
    if said:  # another user could replace the socket: no broker here (the clients refuse it too)
        raise BrokerError(f"{said}: no broker socket is kept there")
    broker = _Broker(path, idle_s)
    if os.path.lexists(path):  # another broker may serve here already (two commands started one each)
        try:
            connect_trusted(path).close()
            return
        except (ConnectionRefusedError, FileNotFoundError, UntrustedSocket):
            pass  # a stale socket (its broker was killed), or not this user's: ours replaces it
    old = os.umask(0o177)  # the socket is born 0600: no window where another user may connect
    try:
        if os.path.lexists(path):
            path.unlink()
        server = await asyncio.start_unix_server(broker.handle, path=str(path), limit=MAX_LINE)
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    runner = None
    if commands is not None and can_reap():  # no pidfd (Linux < 5.3): every command runs in its own process
        runner = ExecServer(broker, path.with_suffix(".exec"), commands, digest)
        runner.start()
    idle = asyncio.ensure_future(broker.watch_idle())
    try:
        await broker.stopping.wait()
    finally:
        idle.cancel()
        if runner is not None:
            runner.close()
        server.close()
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        await broker.pool.close()  # the agents end, and with them their processes at the far end

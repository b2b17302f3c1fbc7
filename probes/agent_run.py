"""A probe run in a child of the resident agent, seen as a :class:`Process` (``AgentRun``), and
the transport that starts such runs (``AgentTransport``): what the framed channel of
probes/agent_channel.py carries for one run."""

from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING, Any

from .errors import TransportError
from .hops import HopChain
from .transports import READ_SIZE, Exit, Process, Transport

if TYPE_CHECKING:
    from .agent_channel import Agent

__all__ = ["QUEUED_HIGH", "QUEUED_LOW", "AgentRun", "AgentTransport"]

QUEUED_HIGH = 16 << 20  # a run's output waiting for its reader: the agent is not read above this
QUEUED_LOW = 4 << 20  # ... until it is back under this


class AgentRun(Process):
    """One probe running in a child of the agent, seen as a process: its program is what is
    written to it (sent in one R frame at EOF), its output arrives in O/E frames, kill is a
    C frame (the agent kills the child's whole process group)."""

    def __init__(self, agent: Agent, ident: int, fork: bool, cwd: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.agent, self.ident, self.fork, self.cwd, self.env = agent, ident, fork, cwd, env
        self.hop = agent.target.far_hop
        self.started = time.monotonic()
        self.program = bytearray()
        self.pid: int | None = None
        self.how = ""
        loop = asyncio.get_running_loop()
        self.begun: asyncio.Future = loop.create_future()
        self.exited: asyncio.Future = loop.create_future()
        self.queues: dict[str, asyncio.Queue[bytes]] = {"stdout": asyncio.Queue(), "stderr": asyncio.Queue()}
        # Output waiting for its reader. Above QUEUED_HIGH the agent's reader stops reading the
        # agent (so the far end waits) until the reader brings it under QUEUED_LOW.
        self.queued = 0
        self.room = asyncio.Event()
        self.room.set()
        self.released = False

    def arrived(self, stream: str, data: bytes) -> None:
        if self.released:
            return
        self.queues[stream].put_nowait(data)
        self.queued += len(data)
        if self.queued > QUEUED_HIGH:
            self.room.clear()

    def write(self, data: bytes) -> None:
        self.program.extend(data)

    def write_eof(self) -> None:
        request = {"program": self.program.decode("latin-1"), "fork": self.fork}
        if self.cwd:
            request["cwd"] = self.cwd
        if self.env is not None:
            request["env"] = self.env
        self.agent._send("R", self.ident, request)

    async def read(self, stream: str, size: int = READ_SIZE) -> bytes:
        data = await self.queues[stream].get()
        self.queued -= len(data)
        if self.queued <= QUEUED_LOW:
            self.room.set()
        return data

    def release(self) -> None:
        self.released = True
        self.room.set()

    def kill(self) -> None:
        if not self.agent.dead:
            self.agent._send("C", self.ident)

    def end(self, how: dict[str, Any]) -> None:
        if not self.exited.done():
            self.exited.set_result(how)
        for queue in self.queues.values():
            queue.put_nowait(b"")

    async def wait(self) -> Exit:
        end = await self.exited
        if "lost" in end:
            return Exit(lost=f"hop {self.hop}: {end['lost']} after {time.monotonic() - self.started:.1f} s")
        if "failed" in end:
            return Exit(lost=f"hop {self.hop}: the agent could not run the probe: {end['failed']}")
        return Exit(exit_status=end.get("exit_status"), signal=end.get("signal"))

    @property
    def note(self) -> str:
        return f"via agent pid {self.agent.pid} ({self.how or 'not started'})"


_seen_environ: tuple[dict[bytes, bytes], dict[str, str]] | None = None


def _environ() -> dict[str, str]:
    """This process's environment as a plain dict: decoded once, and again only when it
    changed (decoding os.environ for every run of a 16-member fleet was a tenth of its CPU)."""
    global _seen_environ
    raw = getattr(os.environ, "_data", None)
    if raw is None:
        return dict(os.environ)
    if _seen_environ is None or _seen_environ[0] != raw:
        _seen_environ = (dict(raw), dict(os.environ))
    return _seen_environ[1]


class AgentTransport(Transport):
    """Runs probes as children of one running agent (the chain's target must be its own)."""

    def __init__(self, agent: Agent, environ: dict[str, str] | None = None) -> None:
        self.agent = agent
        self.environ = environ  # a local target's environment: the command's (None: this process's)

    async def start(self, chain: HopChain, *, fork: bool = False) -> Process:
        agent = self.agent
        if agent.dead:
            raise TransportError(f"hop {agent.target.far_hop}: {agent.dead}", agent.target.far_hop)
        ident = agent._next
        agent._next += 1
        # a local target runs where the command was given (or in its workdir), wherever the
        # agent itself was started (a broker's agent lives on between commands and folders)
        target = chain.target
        cwd = (target.workdir or os.getcwd()) if target.is_local else None
        # ... and with the command's environment, as a session of its own would have had it
        env = {**(self.environ if self.environ is not None else _environ()), **target.env} if target.is_local else None
        run = AgentRun(agent, ident, fork, cwd, env)
        agent._runs[ident] = run
        return run

"""The resident probe agent, client side: one Python process per target at the far end of
its hop chain, started once and then asked to run probes over framed stdin/stdout. This
module holds the pool (one agent per target, a session per probe where none can start);
the channel to one agent is probes/agent_channel.py, a run in it probes/agent_run.py (their
names are importable from here).

Each probe runs in a child of the agent: a fresh ``python -`` by default, or forked from the
agent after it has imported torch, when the probe declares that safe (``"fork": True`` in
its PROBE) and CUDA is not initialised in the agent. Classification is unchanged: the agent
reports exit status or signal as a session would; a dead agent is ``transport``.

Exceptions:
    AgentError   the agent could not be started or answered wrongly; the pool falls back to
                 one session per probe and says so in the run's reason
"""

from __future__ import annotations

import asyncio
import hashlib

from .agent_channel import AGENT_SOURCE, AGENT_VERSION, BOOT, HEAD, HELLO_TIMEOUT, Agent, agent_chain
from .agent_run import QUEUED_HIGH, QUEUED_LOW, AgentRun, AgentTransport
from .config import Target
from .errors import AgentError, TransportError
from .hops import HopChain
from .transports import ExitInfo, OnOutput, SshPool, run_process, transport_for

__all__ = ["AGENT_SOURCE", "AGENT_VERSION", "Agent", "AgentError", "AgentPool", "AgentTransport", "BOOT",
           # the pieces, importable from here as they were
           "BASE_WARM", "HEAD", "HELLO_TIMEOUT", "QUEUED_HIGH", "QUEUED_LOW", "AgentRun", "agent_chain"]

# What the probe prelude imports: loaded once in the agent, a forked probe starts with them.
BASE_WARM = ["re", "select", "signal", "threading", "traceback", "platform", "getpass", "tempfile", "hashlib", "subprocess"]


class AgentPool:
    """One agent per target, started on first use, replaced when stale or dead; where one
    cannot start, runs fall back to a session per probe and their reason says why."""

    def __init__(self, ssh: SshPool | None = None, source: bytes = AGENT_SOURCE, warm: tuple[str, ...] = ()) -> None:
        self.ssh = ssh or SshPool()
        # modules to import in each agent once it is idle after its first run (torch: a
        # forked env-fingerprint then takes 0.09 s instead of 3); the agent is busy meanwhile
        self.warm_modules = tuple(warm)
        self._warming: dict[str, asyncio.Future] = {}
        self.source = source
        self.version = hashlib.sha256(source).hexdigest()[:16]
        self.agents: dict[str, Agent] = {}
        self.unavailable: dict[str, str] = {}  # target -> why it runs without an agent
        self.replaced: list[tuple[str, str, str]] = []  # (target, old version, why)
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, target: Target) -> Agent | None:
        lock = self._locks.setdefault(target.name, asyncio.Lock())
        async with lock:
            agent = self.agents.get(target.name)
            if agent is not None and (agent.dead or agent.version != self.version):
                why = agent.dead or f"its code is {agent.version}, this sleuth's is {self.version}"
                self.replaced.append((target.name, agent.version, why))
                del self.agents[target.name]
                await agent.close()
                agent = None
            if agent is None:
                if target.name in self.unavailable:
                    return None
                try:
                    agent = await Agent.start(target, transport_for(target.is_local, self.ssh), self.source)
                    await agent.warm(BASE_WARM)
                except AgentError as exc:
                    self.unavailable[target.name] = str(exc)
                    return None
                self.agents[target.name] = agent
            return agent

    async def run(self, chain: HopChain, program: bytes, on_output: OnOutput, *, cancel: asyncio.Event | None = None,
                  timeout: float | None = None, fork: bool = False, environ: dict[str, str] | None = None) -> ExitInfo:
        target = chain.target
        try:
            agent = await self.get(target)
        except TransportError as exc:
            return ExitInfo(transport_error=str(exc), failed_hop=exc.hop)
        if agent is None:
            transport = transport_for(chain, self.ssh)
            info = await run_process(transport, chain, program, on_output, cancel=cancel, timeout=timeout)
            info.note = f"no agent on {target.name} ({self.unavailable[target.name]}): ran in its own session"
            return info
        info = await run_process(AgentTransport(agent, environ), chain, program, on_output, cancel=cancel, timeout=timeout,
                                 fork=fork)
        if self.warm_modules and target.name not in self._warming and not agent.busy and not agent.dead:
            self._warming[target.name] = asyncio.ensure_future(self._warm(agent))
        return info

    async def _warm(self, agent: Agent) -> None:
        try:
            await agent.warm(list(self.warm_modules))
        except (AgentError, TimeoutError):
            pass  # warming is an optimisation: a run still works without it

    async def close(self) -> None:
        for fut in self._warming.values():
            fut.cancel()
        agents, self.agents = list(self.agents.values()), {}
        await asyncio.gather(*(a.close() for a in agents), return_exceptions=True)
        await self.ssh.close()

"""The resident probe agent, client side: one Python process per target at the far end of
its hop chain, started once and then asked to run probes over framed stdin/stdout.

Start: the hop chain runs ``python -c BOOT`` (a constant loader: no user data in argv), and
the agent's source follows on stdin, length-prefixed — ``python -`` would wait for EOF
before running anything, and stdin must stay open for the frames. Frames are length-prefixed
both ways (see ``far/agent.py``), so a probe's output cannot be taken for the protocol.

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
import json
import os
import struct
import time
from typing import Any

from .config import Target
from .errors import AgentError, TransportError
from .far import program
from .hops import HopChain
from .transports import READ_SIZE, Exit, ExitInfo, OnOutput, Process, SshPool, Transport, run_process, transport_for

__all__ = ["AGENT_SOURCE", "AGENT_VERSION", "Agent", "AgentError", "AgentPool", "AgentTransport", "BOOT"]

AGENT_SOURCE = program("agent").encode("utf-8")
AGENT_VERSION = hashlib.sha256(AGENT_SOURCE).hexdigest()[:16]
HEAD = struct.Struct(">IBI")
# a frame the agent ignores: sent back as output arrives while runs are open, so the far
# end's next small write is not held by the hop's delayed ACK (see Agent._read)
_NUDGE = HEAD.pack(5, ord("K"), 0)
HELLO_TIMEOUT = 20.0
QUEUED_HIGH = 16 << 20  # a run's output waiting for its reader: the agent is not read above this
QUEUED_LOW = 4 << 20  # ... until it is back under this
# What the probe prelude imports: loaded once in the agent, a forked probe starts with them.
BASE_WARM = ["re", "select", "signal", "threading", "traceback", "platform", "getpass", "tempfile", "hashlib", "subprocess"]

# Reads "<length>\n" then exactly that many bytes from fd 0 (os.read: no read-ahead that
# would swallow the frames after it), runs them, and hands the source to the agent.
BOOT = (
    "import os\n"
    "h = b''\n"
    "while h[-1:] != b'\\n':\n"
    "    c = os.read(0, 1)\n"
    "    if not c: raise SystemExit(3)\n"
    "    h += c\n"
    "n = int(h)\n"
    "s = b''\n"
    "while len(s) < n:\n"
    "    c = os.read(0, n - len(s))\n"
    "    if not c: raise SystemExit(3)\n"
    "    s += c\n"
    "g = {'__name__': '__sleuth_agent__'}\n"
    "exec(compile(s, '<sleuth-agent>', 'exec'), g)\n"
    "g['_agent_boot'](s)\n"
)


def agent_chain(target: Target) -> HopChain:
    return HopChain.for_program(target, [target.python, "-c", BOOT])


class _AgentRun(Process):
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
        run = _AgentRun(agent, ident, fork, cwd, env)
        agent._runs[ident] = run
        return run


class Agent:
    """One running agent, reached through a :class:`Process` of the target's transport; its
    probe runs go through :class:`AgentTransport` (``run_process(AgentTransport(agent), …)``)."""

    def __init__(self, target: Target, proc: Process) -> None:
        self.target = target
        self.proc = proc
        self.hello: dict[str, Any] = {}
        self.dead: str | None = None
        self._runs: dict[int, _AgentRun] = {}
        self._asks: dict[int, asyncio.Future] = {}
        self._next = 1
        self._stderr = b""
        self._hello: asyncio.Future = asyncio.get_running_loop().create_future()
        self._reader = asyncio.ensure_future(self._read())
        self._err_reader = asyncio.ensure_future(self._read_stderr())

    # ---------------------------------------------------------------- starting

    @classmethod
    async def start(cls, target: Target, transport: Transport, source: bytes = AGENT_SOURCE) -> Agent:
        """Start the agent through *transport*; TransportError names the hop, AgentError says
        why the agent itself did not come up."""
        proc = await transport.start(agent_chain(target))
        agent = cls(target, proc)
        proc.write(b"%d\n" % len(source) + source)
        try:
            agent.hello = await asyncio.wait_for(asyncio.shield(agent._hello), HELLO_TIMEOUT)
        except (TimeoutError, AgentError) as exc:
            said = agent._stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            await agent.close()
            why = str(exc) if isinstance(exc, AgentError) else f"no hello within {HELLO_TIMEOUT:g} s"
            raise AgentError(f"{why}{': ' + ' / '.join(said) if said else ''}") from None
        return agent

    # ---------------------------------------------------------------- frames

    def _send(self, kind: str, run: int, payload: bytes | dict[str, Any] = b"") -> None:
        if isinstance(payload, dict):
            payload = json.dumps(payload).encode()
        self.proc.write(HEAD.pack(len(payload) + 5, ord(kind), run) + payload)

    async def _read(self) -> None:
        buffer = bytearray()
        try:
            while data := await self.proc.read("stdout", READ_SIZE):
                buffer.extend(data)
                while len(buffer) >= 4:
                    (length,) = struct.unpack_from(">I", buffer)
                    if len(buffer) < 4 + length:
                        break
                    kind, run = chr(buffer[4]), struct.unpack_from(">I", buffer, 5)[0]
                    payload = bytes(buffer[9 : 4 + length])
                    del buffer[: 4 + length]
                    self._dispatch(kind, run, payload)
                if self._runs and not self.target.is_local:
                    # Runs are still open: a nudge back. Through a jump host the far sshd sends
                    # a non-interactive session's small writes with Nagle on, and the jump's
                    # socket delays its ACK (no data goes back to carry it): with eight runs at
                    # once each exit waited for the previous one's ACK, in series (loopback
                    # jump, 2 cores: eight at once 45-54 ms -> 27 ms, as without the jump).
                    self.proc.write(_NUDGE)
                for r in list(self._runs.values()):  # a reader behind: the far end waits for it
                    await r.room.wait()
        except AgentError as exc:
            self._died(str(exc))
            return
        await asyncio.sleep(0)  # let stderr's last words arrive
        said = self._stderr.decode("utf-8", "replace").strip().splitlines()[-2:]
        self._died("the agent went away" + (f": {' / '.join(said)}" if said else ""))

    async def _read_stderr(self) -> None:
        while data := await self.proc.read("stderr", READ_SIZE):
            self._stderr = (self._stderr + data)[-4096:]

    def _dispatch(self, kind: str, run: int, payload: bytes) -> None:
        if kind == "V":
            if not self._hello.done():
                self._hello.set_result(json.loads(payload))
        elif kind in ("O", "E"):
            r = self._runs.get(run)
            if r is not None:
                r.arrived("stdout" if kind == "O" else "stderr", payload)
        elif kind == "S":
            r = self._runs.get(run)
            if r is not None and not r.begun.done():
                info = json.loads(payload)
                r.pid, r.how = info.get("pid"), info.get("how", "")
                r.begun.set_result(info)
        elif kind == "X":
            r = self._runs.pop(run, None)
            if r is not None:
                r.end(json.loads(payload))
        elif kind in ("h", "w"):
            fut = self._asks.pop(run, None)
            if fut is not None and not fut.done():
                fut.set_result(json.loads(payload))
        elif kind == "F":
            message = json.loads(payload).get("error", "refused")
            r = self._runs.pop(run, None)
            if r is not None:
                r.end({"failed": message})
        else:
            raise AgentError(f"unknown frame {kind!r} from the agent")

    def _died(self, why: str) -> None:
        self.dead = self.dead or why
        if not self._hello.done():
            self._hello.set_exception(AgentError(why))
        for r in self._runs.values():
            r.end({"lost": why})
        self._runs.clear()
        for fut in self._asks.values():
            if not fut.done():
                fut.set_exception(AgentError(why))
        self._asks.clear()

    # ---------------------------------------------------------------- asking

    @property
    def version(self) -> str:
        return str(self.hello.get("version", ""))

    @property
    def pid(self) -> int | None:
        return self.hello.get("pid")

    @property
    def busy(self) -> bool:
        return bool(self._runs)

    async def _ask(self, kind: str, payload: dict[str, Any] | None = None, timeout: float = 30.0) -> dict[str, Any]:
        if self.dead:
            raise AgentError(self.dead)
        ident = self._next
        self._next += 1
        fut = asyncio.get_running_loop().create_future()
        self._asks[ident] = fut
        self._send(kind, ident, payload or {})
        return await asyncio.wait_for(fut, timeout)

    async def health(self) -> dict[str, Any]:
        """pid, version, uptime, python, warm modules, children (pid, how), load."""
        return await self._ask("H")

    async def warm(self, modules: list[str], timeout: float = 300.0) -> dict[str, Any]:
        """Import *modules* in the agent, so forked probes start with them loaded."""
        return await self._ask("W", {"modules": modules}, timeout)

    async def close(self) -> None:
        """Quit the agent (it kills its children's groups) and close the channel."""
        if not self.dead:
            self._send("Q", 0)
        self.proc.write_eof()
        try:
            await asyncio.wait_for(self.proc.wait(), 5)
        except TimeoutError:
            self.proc.kill()
        self._died(self.dead or "closed")
        for task in (self._reader, self._err_reader):
            task.cancel()


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

"""The resident probe agent, client side: one Python process per target at the far end of
its hop chain, started once and then asked to run probes over framed stdin/stdout.

Start: the hop chain runs ``python -c BOOT`` (a constant loader: no user data in argv), and
the agent's source follows on stdin, length-prefixed — ``python -`` would wait for EOF
before running anything, and stdin must stay open for the frames. Frames are length-prefixed
both ways (see ``agent_src.py``), so a probe's output cannot be taken for the protocol.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from .config import Target
from .hops import HopChain
from .transport import ExitInfo, SshPool, TransportError, run_chain

__all__ = ["AGENT_SOURCE", "AGENT_VERSION", "Agent", "AgentError", "AgentPool", "BOOT"]

AGENT_SOURCE = Path(__file__).with_name("agent_src.py").read_bytes()
AGENT_VERSION = hashlib.sha256(AGENT_SOURCE).hexdigest()[:16]
HEAD = struct.Struct(">IBI")
HELLO_TIMEOUT = 20.0
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


class AgentError(RuntimeError):
    """The agent could not be started, or broke its protocol."""


def agent_chain(target: Target) -> HopChain:
    return HopChain(target, HopChain._wrap(target, [target.python, "-c", BOOT]))


@dataclass
class _Run:
    on_output: Callable[[str, bytes], None]
    started: asyncio.Future
    exited: asyncio.Future
    pid: int | None = None
    how: str = ""


@dataclass
class _Pipe:
    """The agent process: stdin writer, stdout/stderr readers, kill and wait."""

    write: Callable[[bytes], None]
    read_out: Callable[[int], Any]
    read_err: Callable[[int], Any]
    close: Callable[[], None]
    wait: Callable[[], Any]
    extra: dict[str, Any] = field(default_factory=dict)


class Agent:
    """One running agent; :meth:`run` sends a probe program and streams its output back."""

    def __init__(self, target: Target, pipe: _Pipe) -> None:
        self.target = target
        self.pipe = pipe
        self.hello: dict[str, Any] = {}
        self.dead: str | None = None
        self._runs: dict[int, _Run] = {}
        self._asks: dict[int, asyncio.Future] = {}
        self._next = 1
        self._stderr = b""
        self._hello: asyncio.Future = asyncio.get_running_loop().create_future()
        self._reader = asyncio.ensure_future(self._read())
        self._err_reader = asyncio.ensure_future(self._read_stderr())

    # ---------------------------------------------------------------- starting

    @classmethod
    async def start(cls, target: Target, ssh: SshPool | None, source: bytes = AGENT_SOURCE) -> Agent:
        chain = agent_chain(target)
        if target.is_local:
            proc = await asyncio.create_subprocess_exec(
                *chain.local_argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**os.environ, **target.env},
                cwd=target.workdir or None,
                start_new_session=True,
            )

            def close_local() -> None:
                if proc.stdin and not proc.stdin.is_closing():
                    proc.stdin.close()

            pipe = _Pipe(proc.stdin.write, proc.stdout.read, proc.stderr.read, close_local, proc.wait, {"proc": proc})
        else:
            assert ssh is not None
            conn, _client = await ssh.get(target)  # TransportError names the hop
            try:
                proc = await conn.create_process(chain.remote_command, encoding=None)
            except (OSError, asyncssh.Error) as exc:
                ssh.discard(target)
                raise TransportError(f"hop {len(target.jump) + 1} (ssh {target.ssh}): could not open a session: {exc}") from None

            def close_ssh() -> None:
                try:
                    proc.stdin.write_eof()
                except (OSError, asyncssh.Error):
                    pass
                proc.close()

            pipe = _Pipe(proc.stdin.write, proc.stdout.read, proc.stderr.read, close_ssh, proc.wait_closed, {"proc": proc})
        agent = cls(target, pipe)
        pipe.write(b"%d\n" % len(source) + source)
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
        self.pipe.write(HEAD.pack(len(payload) + 5, ord(kind), run) + payload)

    async def _read(self) -> None:
        buffer = bytearray()
        try:
            while True:
                data = await self.pipe.read_out(1 << 16)
                if not data:
                    break
                buffer.extend(data)
                while len(buffer) >= 4:
                    (length,) = struct.unpack_from(">I", buffer)
                    if len(buffer) < 4 + length:
                        break
                    kind, run = chr(buffer[4]), struct.unpack_from(">I", buffer, 5)[0]
                    payload = bytes(buffer[9 : 4 + length])
                    del buffer[: 4 + length]
                    self._dispatch(kind, run, payload)
        except (OSError, asyncssh.Error) as exc:
            self._died(f"the connection to the agent broke ({exc})")
            return
        except AgentError as exc:
            self._died(str(exc))
            return
        await asyncio.sleep(0)  # let stderr's last words arrive
        said = self._stderr.decode("utf-8", "replace").strip().splitlines()[-2:]
        self._died("the agent went away" + (f": {' / '.join(said)}" if said else ""))

    async def _read_stderr(self) -> None:
        try:
            while data := await self.pipe.read_err(1 << 16):
                self._stderr = (self._stderr + data)[-4096:]
        except (OSError, asyncssh.Error):
            pass

    def _dispatch(self, kind: str, run: int, payload: bytes) -> None:
        if kind == "V":
            if not self._hello.done():
                self._hello.set_result(json.loads(payload))
        elif kind in ("O", "E"):
            r = self._runs.get(run)
            if r is not None:
                r.on_output("stdout" if kind == "O" else "stderr", payload)
        elif kind == "S":
            r = self._runs.get(run)
            if r is not None and not r.started.done():
                info = json.loads(payload)
                r.pid, r.how = info.get("pid"), info.get("how", "")
                r.started.set_result(info)
        elif kind == "X":
            r = self._runs.pop(run, None)
            if r is not None and not r.exited.done():
                r.exited.set_result(json.loads(payload))
        elif kind in ("h", "w"):
            fut = self._asks.pop(run, None)
            if fut is not None and not fut.done():
                fut.set_result(json.loads(payload))
        elif kind == "F":
            message = json.loads(payload).get("error", "refused")
            r = self._runs.pop(run, None)
            if r is not None and not r.exited.done():
                r.exited.set_result({"failed": message})
        else:
            raise AgentError(f"unknown frame {kind!r} from the agent")

    def _died(self, why: str) -> None:
        self.dead = self.dead or why
        if not self._hello.done():
            self._hello.set_exception(AgentError(why))
        for r in self._runs.values():
            if not r.exited.done():
                r.exited.set_result({"lost": why})
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

    async def run(
        self,
        program: bytes,
        on_output: Callable[[str, bytes], None],
        *,
        cancel: asyncio.Event | None = None,
        timeout: float | None = None,
        fork: bool = False,
    ) -> ExitInfo:
        """Run one probe program in a child of the agent; how it ended, as a session would say."""
        started = time.monotonic()
        hop = len(self.target.jump) + 1 if self.target.ssh else 1
        if self.dead:
            return ExitInfo(transport_error=f"hop {hop}: {self.dead}", failed_hop=hop)
        loop = asyncio.get_running_loop()
        ident = self._next
        self._next += 1
        r = _Run(on_output, loop.create_future(), loop.create_future())
        self._runs[ident] = r
        self._send("R", ident, {"program": program.decode("latin-1"), "fork": fork})
        cancel = cancel or asyncio.Event()
        timeout = self.target.timeout if timeout is None else timeout
        info = ExitInfo()
        stop = asyncio.ensure_future(cancel.wait())
        done, _ = await asyncio.wait({r.exited, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if r.exited not in done:
            if stop in done:
                info.cancelled = True
            else:
                info.timed_out = timeout
            if not self.dead:
                self._send("C", ident)  # the agent kills the child's whole process group
            try:
                await asyncio.wait_for(asyncio.shield(r.exited), 10)
            except TimeoutError:
                self._runs.pop(ident, None)
        stop.cancel()
        end = r.exited.result() if r.exited.done() else {}
        if "lost" in end:
            info.transport_error = f"hop {hop}: {end['lost']} after {time.monotonic() - started:.1f} s"
            info.failed_hop = hop
        elif "failed" in end:
            info.transport_error = f"hop {hop}: the agent could not run the probe: {end['failed']}"
            info.failed_hop = hop
        else:
            info.signal = end.get("signal")
            info.exit_status = end.get("exit_status")
        info.seconds = time.monotonic() - started
        info.note = f"via agent pid {self.pid} ({r.how or 'not started'})"
        return info

    async def close(self) -> None:
        """Quit the agent (it kills its children's groups) and close the channel."""
        if not self.dead:
            try:
                self._send("Q", 0)
            except (OSError, asyncssh.Error, RuntimeError):
                pass
        try:
            self.pipe.close()
        except (OSError, asyncssh.Error, RuntimeError):
            pass
        proc = self.pipe.extra.get("proc")
        try:
            await asyncio.wait_for(self.pipe.wait(), 5)
        except (TimeoutError, OSError, asyncssh.Error):
            if proc is not None and hasattr(proc, "kill"):
                try:
                    proc.kill()
                except (OSError, ProcessLookupError):
                    pass
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
                    agent = await Agent.start(target, self.ssh, self.source)
                    await agent.warm(BASE_WARM)
                except AgentError as exc:
                    self.unavailable[target.name] = str(exc)
                    return None
                self.agents[target.name] = agent
            return agent

    async def run(
        self,
        chain: HopChain,
        program: bytes,
        on_output: Callable[[str, bytes], None],
        *,
        cancel: asyncio.Event | None = None,
        timeout: float | None = None,
        fork: bool = False,
    ) -> ExitInfo:
        target = chain.target
        try:
            agent = await self.get(target)
        except TransportError as exc:
            return ExitInfo(transport_error=str(exc), failed_hop=exc.hop)
        if agent is None:
            info = await run_chain(chain, program, on_output, pool=self.ssh, cancel=cancel, timeout=timeout)
            info.note = f"no agent on {target.name} ({self.unavailable[target.name]}): ran in its own session"
            return info
        info = await agent.run(program, on_output, cancel=cancel, timeout=timeout, fork=fork)
        if self.warm_modules and target.name not in self._warming and not agent._runs and not agent.dead:
            self._warming[target.name] = asyncio.ensure_future(self._warm(agent))
        return info

    async def _warm(self, agent: Agent) -> None:
        try:
            await agent.warm(list(self.warm_modules))
        except (AgentError, TimeoutError, OSError, asyncssh.Error):
            pass  # warming is an optimisation: a run still works without it

    async def close(self) -> None:
        for fut in self._warming.values():
            fut.cancel()
        agents, self.agents = list(self.agents.values()), {}
        await asyncio.gather(*(a.close() for a in agents), return_exceptions=True)
        await self.ssh.close()

"""The channel to one resident probe agent at the far end of a target's hop chain: starting it
(``BOOT``, then its source), the length-prefixed frames both ways, and what it is asked.

Start: the hop chain runs ``python -c BOOT`` (a constant loader: no user data in argv), and
the agent's source follows on stdin, length-prefixed — ``python -`` would wait for EOF
before running anything, and stdin must stay open for the frames. Frames are length-prefixed
both ways (see ``far/agent.py``), so a probe's output cannot be taken for the protocol.

Exceptions:
    AgentError   the agent could not be started or answered wrongly
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import struct
from typing import Any

from .agent_run import AgentRun
from .errors import AgentError
from .far import program
from .hops import HopChain
from .targets import Target
from .transports import READ_SIZE, Process, Transport

__all__ = ["AGENT_SOURCE", "AGENT_VERSION", "BOOT", "HEAD", "HELLO_TIMEOUT", "Agent", "agent_chain"]

AGENT_SOURCE = program("agent").encode("utf-8")
AGENT_VERSION = hashlib.sha256(AGENT_SOURCE).hexdigest()[:16]
HEAD = struct.Struct(">IBI")
# a frame the agent ignores: sent back as output arrives while runs are open, so the far
# end's next small write is not held by the hop's delayed ACK (see Agent._read)
_NUDGE = HEAD.pack(5, ord("K"), 0)
HELLO_TIMEOUT = 20.0

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


class Agent:
    """One running agent, reached through a :class:`Process` of the target's transport; its
    probe runs go through :class:`AgentTransport` (``run_process(AgentTransport(agent), …)``)."""

    def __init__(self, target: Target, proc: Process) -> None:
        self.target = target
        self.proc = proc
        self.hello: dict[str, Any] = {}
        self.dead: str | None = None
        self._runs: dict[int, AgentRun] = {}
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


"""An in-memory transport for unit tests: no process, no sshd, the far end is a function.

Like httpx's ``MockTransport``: give it a handler ``(chain, stdin) -> Reply`` and the
runner, classification and ``sessions.run_probe`` run unchanged above it. A reply can hang
until killed (cancel and timeout paths), say the far end was lost, or the handler can raise
:class:`TransportError` for a hop that cannot be reached. :func:`probe_reply` writes the
records a real probe would (``@@sleuth:<nonce> {json}``) for the nonce inside *stdin*.

The real transports keep their own tests against a real sshd (tests/integration/test_transport.py).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..hops import HopChain
from .base import READ_SIZE, Exit, Process, Transport

__all__ = ["MockTransport", "Reply", "probe_reply"]

_NONCE = re.compile(rb'"nonce": "([0-9a-f]+)"')  # in the config at the program's end


@dataclass
class Reply:
    """What the far end does: chunks on each stream, then an exit, a signal, or a lost link."""

    stdout: Sequence[bytes] = ()
    stderr: Sequence[bytes] = ()
    exit_status: int | None = 0
    signal: str | None = None
    lost: str | None = None  # "hop 2 (ssh gpu): the connection was lost after 1.0 s"
    hang: bool = False  # never exits by itself: only a kill (cancel, timeout) ends it


Handler = Callable[[HopChain, bytes], Reply]


class _MockProcess(Process):
    def __init__(self, transport: MockTransport, chain: HopChain) -> None:
        self.transport, self.chain = transport, chain
        self.hop = chain.target.far_hop
        self.stdin = bytearray()
        self.killed = asyncio.Event()
        self._queues: dict[str, asyncio.Queue[bytes]] = {"stdout": asyncio.Queue(), "stderr": asyncio.Queue()}
        self._reply: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()

    def write(self, data: bytes) -> None:
        self.stdin.extend(data)

    def write_eof(self) -> None:
        if self._reply.done():
            return
        reply = self.transport.handler(self.chain, bytes(self.stdin))
        self.transport.calls.append((self.chain, bytes(self.stdin)))
        for name, chunks in (("stdout", reply.stdout), ("stderr", reply.stderr)):
            for chunk in chunks:
                self._queues[name].put_nowait(chunk)
            if not reply.hang:
                self._queues[name].put_nowait(b"")
        self._reply.set_result(reply)

    async def read(self, stream: str, size: int = READ_SIZE) -> bytes:
        return await self._queues[stream].get()

    def kill(self) -> None:
        self.transport.killed.append(self.chain)
        self.killed.set()
        for queue in self._queues.values():
            queue.put_nowait(b"")

    async def wait(self) -> Exit:
        reply = await self._reply
        if reply.hang:
            await self.killed.wait()
            return Exit(exit_status=137, signal="KILL")
        if reply.lost:
            return Exit(lost=reply.lost)
        return Exit(exit_status=reply.exit_status, signal=reply.signal)


@dataclass
class MockTransport(Transport):
    """Answers every started chain with ``handler(chain, stdin)``; records what it was sent."""

    handler: Handler
    calls: list[tuple[HopChain, bytes]] = field(default_factory=list)
    killed: list[HopChain] = field(default_factory=list)

    async def start(self, chain: HopChain, *, fork: bool = False) -> Process:
        return _MockProcess(self, chain)


def probe_reply(
    stdin: bytes,
    records: Sequence[dict[str, Any]] = (),
    *,
    stdout: bytes = b"",
    stderr: bytes = b"",
    done: bool = True,
    exit_status: int | None = 0,
    state: dict[str, Any] | None = None,
) -> Reply:
    """The reply of a sleuth probe: *stdout* text, then its *records* (and the prelude's
    ``state`` and ``done`` records unless told otherwise), as the prelude would write them."""
    found = _NONCE.findall(stdin)
    if not found:
        raise ValueError("no nonce in this program: is it a sleuth probe?")
    nonce = found[-1].decode()
    lines = []
    if state is not None:
        lines.append({"kind": "state", **state})
    lines += list(records)
    if done:
        lines.append({"kind": "done"})
    out = stdout + b"".join(f"@@sleuth:{nonce} {json.dumps(r)}\n".encode() for r in lines)
    return Reply(stdout=[out] if out else [], stderr=[stderr] if stderr else [], exit_status=exit_status)

"""The local transport: an asyncio subprocess in its own session (process group).

The target's ``env`` is added to this process's environment and its ``workdir`` is the
child's working directory; kill is SIGKILL to the whole group, so nothing the probe
started outlives a cancel.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

from ..errors import TransportError
from ..hops import HopChain
from .base import READ_SIZE, Exit, Process, Transport

__all__ = ["LocalTransport"]


class _LocalProcess(Process):
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.hop = 1
        self.started = time.monotonic()
        self._streams = {"stdout": proc.stdout, "stderr": proc.stderr}

    def write(self, data: bytes) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.write(data)

    async def drain(self) -> None:
        try:
            if self.proc.stdin is not None:
                await self.proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def write_eof(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()

    async def read(self, stream: str, size: int = READ_SIZE) -> bytes:
        try:
            reader = self._streams[stream]
            return await reader.read(size) if reader is not None else b""
        except OSError:
            return b""

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    async def wait(self) -> Exit:
        code = await self.proc.wait()
        if code < 0:
            return Exit(exit_status=128 - code, signal=signal.Signals(-code).name)
        return Exit(exit_status=code)


class LocalTransport(Transport):
    """Runs a chain's argv on this machine, no shell in between."""

    async def start(self, chain: HopChain, *, fork: bool = False) -> Process:
        target = chain.target
        try:
            proc = await asyncio.create_subprocess_exec(
                *chain.local_argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**os.environ, **target.env},
                cwd=target.workdir or None,
                start_new_session=True,
            )
        except OSError as exc:
            raise TransportError(f"could not start {chain.local_argv[0]}: {exc.strerror or exc}", 1) from None
        return _LocalProcess(proc)

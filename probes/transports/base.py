"""The process-transport interface: start a hop chain's command, talk to it, kill it.

Every way sleuth runs something at the far end — a local subprocess, an ssh channel, a child
of the resident agent, an in-memory fake for unit tests — is a :class:`Transport` whose
:meth:`~Transport.start` gives a :class:`Process`. :func:`run_process` is the one path that
feeds stdin, streams stdout/stderr, waits with a cancel event and a timeout, and kills the
process (its whole group, as far as the transport reaches) when either fires; so the
cancel/timeout/kill logic exists once for all of them.

Failures, one way: :meth:`Transport.start` *raises* :class:`TransportError` (naming the hop
that failed); :func:`run_process` *returns* it, in ``ExitInfo.transport_error``, so a run
always ends with an :class:`ExitInfo` and a transport fault is classified, never raised to
the caller and never taken for evidence.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..errors import TransportError
from ..hops import HopChain

__all__ = ["Exit", "ExitInfo", "OnOutput", "Process", "READ_SIZE", "Transport", "run_process", "wait_or_stop"]

# An output callback may return an awaitable: the pump waits for it before reading on, so a
# consumer that is slower than the far end holds the far end back instead of buffering.
OnOutput = Callable[[str, bytes], "Awaitable[None] | None"]
READ_SIZE = 1 << 16
KILL_GRACE = 10.0  # after a kill, how long the pipes may take to close


@dataclass
class ExitInfo:
    """How one run ended, as the transport saw it; the runner classifies it."""

    exit_status: int | None = None
    signal: str | None = None
    timed_out: float | None = None
    cancelled: bool = False
    transport_error: str | None = None
    failed_hop: int | None = None
    seconds: float = 0.0
    note: str = ""  # how it ran, when that is worth saying (the agent, or why not)


@dataclass(frozen=True)
class Exit:
    """What :meth:`Process.wait` reports: a status or a signal, or that the far end was lost."""

    exit_status: int | None = None
    signal: str | None = None  # "KILL", "TERM", …
    lost: str | None = None  # "hop 2 (ssh gpu): the connection was lost after 3.1 s"


class Process(ABC):
    """One command running at the far end of a hop chain."""

    hop: int = 1  # the hop that answers for this process (1-based): named in a lost connection
    started: float = 0.0

    @abstractmethod
    def write(self, data: bytes) -> None:
        """Queue *data* for its stdin (a closed stdin swallows it: the process went)."""

    async def drain(self) -> None:
        """Wait until what was written has been handed on."""
        return None

    @abstractmethod
    def write_eof(self) -> None:
        """Close its stdin."""

    @abstractmethod
    async def read(self, stream: str, size: int = READ_SIZE) -> bytes:
        """Up to *size* bytes of ``"stdout"`` or ``"stderr"``; ``b""`` at the end (or when the
        connection broke: :meth:`wait` then says so)."""

    @abstractmethod
    def kill(self) -> None:
        """SIGKILL the process and everything it started, as far as this transport reaches."""

    @abstractmethod
    async def wait(self) -> Exit:
        """Until it has exited: its status or signal, or why the far end was lost."""

    def release(self) -> None:
        """Nobody will read its output any more (the run is over, or given up on): what it
        still holds back for a reader may go."""
        return None

    @property
    def note(self) -> str:
        """How it ran, for the run's reason ("via agent pid 812 (fork)"); empty by default."""
        return ""


class Transport(ABC):
    """Starts processes at the far end of hop chains (of one kind of target)."""

    @abstractmethod
    async def start(self, chain: HopChain, *, fork: bool = False) -> Process:
        """Start ``chain.far_argv``; raise :class:`TransportError` naming the hop that failed.
        *fork* is a hint for transports that can run a probe forked from a warm parent."""

    async def close(self) -> None:
        """Release what the transport holds open (connections); nothing by default."""
        return None

    async def run(self, chain: HopChain, program: bytes, on_output: OnOutput, *, cancel: asyncio.Event | None = None,
                  timeout: float | None = None, fork: bool = False) -> ExitInfo:
        """One run through this transport (:func:`run_process`): every transport is a
        :class:`~sleuth.probes.runner.Runner` (the MockTransport of unit tests, too)."""
        return await run_process(self, chain, program, on_output, cancel=cancel, timeout=timeout, fork=fork)


async def wait_or_stop(work: Awaitable[object], cancel: asyncio.Event, timeout: float | None) -> str:
    """Wait for *work*, *cancel* or *timeout*, whichever comes first:
    ``"done"``, ``"cancelled"`` or ``"timed_out"``. *work* goes on in the background."""
    work = asyncio.ensure_future(work)
    stop = asyncio.ensure_future(cancel.wait())
    try:
        done, _ = await asyncio.wait({work, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
    if work in done:
        return "done"
    return "cancelled" if stop in done else "timed_out"


async def run_process(
    transport: Transport,
    chain: HopChain,
    stdin: bytes,
    on_output: OnOutput,
    *,
    cancel: asyncio.Event | None = None,
    timeout: float | None = None,
    fork: bool = False,
) -> ExitInfo:
    """Run *chain* through *transport* with *stdin*, calling ``on_output(stream, bytes)`` as
    output arrives; kill it on *cancel* or after *timeout* seconds. Never raises for a
    transport fault: the :class:`ExitInfo` says what happened."""
    cancel = cancel or asyncio.Event()
    timeout = chain.target.timeout if timeout is None else timeout
    started = time.monotonic()
    try:
        proc = await transport.start(chain, fork=fork)
    except TransportError as exc:
        return ExitInfo(transport_error=str(exc), failed_hop=exc.hop, seconds=time.monotonic() - started)

    async def feed() -> None:
        proc.write(stdin)
        await proc.drain()
        proc.write_eof()

    async def pump(stream: str) -> None:
        while chunk := await proc.read(stream):
            pending = on_output(stream, chunk)
            if pending is not None:
                await pending

    async def whole() -> Exit:
        results = await asyncio.gather(feed(), pump("stdout"), pump("stderr"), proc.wait(), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, (OSError, TransportError)):
                raise result
        end = results[3]
        if isinstance(end, TransportError):
            return Exit(lost=str(end))
        return end if isinstance(end, Exit) else Exit(lost=f"hop {proc.hop}: {end}")

    info = ExitInfo()
    work = asyncio.ensure_future(whole())
    killed = False
    try:
        how = await wait_or_stop(work, cancel, timeout)
        if how != "done":
            info.cancelled = how == "cancelled"
            info.timed_out = timeout if how == "timed_out" else None
            proc.kill()
            killed = True
            try:
                await asyncio.wait_for(asyncio.shield(work), KILL_GRACE)
            except TimeoutError:  # something escaped the group and holds the pipes
                pass
        if work.done():
            end = work.result()  # a bug, not a fault of the far end, raises here
        else:
            work.cancel()
            end = Exit()
    finally:
        if not work.done() and not killed:  # this task itself was cancelled: nothing left running
            proc.kill()
            work.cancel()
        proc.release()  # nobody reads its output any more
    info.exit_status, info.signal = end.exit_status, end.signal
    if end.lost and not (info.cancelled or info.timed_out):
        info.transport_error, info.failed_hop = end.lost, proc.hop
    info.seconds = time.monotonic() - started
    info.note = proc.note
    return info

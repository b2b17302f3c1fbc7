"""Running one probe on one target: program, transport, capture, records, classification."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from .classify import RunFacts, classify
from .config import Target
from .hops import HopChain
from .protocol import ProgramSpec, RecordParser, build_program, new_nonce
from .transports import ExitInfo, OnOutput, SshPool, run_process, transport_for

__all__ = ["OutputSink", "Runner", "RunOutcome", "SessionRunner", "execute", "chain_for"]

_TAIL = 8192


class OutputSink(Protocol):
    """Where output goes as it arrives (sessions.CaptureWriter is one)."""

    def write(self, stream: str, data: bytes) -> None: ...

    def flush(self) -> None: ...


class _CountingSink(OutputSink, Protocol):
    """A sink that counts the lines it stored (the session's capture)."""

    @property
    def lines(self) -> dict[str, int]: ...


class Runner(Protocol):
    """Runs one program at the far end of a hop chain and streams its output: the one
    interface behind every way a probe runs. Implemented by :class:`SessionRunner` (a
    session of its own per run), :class:`~sleuth.probes.agent.AgentPool` (a child of the
    target's resident agent), :class:`~sleuth.probes.broker.BrokerClient` (the same, through
    the broker the CLI and the UI share) and every :class:`~sleuth.probes.transports.Transport`
    (the MockTransport of unit tests). Never raises for a transport fault: the
    :class:`ExitInfo` says what happened."""

    async def run(self, chain: HopChain, program: bytes, on_output: OnOutput, *, cancel: asyncio.Event | None = None,
                  timeout: float | None = None, fork: bool = False) -> ExitInfo: ...


class SessionRunner:
    """Each run in a session of its own through the target's default transport (a local
    subprocess, or an ssh channel on *pool*'s connection): no agent."""

    def __init__(self, pool: SshPool | None = None) -> None:
        self.pool = pool

    async def run(self, chain: HopChain, program: bytes, on_output: OnOutput, *, cancel: asyncio.Event | None = None,
                  timeout: float | None = None, fork: bool = False) -> ExitInfo:
        own = transport_for(chain, self.pool)
        try:
            return await run_process(own, chain, program, on_output, cancel=cancel, timeout=timeout)
        finally:
            await own.close()


@dataclass
class RunOutcome:
    classification: str
    reason: str
    records: list[dict[str, Any]]  # every record but the state one, in order
    state: dict[str, Any] | None  # what the prelude reported of env, code and caches
    lines: dict[str, int]
    bytes: int
    exit_status: int | None
    signal: str | None
    seconds: float
    failed_hop: int | None = None
    nonce: str = ""
    via: str = ""  # "via agent pid N (fork)", or why there was no agent
    facts: RunFacts = field(default_factory=RunFacts, repr=False)


def chain_for(target: Target) -> HopChain:
    return HopChain.python(target)


def code_dir(target: Target) -> str | None:
    return target.code_local if target.is_local else (target.code_remote or target.workdir)


async def execute(
    target: Target,
    spec: ProgramSpec,
    sink: OutputSink,
    *,
    pool: SshPool | None = None,
    cancel: asyncio.Event | None = None,
    timeout: float | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    on_output: Callable[[str, bytes], None] | None = None,
    runner: Runner | None = None,
) -> RunOutcome:
    """Run *spec* on *target* through *runner*; every byte goes to *sink* as it arrives.
    Without a runner, in a session of the target's default transport (on *pool* for ssh)."""
    nonce = new_nonce()
    if spec.code_dir is None and code_dir(target):
        spec = ProgramSpec(**{**spec.__dict__, "code_dir": code_dir(target)})
    program = build_program(spec, nonce)
    parser = RecordParser(nonce)
    counts = {"stdout": 0, "stderr": 0}
    tails = {"stdout": b"", "stderr": b""}
    total = 0
    last_flush = time.monotonic()

    # A sink that counts lines itself (the session store's) saves a pass over every byte.
    sink_counts = getattr(sink, "lines", None) if isinstance(getattr(sink, "lines", None), dict) else None

    def output(stream: str, data: bytes) -> None:
        nonlocal total
        sink.write(stream, data)
        total += len(data)
        if sink_counts is None:
            counts[stream] += data.count(b"\n")
        tail = tails[stream]
        tails[stream] = (tail + data[-_TAIL:])[-_TAIL:] if len(data) < _TAIL else data[-_TAIL:]
        if stream == "stdout":
            for rec in parser.feed(data):
                if on_record:
                    on_record(rec)
        if on_output:
            on_output(stream, data)

    async def ticker() -> None:
        # Output that arrives and then stops (a line, then a long compile) still reaches
        # the store within a fraction of a second.
        nonlocal last_flush
        while True:
            await asyncio.sleep(0.1)
            if time.monotonic() - last_flush > 0.1:
                sink.flush()
                last_flush = time.monotonic()

    tick = asyncio.ensure_future(ticker())
    try:
        runner = runner if runner is not None else SessionRunner(pool)
        exit = await runner.run(chain_for(target), program, output, cancel=cancel, timeout=timeout, fork=spec.fork)
    finally:
        tick.cancel()
    for rec in parser.finish():
        if on_record:
            on_record(rec)
    sink.flush()
    if sink_counts is not None:
        counts = dict(cast(_CountingSink, sink).lines)  # after flush: the store's own count of every line
    else:
        for stream, tail in tails.items():
            if tail and not tail.endswith(b"\n"):
                counts[stream] += 1
    records = parser.records
    facts = RunFacts(
        mode=spec.mode,
        exit_status=exit.exit_status,
        signal=exit.signal,
        timed_out=exit.timed_out,
        cancelled=exit.cancelled,
        transport_error=exit.transport_error,
        kinds=[r["kind"] for r in records],
        error=next((r for r in records if r["kind"] == "error"), None),
        lines=dict(counts),
        last_lines={
            s: [ln for ln in t.decode("utf-8", "replace").splitlines() if parser.marker.decode() not in ln][-3:]
            for s, t in tails.items()
        },
        seconds=exit.seconds,
    )
    classification, reason = classify(facts)
    if exit.note.startswith("no agent"):
        reason += f"; {exit.note}"
    state = next(({k: v for k, v in r.items() if k != "kind"} for r in records if r["kind"] == "state"), None)
    return RunOutcome(
        classification=classification,
        reason=reason,
        records=[r for r in records if r["kind"] != "state"],
        state=state if classification not in ("transport",) else None,
        lines=dict(counts),
        bytes=total,
        exit_status=exit.exit_status,
        signal=exit.signal,
        seconds=exit.seconds,
        failed_hop=exit.failed_hop,
        nonce=nonce,
        via=exit.note,
        facts=facts,
    )

"""The far end as the transport and agent tests see it: an output sink, a probe program, the
processes left at the far end (ps through the same hop chain)."""

from __future__ import annotations

import asyncio
import time

from sleuth.probes import HopChain, ProgramSpec, run_chain


class Sink:
    def __init__(self) -> None:
        self.chunks: list[tuple[str, bytes]] = []

    def write(self, stream: str, data: bytes) -> None:
        self.chunks.append((stream, data))

    def flush(self) -> None:
        pass

    def text(self, stream: str = "stdout") -> str:
        return b"".join(d for s, d in self.chunks if s == stream).decode()


def run(coro):
    return asyncio.run(coro)


def probe(source: str, **params) -> ProgramSpec:
    return ProgramSpec(probe="test", source=source, params=params)


def far_processes(harness, marker: str) -> list[str]:
    """`ps` at the far end (through the same jump → host → container chain)."""
    sink = Sink()
    chain = HopChain(harness.target(), ["pct", "exec", "200", "--", "ps", "-eo", "pid,args"])
    info = run(run_chain(chain, b"", sink.write))
    assert info.exit_status == 0, sink.text("stderr")
    return [line for line in sink.text().splitlines() if marker in line and "ps -eo" not in line]


def wait_gone(harness, marker: str, seconds: float = 5.0) -> list[str]:
    deadline = time.monotonic() + seconds
    left = far_processes(harness, marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = far_processes(harness, marker)
    return left


AGENT_MARK = "_agent_boot"  # in the agent's argv (the constant loader)


def agents_left(harness, seconds: float = 15.0) -> list[str]:
    """Agents of this harness's interpreter still running (not those other tests' brokers keep)."""
    import time

    deadline = time.monotonic() + seconds
    while True:
        left = [ln for ln in far_processes(harness, AGENT_MARK) if harness.python in ln]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)

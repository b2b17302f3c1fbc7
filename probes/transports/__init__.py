"""How sleuth reaches a target: one process-transport interface and its implementations.

* :mod:`.base` — :class:`Transport` / :class:`Process`, and :func:`run_process`, the one
  feed / stream / cancel / timeout / kill path every run goes through.
* :mod:`.local` — this machine: a subprocess in its own process group.
* :mod:`.ssh` — asyncssh on a pooled connection per target, jump hosts, known_hosts.
* :mod:`.mock` — an in-memory far end for unit tests of the layers above.

The resident agent (:mod:`sleuth.probes.agent`) starts through a transport and is one
itself: its probe runs are :class:`Process` objects too.
"""

from __future__ import annotations

import asyncio

from ..errors import TransportError
from ..hops import HopChain
from .base import READ_SIZE, Exit, ExitInfo, OnOutput, Process, Transport, run_process, wait_or_stop
from .local import LocalTransport
from .mock import MockTransport, Reply, probe_reply
from .ssh import SshPool, SshTransport, split_host

__all__ = [
    "READ_SIZE",
    "Exit",
    "ExitInfo",
    "LocalTransport",
    "MockTransport",
    "OnOutput",
    "Process",
    "Reply",
    "SshPool",
    "SshTransport",
    "Transport",
    "TransportError",
    "probe_reply",
    "run_chain",
    "run_process",
    "split_host",
    "transport_for",
    "wait_or_stop",
]


def transport_for(chain_or_local: HopChain | bool, pool: SshPool | None = None) -> Transport:
    """The default transport for a chain's target: local, or ssh on *pool*."""
    local = chain_or_local if isinstance(chain_or_local, bool) else chain_or_local.target.is_local
    return LocalTransport() if local else SshTransport(pool)


async def run_chain(
    chain: HopChain,
    stdin: bytes,
    on_output: OnOutput,
    *,
    pool: SshPool | None = None,
    cancel: asyncio.Event | None = None,
    timeout: float | None = None,
) -> ExitInfo:
    """Run *chain* with *stdin* on its default transport (a pool of its own if none given)."""
    transport = transport_for(chain, pool)
    try:
        return await run_process(transport, chain, stdin, on_output, cancel=cancel, timeout=timeout)
    finally:
        await transport.close()

"""The ssh transport: asyncssh, one connection per target kept open and reused.

Channels are cheap, handshakes are not: :class:`SshPool` holds one connection per target
(plus its jump tunnels, through ``tunnel=``), ``~/.ssh/config`` is honoured and known_hosts
enforced — an unknown or changed host key is an error that says how to accept it, never
silently accepted. Kill sends SIGKILL on the channel and closes it; the prelude's watchdog
at the far end kills the probe's process group when its stdout reader goes away, so the
remote process dies even where sshd ignores signal requests.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from .._lazy import LazyModule
from ..config import Target
from ..errors import TransportError
from ..hops import HopChain
from .base import READ_SIZE, Exit, Process, Transport

__all__ = ["SshPool", "SshTransport", "split_host"]

if TYPE_CHECKING:  # the type checker reads the real module
    import asyncssh
else:
    asyncssh = LazyModule("asyncssh")  # imported on the first connection

# AES-GCM first: one AEAD call a packet where chacha20-poly1305 takes three in asyncssh
# (measured on loopback: 208 vs 144 MB/s). Both are OpenSSH defaults; the server picks.
_CIPHERS = [
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes128-ctr",
    "aes192-ctr",
    "aes256-ctr",
]
# The session's receive window: how much the far end may send before we have read it. With
# asyncssh's 2 MiB, a busy moment on our side (the capture's writer, the GIL) stops the far
# end; 8 MiB lets it keep sending meanwhile (capture of 200 MB on loopback, medians of 7
# interleaved pairs: 0.64 → 0.76× raw ssh, within this VM's noise of ±0.1 from run to
# run). Memory: at most that much unread per running session.
_WINDOW = 8 << 20


def split_host(spec: str, user: str | None = None, port: int | None = None) -> tuple[str, str | None, int | None]:
    """'user@host:port' → (host, user, port); a bare alias stays an alias for ssh config."""
    if "@" in spec:
        user, spec = spec.rsplit("@", 1)
    if spec.startswith("[") and "]" in spec:  # [::1]:2222
        host, _, rest = spec[1:].partition("]")
        if rest.startswith(":") and rest[1:].isdigit():
            port = int(rest[1:])
        return host, user, port
    if spec.count(":") == 1 and spec.rsplit(":", 1)[1].isdigit():
        spec, p = spec.rsplit(":", 1)
        port = int(p)
    return spec, user, port


_CLIENT: type | None = None


class _ClientState(Protocol):
    """What sleuth reads of its asyncssh client: whether, and why, the connection went."""

    lost: Exception | None
    closed: bool


def _new_client() -> _ClientState:  # the class is made on first use (asyncssh loads then)
    global _CLIENT
    if _CLIENT is None:
        class Client(asyncssh.SSHClient):
            def __init__(self) -> None:
                self.lost: Exception | None = None
                self.closed = False

            def connection_lost(self, exc: Exception | None) -> None:
                self.closed = True
                self.lost = exc

        _CLIENT = Client
    return _CLIENT()


class SshPool:
    """One open connection per target (plus its jump tunnels), reused by every run."""

    def __init__(self) -> None:
        self._conns: dict[str, tuple[asyncssh.SSHClientConnection, _ClientState, list[asyncssh.SSHClientConnection]]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, target: Target) -> tuple[asyncssh.SSHClientConnection, _ClientState]:
        lock = self._locks.setdefault(target.name, asyncio.Lock())
        async with lock:
            held = self._conns.get(target.name)
            if held is not None and not held[1].closed:
                return held[0], held[1]
            if held is not None:
                self._drop(target.name)
            conn, client, tunnels = await _connect(target)
            self._conns[target.name] = (conn, client, tunnels)
            return conn, client

    def _drop(self, name: str) -> None:
        conn, _client, tunnels = self._conns.pop(name)
        for c in (conn, *reversed(tunnels)):
            c.close()

    def discard(self, target: Target) -> None:
        if target.name in self._conns:
            self._drop(target.name)

    async def close(self) -> None:
        for name in list(self._conns):
            conn, _client, tunnels = self._conns[name]
            self._drop(name)
            for c in (conn, *tunnels):
                try:
                    await asyncio.wait_for(c.wait_closed(), 5)
                except (TimeoutError, OSError, asyncssh.Error):
                    pass


def _known_hosts(target: Target) -> tuple[object, str]:
    if target.known_hosts:
        path = os.path.expanduser(target.known_hosts)
        return path, path
    return (), "~/.ssh/known_hosts"


def _host_key_message(host: str, port: int | None, known: object, shown: str) -> str:
    changed = False
    if isinstance(known, str) and Path(known).is_file():
        try:
            trusted = asyncssh.read_known_hosts(known).match(host, "", port or 22)[0]
            changed = bool(trusted)
        except (OSError, ValueError, asyncssh.Error):
            pass
    where = f"[{host}]:{port}" if port and port != 22 else host
    p = f"-p {port} " if port and port != 22 else ""
    if changed:
        return (
            f"the host key of {where} has CHANGED since it was recorded in {shown}; if the host was "
            f"really rebuilt, remove the old key (ssh-keygen -R '{where}' -f {shown}) and add the new one "
            f"after checking its fingerprint (ssh-keyscan {p}{host} >> {shown})"
        )
    return (
        f"the host key of {where} is not known ({shown}); check its fingerprint, then accept it "
        f"with: ssh-keyscan {p}{host} >> {shown}"
    )


def _describe(exc: BaseException, what: str, timeout: float) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return f"{what}: no answer within {timeout:g} s"
    if isinstance(exc, ConnectionRefusedError):
        return f"{what}: connection refused (nothing listens there, or a firewall said no)"
    if isinstance(exc, asyncssh.PermissionDenied):
        return f"{what}: authentication failed ({exc.reason}); check user and identity"
    if isinstance(exc, OSError):
        return f"{what}: {exc.strerror or exc}"
    if isinstance(exc, asyncssh.DisconnectError):
        return f"{what}: disconnected ({exc.reason})"
    return f"{what}: {exc}"


async def _connect(target: Target) -> tuple[asyncssh.SSHClientConnection, _ClientState, list[asyncssh.SSHClientConnection]]:
    known, shown = _known_hosts(target)
    keys = [os.path.expanduser(target.identity)] if target.identity else ()
    tunnels: list[asyncssh.SSHClientConnection] = []
    hops = [*target.jump, target.ssh]
    tunnel = None
    conn: asyncssh.SSHClientConnection | None = None
    client = _new_client()
    for index, spec in enumerate(hops, 1):
        last = index == len(hops)
        host, user, port = split_host(spec, target.user if last else None, target.port if last else None)
        what = f"hop {index} (ssh {spec}{' jump' if not last else ''})"
        options: dict[str, Any] = dict(
            known_hosts=known,
            connect_timeout=target.connect_timeout,
            keepalive_interval=15,
            encryption_algs=_CIPHERS,
        )
        if keys:
            options["client_keys"] = keys
        if user:
            options["username"] = user
        if port:
            options["port"] = port
        if tunnel is not None:
            options["tunnel"] = tunnel
        try:
            if last:
                conn, _ = await asyncssh.create_connection(cast(Any, lambda: client), host, **options)
            else:
                conn = await asyncssh.connect(host, **options)
        except asyncssh.HostKeyNotVerifiable:
            for c in reversed(tunnels):
                c.close()
            raise TransportError(f"{what}: " + _host_key_message(host, port, known, shown), index) from None
        except (TimeoutError, OSError, asyncssh.Error) as exc:
            for c in reversed(tunnels):
                c.close()
            raise TransportError(_describe(exc, what, target.connect_timeout), index) from None
        if not last:
            tunnels.append(conn)
        tunnel = conn
    assert conn is not None  # a target has at least its own hop
    return conn, client, tunnels


class _SshProcess(Process):
    def __init__(self, pool: SshPool, target: Target, conn: asyncssh.SSHClientConnection, client: _ClientState,
                 proc: asyncssh.SSHClientProcess) -> None:
        self.pool, self.target, self.conn, self.client, self.proc = pool, target, conn, client, proc
        self.hop = target.far_hop
        self.started = time.monotonic()
        self.killed = False
        self._streams = {"stdout": proc.stdout, "stderr": proc.stderr}

    def write(self, data: bytes) -> None:
        try:
            self.proc.stdin.write(data)
        except (OSError, asyncssh.Error):
            pass

    async def drain(self) -> None:
        try:
            await self.proc.stdin.drain()
        except (OSError, asyncssh.Error):
            pass

    def write_eof(self) -> None:
        try:
            self.proc.stdin.write_eof()
        except (OSError, asyncssh.Error):
            pass

    async def read(self, stream: str, size: int = READ_SIZE) -> bytes:
        try:
            return await self._streams[stream].read(size)
        except (OSError, asyncssh.Error):
            return b""

    def kill(self) -> None:
        self.killed = True
        try:
            self.proc.send_signal("KILL")
        except (OSError, asyncssh.Error):
            pass
        self.proc.close()  # the far end's watchdog sees its stdout reader go and kills the group

    async def wait(self) -> Exit:
        try:
            await self.proc.wait_closed()
        except (OSError, asyncssh.Error):
            pass
        proc = self.proc
        status = proc.exit_status if proc.exit_status not in (None, -1) or proc.exit_signal is None else None
        sig = proc.exit_signal[0] if proc.exit_signal else None
        if status is None and sig is None and not self.killed:
            await asyncio.sleep(0)  # let connection_lost land
            if self.client.closed or self.conn.is_closed():
                self.pool.discard(self.target)
                reason = f" ({self.client.lost})" if self.client.lost else ""
                return Exit(lost=f"hop {self.hop} (ssh {self.target.ssh}): the connection was lost after "
                            f"{time.monotonic() - self.started:.1f} s{reason}")
        return Exit(exit_status=status, signal=sig)


class SshTransport(Transport):
    """Runs a chain's remote command on a channel of the target's pooled connection."""

    def __init__(self, pool: SshPool | None = None) -> None:
        self.pool = pool or SshPool()
        self._own = pool is None

    async def start(self, chain: HopChain, *, fork: bool = False) -> Process:
        target = chain.target
        conn, client = await self.pool.get(target)  # TransportError names the hop
        try:
            proc = await conn.create_process(chain.remote_command, encoding=None, window=_WINDOW)
        except (OSError, asyncssh.Error) as exc:
            self.pool.discard(target)
            what = f"hop {target.far_hop} (ssh {target.ssh}): could not open a session"
            raise TransportError(_describe(exc, what, 0), target.far_hop) from None
        return _SshProcess(self.pool, target, conn, client, proc)

    async def close(self) -> None:
        if self._own:
            await self.pool.close()

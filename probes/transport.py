"""Transports: run one hop chain's command, stream its output, say how it ended.

* local — an asyncio subprocess in its own session (process group), killed as a group.
* ssh — asyncssh: one connection per target kept open and reused (channels are cheap,
  handshakes are not), jump hosts through ``tunnel=``, ``~/.ssh/config`` honoured,
  known_hosts enforced. Cancel sends SIGKILL on the channel and closes it; the prelude's
  watchdog at the far end kills the probe's process group when its stdout reader goes away,
  so the remote process dies even where sshd ignores signal requests.

Exceptions:
    TransportError   a hop could not be reached; ``hop`` says which (1-based), ``str()`` why
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from .config import Target
from .hops import HopChain

__all__ = ["ExitInfo", "SshPool", "TransportError", "run_chain", "split_host"]

OnOutput = Callable[[str, bytes], None]
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
READ_SIZE = 1 << 16


class TransportError(RuntimeError):
    def __init__(self, message: str, hop: int | None = None) -> None:
        super().__init__(message)
        self.hop = hop


@dataclass
class ExitInfo:
    exit_status: int | None = None
    signal: str | None = None
    timed_out: float | None = None
    cancelled: bool = False
    transport_error: str | None = None
    failed_hop: int | None = None
    seconds: float = 0.0
    note: str = ""  # how it ran, when that is worth saying (the agent, or why not)


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


# ---------------------------------------------------------------- local


async def _run_local(chain: HopChain, stdin: bytes, on_output: OnOutput, cancel: asyncio.Event, timeout: float) -> ExitInfo:
    t = chain.target
    env = {**os.environ, **t.env}
    started = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            *chain.local_argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=t.workdir or None,
            start_new_session=True,
        )
    except OSError as exc:
        return ExitInfo(transport_error=f"could not start {chain.local_argv[0]}: {exc.strerror or exc}", failed_hop=1)

    async def feed() -> None:
        try:
            proc.stdin.write(stdin)
            await proc.stdin.drain()
            proc.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass

    async def pump(reader: asyncio.StreamReader, name: str) -> None:
        while chunk := await reader.read(READ_SIZE):
            on_output(name, chunk)

    def kill() -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    info = ExitInfo()
    work = asyncio.ensure_future(asyncio.gather(feed(), pump(proc.stdout, "stdout"), pump(proc.stderr, "stderr"), proc.wait()))
    stop = asyncio.ensure_future(cancel.wait())
    done, _ = await asyncio.wait({work, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    if work not in done:
        if stop in done:
            info.cancelled = True
        else:
            info.timed_out = timeout
        kill()
        try:
            await asyncio.wait_for(work, 10)
        except TimeoutError:  # something escaped the group and holds the pipes
            pass
    stop.cancel()
    code = proc.returncode
    if code is not None and code < 0:
        info.signal = signal.Signals(-code).name
        info.exit_status = 128 - code
    else:
        info.exit_status = code
    info.seconds = time.monotonic() - started
    return info


# ---------------------------------------------------------------- ssh


class _Client(asyncssh.SSHClient):
    def __init__(self) -> None:
        self.lost: Exception | None = None
        self.closed = False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.lost = exc


class SshPool:
    """One open connection per target (plus its jump tunnels), reused by every run."""

    def __init__(self) -> None:
        self._conns: dict[str, tuple[asyncssh.SSHClientConnection, _Client, list[asyncssh.SSHClientConnection]]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, target: Target) -> tuple[asyncssh.SSHClientConnection, _Client]:
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


async def _connect(target: Target) -> tuple[asyncssh.SSHClientConnection, _Client, list[asyncssh.SSHClientConnection]]:
    known, shown = _known_hosts(target)
    keys = [os.path.expanduser(target.identity)] if target.identity else ()
    tunnels: list[asyncssh.SSHClientConnection] = []
    hops = [*target.jump, target.ssh]
    tunnel = None
    client = _Client()
    for index, spec in enumerate(hops, 1):
        last = index == len(hops)
        host, user, port = split_host(spec, target.user if last else None, target.port if last else None)
        what = f"hop {index} (ssh {spec}{' jump' if not last else ''})"
        options = dict(
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
                conn, _ = await asyncssh.create_connection(lambda: client, host, **options)
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
    return conn, client, tunnels


async def _run_ssh(
    pool: SshPool, chain: HopChain, stdin: bytes, on_output: OnOutput, cancel: asyncio.Event, timeout: float
) -> ExitInfo:
    t = chain.target
    started = time.monotonic()
    try:
        conn, client = await pool.get(t)
    except TransportError as exc:
        return ExitInfo(transport_error=str(exc), failed_hop=exc.hop, seconds=time.monotonic() - started)
    hop = len(t.jump) + 1
    try:
        proc = await conn.create_process(chain.remote_command, encoding=None)
    except (OSError, asyncssh.Error) as exc:
        pool.discard(t)
        return ExitInfo(transport_error=_describe(exc, f"hop {hop} (ssh {t.ssh}): could not open a session", 0), failed_hop=hop)

    async def feed() -> None:
        try:
            proc.stdin.write(stdin)
            proc.stdin.write_eof()
        except (OSError, asyncssh.Error):
            pass

    async def pump(reader: asyncssh.SSHReader, name: str) -> None:
        try:
            while chunk := await reader.read(READ_SIZE):
                on_output(name, chunk)
        except (OSError, asyncssh.Error):
            pass

    info = ExitInfo()
    work = asyncio.ensure_future(
        asyncio.gather(feed(), pump(proc.stdout, "stdout"), pump(proc.stderr, "stderr"), proc.wait_closed())
    )
    stop = asyncio.ensure_future(cancel.wait())
    done, _ = await asyncio.wait({work, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    if work not in done:
        if stop in done:
            info.cancelled = True
        else:
            info.timed_out = timeout
        try:
            proc.send_signal("KILL")
        except (OSError, asyncssh.Error):
            pass
        proc.close()  # the far end's watchdog sees its stdout reader go and kills the group
        try:
            await asyncio.wait_for(work, 10)
        except (TimeoutError, OSError, asyncssh.Error):
            pass
    stop.cancel()
    info.exit_status = proc.exit_status if proc.exit_status not in (None, -1) or proc.exit_signal is None else None
    if proc.exit_signal:
        info.signal = proc.exit_signal[0]
    if info.exit_status is None and info.signal is None and not (info.cancelled or info.timed_out):
        await asyncio.sleep(0)  # let connection_lost land
        if client.closed or conn.is_closed():
            pool.discard(t)
            reason = f" ({client.lost})" if client.lost else ""
            info.transport_error = (
                f"hop {hop} (ssh {t.ssh}): the connection was lost after {time.monotonic() - started:.1f} s{reason}"
            )
            info.failed_hop = hop
    info.seconds = time.monotonic() - started
    return info


async def run_chain(
    chain: HopChain,
    stdin: bytes,
    on_output: OnOutput,
    *,
    pool: SshPool | None = None,
    cancel: asyncio.Event | None = None,
    timeout: float | None = None,
) -> ExitInfo:
    """Run *chain* with *stdin*, calling ``on_output(stream, bytes)`` as output arrives."""
    cancel = cancel or asyncio.Event()
    timeout = chain.target.timeout if timeout is None else timeout
    if chain.target.is_local:
        return await _run_local(chain, stdin, on_output, cancel, timeout)
    if pool is None:
        pool = SshPool()
        try:
            return await _run_ssh(pool, chain, stdin, on_output, cancel, timeout)
        finally:
            await pool.close()
    return await _run_ssh(pool, chain, stdin, on_output, cancel, timeout)

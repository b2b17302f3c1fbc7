"""Reading and replacing one file on a target, for remedies.

Plain ssh targets use SFTP on the pooled connection (write to a temporary name, keep the
original beside it as ``NAME.sleuth-orig``, then ``posix-rename`` over it). A container
target's files are not on the ssh host's filesystem, so there the same steps go through
the hop chain: ``cat -- PATH`` to read, and a small Python program on stdin (the bytes
inside it, base64) to write atomically — no shell ever parses the path or the content.
"""

from __future__ import annotations

import base64
import posixpath

import asyncssh

from .config import Target
from .errors import TransportError
from .hops import HopChain, container_prefix
from .transports import SshPool, run_chain

__all__ = ["read_file", "write_file", "ORIGINAL_SUFFIX", "remote_path"]

ORIGINAL_SUFFIX = ".sleuth-orig"

_WRITER = """
import base64, os, sys
path, data, keep = {path!r}, base64.b64decode({data!r}), {keep!r}
if keep and os.path.exists(path) and not os.path.exists(path + keep):
    with open(path, "rb") as src, open(path + keep, "wb") as dst:
        dst.write(src.read())
tmp = path + ".sleuth-tmp"
mode = os.stat(path).st_mode & 0o7777 if os.path.exists(path) else 0o644
with open(tmp, "wb") as fh:
    fh.write(data)
    fh.flush()
    os.fsync(fh.fileno())
os.chmod(tmp, mode)
os.replace(tmp, path)
"""


def remote_path(target: Target, path: str) -> str:
    base = target.code_remote or target.workdir or ""
    return path if posixpath.isabs(path) or not base else posixpath.join(base, path)


class _Sink:
    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.err: list[bytes] = []

    def __call__(self, stream: str, data: bytes) -> None:
        (self.out if stream == "stdout" else self.err).append(data)


async def read_file(target: Target, path: str, pool: SshPool) -> bytes:
    if container_prefix(target):
        sink = _Sink()
        info = await run_chain(HopChain(target, [*container_prefix(target), "cat", "--", path]), b"", sink, pool=pool, timeout=60)
        if info.transport_error:
            raise TransportError(info.transport_error, info.failed_hop)
        if info.exit_status != 0:
            raise FileNotFoundError(f"{target.name}:{path}: {b''.join(sink.err).decode(errors='replace').strip()}")
        return b"".join(sink.out)
    conn, _client = await pool.get(target)
    async with conn.start_sftp_client() as sftp:
        try:
            async with sftp.open(path, "rb") as fh:
                return await fh.read()
        except asyncssh.SFTPNoSuchFile:
            raise FileNotFoundError(f"{target.name}:{path}: no such file") from None


async def write_file(target: Target, path: str, data: bytes, pool: SshPool, keep_original: bool = True) -> None:
    keep = ORIGINAL_SUFFIX if keep_original else ""
    if container_prefix(target):
        program = _WRITER.format(path=path, data=base64.b64encode(data).decode(), keep=keep).encode()
        sink = _Sink()
        info = await run_chain(HopChain.python(target), program, sink, pool=pool, timeout=60)
        if info.transport_error:
            raise TransportError(info.transport_error, info.failed_hop)
        if info.exit_status != 0:
            raise OSError(f"{target.name}:{path}: {b''.join(sink.err).decode(errors='replace').strip()[-300:]}")
        return
    conn, _client = await pool.get(target)
    async with conn.start_sftp_client() as sftp:
        if keep and await sftp.exists(path) and not await sftp.exists(path + keep):
            async with sftp.open(path, "rb") as src, sftp.open(path + keep, "wb") as dst:
                await dst.write(await src.read())
        tmp = path + ".sleuth-tmp"
        async with sftp.open(tmp, "wb") as fh:
            await fh.write(data)
        if await sftp.exists(path):
            await sftp.chmod(tmp, (await sftp.stat(path)).permissions & 0o7777)
        await sftp.posix_rename(tmp, path)

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
from typing import TYPE_CHECKING

from ._lazy import LazyModule
from .config import Target
from .errors import TransportError
from .hops import HopChain, container_prefix
from .transports import SshPool, run_chain

if TYPE_CHECKING:  # the type checker reads the real module
    import asyncssh
else:
    asyncssh = LazyModule("asyncssh")  # imported when a remote file is first read or written

__all__ = ["ORIGINAL_SUFFIX", "list_tree", "read_file", "remote_path", "write_file"]

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


# Lists a code tree's Python files at the far end (through the hop chain, so a container's
# files too): hidden folders, caches, venvs and builds skipped, as tree_files does here.
_LISTER = """
import json, os
root, skip, out = {root!r}, {skip!r}, []
for here, dirs, files in os.walk(root):
    dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in skip
                     and not os.path.exists(os.path.join(here, d, "pyvenv.cfg")))
    out += [os.path.join(here, f) for f in sorted(files) if f.endswith(".py")]
print(json.dumps({{"root_exists": os.path.isdir(root), "files": out}}))
"""
SKIP_DIRS = ("__pycache__", "node_modules", "site-packages", "build", "dist")


async def list_tree(target: Target, root: str, pool: SshPool) -> list[str]:
    """The Python files under *root* on *target* (absolute paths), for a whole-tree remedy."""
    sink = _Sink()
    program = _LISTER.format(root=root, skip=list(SKIP_DIRS)).encode()
    info = await run_chain(HopChain.python(target), program, sink, pool=pool, timeout=60)
    if info.transport_error:
        raise TransportError(info.transport_error, info.failed_hop)
    import json

    try:
        found = json.loads(b"".join(sink.out).decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise OSError(f"{target.name}:{root}: could not list it: {b''.join(sink.err).decode(errors='replace')[-300:]}") from None
    if not found["root_exists"]:
        raise FileNotFoundError(f"{target.name}:{root}: no such directory")
    return list(found["files"])


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
            await sftp.chmod(tmp, ((await sftp.stat(path)).permissions or 0o644) & 0o7777)
        await sftp.posix_rename(tmp, path)

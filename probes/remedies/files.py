"""The file a remedy changes, wherever it is: this machine, or a target reached over ssh
(SFTP) or through its hop chain (a container). One interface, so previewing, applying and
reverting are written once (``probes.remedies``) and checked the same way everywhere.

Every failure to read or write is a :class:`RemedyError` that names the file; a target that
cannot be reached is a :class:`TransportError` (exit status 1), never "the file is not there".
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePath, PurePosixPath
from typing import TypeVar

from ..config import Target
from ..errors import RemedyError, TransportError
from ..remote_files import ORIGINAL_SUFFIX, list_tree, read_file, remote_path, write_file
from ..transports import SshPool

__all__ = ["CodeFile", "LocalFile", "RemoteFile", "code_file", "remote_tree"]

T = TypeVar("T")


class CodeFile(ABC):
    """One source file a remedy may change."""

    path: PurePath  # where it is, on its own machine

    @property
    @abstractmethod
    def key(self) -> str:
        """What the session records: an absolute local path, or ``target:/abs/path``."""

    @abstractmethod
    def exists(self) -> bool: ...

    @abstractmethod
    def read(self) -> bytes: ...

    @abstractmethod
    def replace(self, data: bytes, keep_original: bool = True) -> str | None:
        """Replace the contents atomically; where the original was kept, if anywhere."""

    @abstractmethod
    def sibling(self, relative: str) -> CodeFile:
        """Another file of the same tree, relative to this one's directory (a relative path,
        subfolders and all: ``pkg/model.py``)."""

    def read_text(self) -> str | None:
        """Its text, or None when it does not exist (for a look at a neighbouring module)."""
        return self.read().decode("utf-8", "replace") if self.exists() else None


class LocalFile(CodeFile):
    def __init__(self, path: Path | str) -> None:
        self.local = Path(path)  # the same path, with what a file on this machine can do
        self.path = self.local

    @property
    def key(self) -> str:
        return str(self.local.resolve())

    def exists(self) -> bool:
        return self.local.is_file()

    def read(self) -> bytes:
        try:
            return self.local.read_bytes()
        except OSError as exc:
            raise RemedyError(f"{self.path}: {exc.strerror or exc}") from None

    def replace(self, data: bytes, keep_original: bool = True) -> str | None:
        """Write a temporary file beside it, fsync, keep the mode, rename over it. The original
        bytes are kept in the session, not beside the file."""
        path = self.local
        try:
            mode = path.stat().st_mode if path.exists() else 0o644
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".sleuth-tmp", dir=path.parent)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.chmod(tmp, mode & 0o7777)
                os.replace(tmp, path)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            raise RemedyError(f"{path}: {exc.strerror or exc}; nothing written") from None
        return None

    def sibling(self, relative: str) -> CodeFile:
        return LocalFile(self.local.parent / relative)  # relative may name a subfolder (pkg/model.py)


class RemoteFile(CodeFile):
    """A file on a target: SFTP for plain ssh, the hop chain for a container; the original
    is kept beside it (``NAME.sleuth-orig``) the first time it is replaced."""

    def __init__(self, target: Target, path: str) -> None:
        self.target = target
        self.path = PurePosixPath(path)

    @property
    def key(self) -> str:
        return f"{self.target.name}:{self.path}"

    def _run(self, op: Callable[[SshPool], Awaitable[T]]) -> T:
        async def go() -> T:
            pool = SshPool()
            try:
                return await op(pool)
            finally:
                await pool.close()

        try:
            return asyncio.run(go())
        except TransportError as exc:  # the target was not reached: not an answer about the file
            raise TransportError(f"{self.key}: {exc}", hop=exc.hop) from None
        except OSError as exc:
            raise RemedyError(f"{self.key}: {exc}") from None

    def exists(self) -> bool:
        try:
            self.read()
        except RemedyError:
            return False
        return True

    def read(self) -> bytes:
        return self._run(lambda pool: read_file(self.target, str(self.path), pool))

    def replace(self, data: bytes, keep_original: bool = True) -> str | None:
        self._run(lambda pool: write_file(self.target, str(self.path), data, pool, keep_original=keep_original))
        return str(self.path) + ORIGINAL_SUFFIX if keep_original else None

    def sibling(self, relative: str) -> CodeFile:
        return RemoteFile(self.target, posixpath.join(str(self.path.parent), relative))


def remote_tree(target: Target, root: str) -> list[RemoteFile]:
    """The Python files of a code tree on *target*, as files a remedy can change."""
    rroot = remote_path(target, root)

    async def go() -> list[str]:
        pool = SshPool()
        try:
            return await list_tree(target, rroot, pool)
        finally:
            await pool.close()

    try:
        return [RemoteFile(target, path) for path in asyncio.run(go())]
    except TransportError as exc:
        raise TransportError(f"{target.name}:{rroot}: {exc}", hop=exc.hop) from None
    except OSError as exc:
        raise RemedyError(f"{target.name}:{rroot}: {exc}") from None


def code_file(target: Target, path: str | Path) -> CodeFile:
    """*path* on *target*: a local path as given, or a remote one relative to the target's
    ``code.remote`` (or workdir)."""
    if target.is_local:
        return LocalFile(path)
    return RemoteFile(target, remote_path(target, str(path)))

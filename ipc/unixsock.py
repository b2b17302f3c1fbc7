"""The broker's Unix sockets: where they are, and whether one may be trusted with anything.

A command hands the broker its whole environment and its terminal's descriptors (app/quick.py),
and a run its program (probes/broker.py). Before either sends a byte, the socket is checked:
its folder is this user's and writable by no one else, the socket file is this user's, and the
process listening on it runs as this user (SO_PEERCRED, read after connecting). A socket that
fails any of these gets nothing: the caller runs the command itself and says why, once.

Both sides take the paths from here: agents.sock and agents.exec in the project's .sleuth/,
or, where that path is too long for a socket, in a 0700 folder of the user's under the
system's temp directory.

Standard library only: app/quick.py decides before the rest of sleuth is imported.
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import struct
import sys
import tempfile
from pathlib import Path

__all__ = ["UntrustedSocket", "agent_socket", "caller_state", "command_socket", "connect_trusted", "say_untrusted"]

_MAX_PATH = 100  # bytes: sun_path is 108 with its NUL; kept short of it


class UntrustedSocket(Exception):
    """A socket that must not be sent anything; the message says why."""


def _folder(sleuth_dir: Path, create: bool) -> tuple[Path, str]:
    """The folder of the sockets and the sockets' stem."""
    resolved = sleuth_dir.resolve()
    if len(str(resolved / "agents.sock").encode()) < _MAX_PATH:
        return resolved, "agents"
    private = Path(tempfile.gettempdir()) / f"sleuth-{os.getuid()}"
    if create:
        private.mkdir(mode=0o700, exist_ok=True)
    return private, hashlib.sha256(str(resolved).encode()).hexdigest()[:16]


def agent_socket(sleuth_dir: Path, create: bool = False) -> Path:
    """Where the broker of *sleuth_dir* takes runs (probes/broker.py)."""
    folder, stem = _folder(sleuth_dir, create)
    return folder / f"{stem}.sock"


def command_socket(sleuth_dir: Path, create: bool = False) -> Path:
    """Where the broker of *sleuth_dir* takes whole commands (app/quick.py)."""
    folder, stem = _folder(sleuth_dir, create)
    return folder / f"{stem}.exec"


def _not_mine(path: Path, is_kind, kind: str) -> tuple[str | None, os.stat_result | None]:
    """Why *path* (not followed if a link) is not a *kind* of this user's, else (None, its stat)."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror})", None
    if not is_kind(st.st_mode):
        return f"{path} is not a {kind}", None
    if st.st_uid != os.getuid():
        return f"{path} belongs to uid {st.st_uid}, not to you (uid {os.getuid()})", None
    return None, st


def folder_problem(folder: Path) -> str | None:
    """Why *folder* cannot hold this user's sockets, or None: it must be a real folder (not a
    link) of this user's that no one else can write to (else another user can put a listener
    in place of the broker's)."""
    said, st = _not_mine(folder, stat.S_ISDIR, "folder")
    if st is None:
        return said
    if st.st_mode & 0o022:
        who = " and ".join(w for w, bit in (("its group", 0o020), ("others", 0o002)) if st.st_mode & bit)
        return f"{folder} is writable by {who} (mode {st.st_mode & 0o777:o})"
    return None


def socket_problem(path: Path) -> str | None:
    """Why *path* is not a socket of this user's in a private folder, or None."""
    return folder_problem(path.parent) or _not_mine(path, stat.S_ISSOCK, "socket")[0]


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a connected Unix socket (None where the
    system cannot say)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return uid


def connect_trusted(path: Path, timeout: float | None = None) -> socket.socket:
    """A socket connected to *path* once it is known to be this user's broker's.

    Raises FileNotFoundError / ConnectionRefusedError where nothing listens (the caller may
    start a broker), :class:`UntrustedSocket` where something is there that must get nothing."""
    if not os.path.lexists(path):
        raise FileNotFoundError(str(path))
    said = socket_problem(path)
    if said:
        raise UntrustedSocket(said)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if timeout is not None:
            sock.settimeout(timeout)
        sock.connect(str(path))
        uid = peer_uid(sock)
        if uid is None:
            raise UntrustedSocket(f"{path}: this system cannot say who listens on it (no SO_PEERCRED)")
        if uid != os.getuid():
            raise UntrustedSocket(f"{path} is served by uid {uid}, not by you (uid {os.getuid()})")
        sock.settimeout(None)
        return sock
    except BaseException:
        sock.close()
        raise


_SAID: set[str] = set()


def say_untrusted(exc: UntrustedSocket) -> None:
    """Once per process: the broker's socket was not used, and why."""
    text = str(exc)
    if text not in _SAID:
        _SAID.add(text)
        print(f"sleuth: not using the agent broker: {text}; sent it nothing, running here", file=sys.stderr)


# What a served command or run takes from the broker rather than from the caller unless they
# agree: the environment sleuth, ssh and a local target's processes read, the umask, the
# user's groups, the resource limits (ulimit). A caller that differs in any of them gets no broker (it steps aside).
_ENV_NAMES = ("HOME", "USER", "LOGNAME", "PATH", "SHELL", "SSH_AUTH_SOCK", "SSH_AGENT_PID", "TMPDIR", "VIRTUAL_ENV",
              "CONDA_PREFIX", "PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH", "LD_PRELOAD", "http_proxy",
              "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL",
              "LANG", "LC_ALL")
_ENV_PREFIXES = ("XDG_", "SSH_", "SLEUTH_", "TORCH", "TRITON_", "CUDA_", "NCCL_", "NVIDIA_", "HF_", "KRB5", "UV_",
                 "PIP_")
_ENV_VOLATILE = ("SSH_TTY", "SSH_CONNECTION", "SSH_CLIENT", "SLEUTH_NO_BROKER_EXEC", "SLEUTH_AGENT_IDLE", "XDG_SESSION_ID",
                 "XDG_SESSION_TYPE", "XDG_SESSION_CLASS", "XDG_SESSION_COOKIE", "XDG_VTNR", "XDG_SEAT")


def _umask() -> int:
    """This process's umask, read without setting it (os.umask would leave it 0 for a moment,
    under any other thread's new files)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def caller_state(environ: dict[str, str] | None = None) -> dict[str, object]:
    """What of this process a broker must share to act for it (see above)."""
    env = dict(os.environ if environ is None else environ)
    picked = {k: v for k, v in env.items()
              if (k in _ENV_NAMES or k.startswith(_ENV_PREFIXES)) and k not in _ENV_VOLATILE}
    return {"env": dict(sorted(picked.items())), "umask": _umask(), "uid": os.getuid(), "gid": os.getgid(),
            "groups": sorted(os.getgroups()), "rlimits": _rlimits()}


def _rlimits() -> dict[str, list[int]]:
    """The limits a child inherits that a job notices: open files, core dumps, address space,
    stack, locked memory (NCCL's and RDMA's pinned buffers)."""
    import resource

    out = {}
    for name in ("RLIMIT_NOFILE", "RLIMIT_CORE", "RLIMIT_AS", "RLIMIT_STACK", "RLIMIT_MEMLOCK"):
        which = getattr(resource, name, None)
        if which is not None:
            out[name[7:].lower()] = list(resource.getrlimit(which))
    return out


def state_differs(mine: dict[str, object], theirs: object) -> str | None:
    """Which part of a caller's state differs from *mine*, in words; None when they agree."""
    if not isinstance(theirs, dict):
        return "the caller did not say its environment (an older sleuth)"
    for key in ("uid", "gid", "groups", "umask", "rlimits"):
        if mine.get(key) != theirs.get(key):
            return f"its {key} differ from the broker's" if key.endswith("s") else f"its {key} differs from the broker's"
    a, b = mine.get("env") or {}, theirs.get("env") or {}
    assert isinstance(a, dict) and isinstance(b, dict)
    names = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    if names:
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        return f"its environment differs from the broker's in {shown}"
    return None

"""One stack frame, classified: the job's own or a library's, the collective a thread waits in,
the training framework's loop around the job's code, and the native wait (a collective, the
rendezvous store, the GPU) below Python. Pure: frames are ``[name, path, line]`` lists as the
stacks probe sends them (probes/scripts/stacks.py), innermost first."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

COLLECTIVES = frozenset({
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce_scatter", "reduce_scatter_tensor",
    "broadcast", "broadcast_object_list", "reduce", "gather", "gather_object", "scatter", "scatter_object_list",
    "barrier", "monitored_barrier", "all_to_all", "all_to_all_single", "send", "recv", "isend", "irecv",
    "batch_isend_irecv", "wait", "_wait",
})
_LIBRARY = re.compile(r"/(site|dist)-packages/|/lib/python\d+(\.\d+)?/|^<")
# the frameworks whose training loop lives in site-packages: named beside the job's own frame
_FRAMEWORK = re.compile(r"/(?:site|dist)-packages/(lightning_fabric|pytorch_lightning|lightning|transformers|accelerate"
                        r"|deepspeed)/")
# a thread of the job's own code waiting on another: Python's lock and wait functions innermost,
# or a `with lock:` / `.acquire(` line (C-level acquire shows no Python frame); not str.join,
# dict.get, or a torch Work's .wait() (a collective, read as one)
_WAIT_FUNCS = re.compile(r"^(?:wait|acquire|join|get|put|_wait_for_tstate_lock|recv|recv_bytes|poll)$")
_WAIT_FILES = re.compile(r"/threading\.py$|/queue\.py$|/multiprocessing/(synchronize|queues|connection)\.py$")
_LOCK_LINE = re.compile(r"^\s*(?:async\s+)?with\s+[\w.\[\]]*(?:lock|Lock|LOCK|mutex|Mutex|MUTEX|cond|Cond|COND|sem|Sem|SEM)"
                        r"[\w.\[\]()]*\s*:|\.acquire\(")
# a rank waiting in C++, by its innermost native frames (py-spy --native): a collective (DDP's
# reducer, a ProcessGroup's work), the rendezvous store, or the GPU
_NATIVE_WAITS = [
    ("collective", "the DDP reducer's gradient all_reduce", re.compile(r"^c10d::Reducer::")),
    ("collective", "a ProcessGroup work wait", re.compile(
        r"^c10d::(?:ProcessGroup\w*::)?(?:Work\w*::)?(?:wait|synchronize\w*|Wait\w*)$|^c10d::.*Work\w*::wait|"
        r"^c10d::ProcessGroupGloo::|^gloo::|^nccl\w+$|^c10d::ProcessGroupNCCL::")),
    ("store", "the rendezvous store (a store-based barrier or rendezvous)", re.compile(
        r"^c10d::(?:TCPStore|PrefixStore|FileStore|HashStore|detail::TCPClient|Store)\b")),
    ("gpu", "cuda sync: the host thread waits on the GPU", re.compile(
        r"^cu(?:da)?(?:Stream|Event|Ctx|Device)Synchronize|^c10::cuda::.*[sS]ynchron|^at::native::_local_scalar_dense_cuda|"
        r"^cudaMemcpy(?:Async)?$|^cuMemcpy")),
]


def is_library(path: str | None) -> bool:
    """A frame of Python's own library or an installed package (torch's included), not the job's."""
    return not path or bool(_LIBRARY.search(path))


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Where:
    """The innermost frame of the job's own code in a thread, the collective below it, and the
    innermost frame of all (where ranks that share the job's frame may still differ)."""

    function: str
    file: str
    line: int
    collective: str | None = None
    top: tuple[str, str, int] | None = None  # the innermost frame, where it is not the job's own

    def key(self) -> tuple:
        return (self.function, self.file, self.line, self.collective, self.top)

    def text(self) -> str:
        said = f"{self.function} at {_short(self.file)}:{self.line}"
        if self.collective:
            said += f" ({self.collective})"
        return said


def _python_frames(frames: list[list[Any]]) -> list[list[Any]]:
    return [f for f in frames if f[2] not in (0, None) or str(f[1] or "").endswith(".py") or str(f[1]).startswith("<")]


def _where(frames: list[list[Any]]) -> Where | None:
    frames = _python_frames(frames)
    collective = None
    for i, (name, path, line) in enumerate(frames):  # innermost first
        short = str(name).rsplit(".", 1)[-1]
        if collective is None and path and "torch/distributed/" in str(path) and short in COLLECTIVES:
            collective = short
        if not is_library(path):
            top = (str(frames[0][0]), str(frames[0][1]), int(frames[0][2] or 0)) if i else None
            return Where(str(name), str(path), int(line or 0), collective, top)
    if frames:  # only library frames: say the innermost one
        name, path, line = frames[0]
        return Where(str(name), str(path or "?"), int(line or 0), collective)
    return None


def framework_frame(frames: list[list[Any]]) -> dict[str, Any] | None:
    """The innermost frame of a training framework (Lightning, transformers, accelerate,
    DeepSpeed): where the loop that called the job's code waits."""
    for name, path, line in _python_frames(frames):
        m = _FRAMEWORK.search(str(path or ""))
        if m:
            return {"package": m.group(1), "function": str(name), "file": str(path), "line": int(line or 0)}
    return None


def native_wait(frames: list[list[Any]]) -> dict[str, Any] | None:
    """What a thread waits in below Python, from its native frames innermost first (up to the
    first Python frame): a collective, the store, the GPU; None when it is none of these."""
    for name, path, line in frames:
        if line not in (0, None) or str(path or "").endswith(".py"):
            break  # the Python frames: what is below them was read
        for kind, what, pattern in _NATIVE_WAITS:
            if pattern.search(str(name)):
                return {"kind": kind, "frame": str(name)[:120], "what": what}
    return None

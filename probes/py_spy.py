"""py-spy at the far end: the stacks probe needs it, and a target may not have it.

sleuth depends on py-spy (a static binary in its wheel, beside the interpreter). For a remote
target sleuth first asks whether the far end has one (on PATH, beside its python, or in
``$XDG_CACHE_HOME/sleuth/bin``, default ``~/.cache/sleuth/bin``); if not, and the far end is
the same OS and machine architecture as here, it copies this one there over the existing
channel (the bytes inside a small program on stdin, checked by sha256, written atomically).
Otherwise the probe reads /proc only and says why.
"""

from __future__ import annotations

import base64
import hashlib
import platform
import shutil
import sys
from pathlib import Path
from typing import Any

from .config import Target
from .protocol import ProgramSpec
from .runner import Runner, execute

__all__ = ["ensure_py_spy", "local_py_spy"]

_CHECK = """
import os, platform, shutil, sys
home = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "sleuth", "bin")
cands = [shutil.which("py-spy"), os.path.join(os.path.dirname(sys.executable), "py-spy"), os.path.join(home, "py-spy")]
found = next((c for c in cands if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)
emit("result", found=found, home=home, machine=platform.machine(), system=platform.system())
"""

_WRITE = """
import base64, hashlib, os
data = base64.b64decode(params["data"])
if hashlib.sha256(data).hexdigest() != params["sha"]:
    emit("result", ok=False, reason="the bytes arrived changed (sha256 differs)")
else:
    os.makedirs(params["home"], exist_ok=True)
    tmp = os.path.join(params["home"], ".py-spy.%d.tmp" % os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o755)
    path = os.path.join(params["home"], "py-spy")
    os.replace(tmp, path)
    emit("result", ok=True, path=path)
"""


class _Discard:
    def write(self, stream: str, data: bytes) -> None:
        pass

    def flush(self) -> None:
        pass


def local_py_spy() -> str | None:
    """The py-spy that came with sleuth (its wheel puts the binary beside the interpreter), or on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.is_file() else shutil.which("py-spy")


def _result(outcome: Any) -> dict[str, Any] | None:
    if outcome.classification != "completed":
        return None
    return next((r for r in outcome.records if r.get("kind") == "result"), None)


async def ensure_py_spy(target: Target, runner: Runner | None = None) -> tuple[str | None, str]:
    """(the far end's py-spy path or None, what was done: "found", "copied", or why not)."""
    if target.is_local:
        path = local_py_spy()
        return path, "found" if path else "no py-spy here (pip install py-spy)"
    check = await execute(target, ProgramSpec(probe="py-spy-check", source=_CHECK, filename="py_spy_check.py", fork=True),
                          _Discard(), runner=runner, timeout=60)
    found = _result(check)
    if found is None:
        return None, f"could not ask {target.name} ({check.classification}: {check.reason})"
    if found.get("found"):
        return str(found["found"]), "found"
    mine = local_py_spy()
    if mine is None:
        return None, "no py-spy here to copy (pip install py-spy)"
    if found.get("system") != platform.system() or found.get("machine") != platform.machine():
        return None, (f"{target.name} is {found.get('system')} {found.get('machine')}, this machine "
                      f"{platform.system()} {platform.machine()}: install py-spy there (pip install py-spy)")
    data = Path(mine).read_bytes()
    spec = ProgramSpec(probe="py-spy-copy", source=_WRITE, filename="py_spy_copy.py",
                       params={"data": base64.b64encode(data).decode("ascii"), "sha": hashlib.sha256(data).hexdigest(),
                               "home": found["home"]})
    wrote = _result(await execute(target, spec, _Discard(), runner=runner, timeout=300))
    if not wrote or not wrote.get("ok"):
        return None, f"copying py-spy to {target.name} failed: {(wrote or {}).get('reason', 'no answer')}"
    return str(wrote["path"]), "copied"

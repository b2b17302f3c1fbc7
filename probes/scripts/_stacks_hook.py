"""The stacks probe's part that asks sleuth's dump hook (`sleuth probe run --shell CMD --hook`)
where py-spy cannot read a process: which processes registered it, one faulthandler dump of
each on SIGUSR2, and the tidying of the hook's files of processes that are gone. Sent before
probes/scripts/stacks.py (its PROBE says ``"parts"``) and run in the same namespace; standard
library only, Python 3.8+."""

import os
import re
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the prelude's helper part, and the part on /proc, in this namespace at the far end
    from ..far.common import cache_folder
    from ._stacks_proc import read


SIGUSR2 = 12


def hook_dir(env):
    if env and env.get("SLEUTH_STACKS_DIR"):
        return env["SLEUTH_STACKS_DIR"]
    return cache_folder("hook", "dumps")


def hooked(p):
    """Whether process *p* registered sleuth's dump hook: its marker file, and SIGUSR2 caught
    (SigCgt). Anything else is never signalled: the default action would kill the rank."""
    import signal

    sig = getattr(signal, "SIGUSR2", SIGUSR2)
    if not os.path.isfile(os.path.join(hook_dir(p["env"]), f"hooked-{p['pid']}")):
        return False
    m = re.search(r"^SigCgt:\s+([0-9a-f]+)", read(f"/proc/{p['pid']}/status") or "", re.M)
    return bool(m and int(m.group(1), 16) & (1 << (int(sig) - 1)))


def tidy_hook_dirs(procs):
    """The hook's files of processes that are gone (a marker, a dump, a FIFO and its answer per
    process): removed, so a later pid that reuses the number is never taken for hooked."""
    dirs = {hook_dir(p["env"]) for p in procs}
    dirs.add(hook_dir(None))
    for folder in dirs:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            m = re.match(r"^(?:hooked|stacks|fr)-(\d+)(?:\.txt|\.fifo|\.json|\.json\.tmp)?$", name)
            if m and not os.path.exists(f"/proc/{m.group(1)}"):
                try:
                    os.unlink(os.path.join(folder, name))
                except OSError:
                    pass


def parse_faulthandler(text):
    threads = []
    for block in re.split(r"\n(?=(?:Current thread|Thread) 0x)", text.strip()):
        head = re.match(r"(Current thread|Thread) (0x[0-9a-f]+)", block)
        if not head:
            continue
        frames = [[m.group(3), m.group(1), int(m.group(2))]
                  for m in re.finditer(r'^\s+File "(.*)", line (\d+) in (\S+)', block, re.M)]
        # the main thread runs the script's <module> frame; under `python -m` runpy's frames are
        # outermost, the module's <module> frame above them
        name = "MainThread" if any(f[0] == "<module>" for f in frames) else "thread " + head.group(2)
        threads.append({"tid": None, "name": name, "frames": frames})
    return threads


def sample_hook(procs, timeout):
    """One faulthandler dump of every hooked process: signal them all, then read what each wrote."""
    import signal

    sent = {}
    for p in procs:
        path = os.path.join(hook_dir(p["env"]), f"stacks-{p['pid']}.txt")
        try:
            size = os.path.getsize(path)
            os.kill(p["pid"], getattr(signal, "SIGUSR2", SIGUSR2))
            sent[p["pid"]] = (path, size)
        except OSError as exc:
            sent[p["pid"]] = (path, None, str(exc))
    out = {}
    deadline = time.time() + timeout
    waiting = {pid: v for pid, v in sent.items() if v[1] is not None}
    for pid, v in sent.items():
        if v[1] is None:
            out[pid] = {"error": f"the hook could not be asked: {v[2]}"}
    last = {}
    while waiting and time.time() < deadline:
        time.sleep(0.01)
        for pid, (path, size) in list(waiting.items()):
            now = os.path.getsize(path)
            if now > size and last.get(pid) == now:  # grown, and done growing
                with open(path, encoding="utf-8", errors="replace") as f:
                    f.seek(size)
                    out[pid] = {"threads": parse_faulthandler(f.read()), "via": "hook"}
                del waiting[pid]
            last[pid] = now
    for pid in waiting:
        out[pid] = {"error": f"no dump from the hook within {timeout:.1f} s", "timeout": True}
    return out

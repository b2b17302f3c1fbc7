"""The stacks probe's part that reads stacks with py-spy: where py-spy is, one dump of every
process at once (non-blocking: nothing is stopped), each one's native frames after the window,
and why the kernel refused to let it read a process, with the fix. Sent before
probes/scripts/stacks.py (its PROBE says ``"parts"``) and run in the same namespace; standard
library only, Python 3.8+."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the prelude's helper part, and the part on /proc, in this namespace at the far end
    from ..far.common import cache_folder
    from ._stacks_proc import read


def py_spy_path(given):
    for path in (given, shutil.which("py-spy"), os.path.join(os.path.dirname(sys.executable), "py-spy"),
                 cache_folder("bin", "py-spy")):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def ptrace_why(uid):
    """Why this process may not read another's memory, and the exact fix."""
    me = os.geteuid()
    status = read("/proc/self/status") or ""
    m = re.search(r"^CapEff:\s+([0-9a-f]+)", status, re.M)
    cap_ptrace = bool(m and int(m.group(1), 16) & (1 << 19))
    scope = (read("/proc/sys/kernel/yama/ptrace_scope") or "").strip()
    if uid != me and me != 0 and not cap_ptrace:
        return ("another-user", f"the job runs as uid {uid} and sleuth's agent as uid {me}: only root or the job's own user "
                "may read its stacks",
                "run the target as the job's user (ssh user in sleuth.toml), or as root")
    if scope in ("2", "3") and not cap_ptrace:
        return ("yama", f"kernel.yama.ptrace_scope is {scope}: only CAP_SYS_PTRACE may attach",
                "sudo sysctl kernel.yama.ptrace_scope=1 (or run the target as root)")
    if not cap_ptrace and (os.path.exists("/.dockerenv") or os.environ.get("container")):
        return ("container", "this container lacks CAP_SYS_PTRACE",
                "start it with --cap-add SYS_PTRACE (docker), securityContext.capabilities.add: [SYS_PTRACE] "
                "(kubernetes), or lxc.cap.keep/unprivileged ptrace rights (LXC)")
    if scope == "1" and me != 0:
        return ("yama", "kernel.yama.ptrace_scope is 1: a process may attach only to its own descendants",
                "sudo sysctl kernel.yama.ptrace_scope=0, or run the target as root")
    return ("denied", "the kernel refused to let py-spy read the process", "run the target as root")


def sample(spy, procs, timeout):
    """One py-spy dump of every process at once; {pid: threads or an error}."""
    return _dumps(spy, [p for p in procs if not p.get("skip")], timeout, ["--nonblocking"])


def _dumps(spy, procs, timeout, flags, raw=False):
    running = {}
    for p in procs:
        try:
            running[p["pid"]] = subprocess.Popen([spy, "dump", "--pid", str(p["pid"]), "--json"] + flags,
                                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            for proc in running.values():  # the ones already started are stopped and reaped
                proc.kill()
                proc.communicate()
            return {p["pid"]: {"error": str(exc)} for p in procs}
    deadline = time.time() + timeout
    out = {}
    for pid, proc in running.items():
        try:
            stdout, stderr = proc.communicate(timeout=max(0.05, deadline - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out[pid] = {"error": f"no answer from py-spy within {timeout:.1f} s", "timeout": True}
            continue
        if proc.returncode != 0:
            err = stderr.decode("utf-8", "replace").strip().splitlines()
            out[pid] = {"error": next((ln for ln in err if ln.startswith("Error")), (err or ["py-spy failed"])[0])}
            continue
        try:
            dumped = json.loads(stdout.decode("utf-8", "replace"))
        except ValueError:
            out[pid] = {"error": "py-spy printed no JSON"}
            continue
        if raw:  # for the caller to read and drop (locals: never sent on whole)
            out[pid] = {"raw": dumped}
            continue
        out[pid] = {"threads": [{"tid": t.get("os_thread_id"), "name": t.get("thread_name"),
                                 "active": t.get("active"),
                                 "frames": [[f.get("name"), f.get("filename"), f.get("line")] for f in t.get("frames", [])]}
                                for t in dumped]}
    return out


def native(spy, procs, timeout):
    """One `py-spy dump --native` of each process, all at once, after the window (py-spy has no
    non-blocking native mode: each thread is paused while it is unwound, milliseconds; the
    symbols are read before). A stopped (T) or dead (Z) process is not asked: ptrace cannot
    suspend a stopped process, and its state already says what it is."""
    got = _dumps(spy, procs, timeout, ["--native"])
    out = {}
    for pid, d in got.items():
        if "threads" not in d:
            out[pid] = {"error": d.get("error")}
            continue
        read_ = d["threads"]
        assert isinstance(read_, list)
        out[pid] = {"threads": [{"tid": t["tid"], "name": t["name"], "frames": t["frames"][:120]} for t in read_]}
    return out

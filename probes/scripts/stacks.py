# pyright: reportPossiblyUnboundVariable=false
# (emit, params and cache_folder come from the prelude sleuth sends first; run standalone, emit and
# cache_folder come from probes/far/common.py; /proc and the ranks from _stacks_proc.py, its part)
"""Every rank's stacks: finds the job's processes and samples each one's Python stacks (all
threads, through py-spy in its non-blocking mode: the job is never stopped) and, per thread,
its /proc state, wchan, CPU time and context switches over the sampling window. A thread
with no CPU and no context switch in the window is stuck; one that moved is slow at most.
Nothing is sent to the job: no signal, no ptrace stop. Where py-spy cannot read a process
(another user, a container without SYS_PTRACE, Yama), a finding says which and the fix.

Standard library only. What the stacks mean (the odd ranks, stuck or slow) is decided by
sleuth from these records (hypotheses/hang/)."""

PROBE = {
    "fork": True,  # reads /proc and runs py-spy: safe to fork from a warm agent
    "stochastic": True,  # a moment of a running job: asking again observes anew, never a circular retest
    "id": "stacks",
    "title": "every rank's Python stacks (py-spy, non-blocking), /proc state and CPU: who waits where",
    "timeout": 60,
    "cost": 2,
    "params": {"match": "", "pid": "", "samples": 5, "interval": 0.2, "py_spy": "", "dump_timeout": 5.0,
               "most": 256, "via": "auto", "flight_recorder": True, "job": "", "native": "auto"},
    "reports": ["processes", "ranks", "sampled", "denied", "unanswered", "window_s", "stuck", "odd", "mismatch",
                "deadlocks", "stragglers", "healthy", "missing", "elsewhere", "verdict", "odd_ranks", "sentences",
                "flight_recorder", "fr_behind", "fr_mismatch", "fr_agrees", "helpers", "jobs", "compared", "stopped",
                "agreed", "straggler_tested", "native_read"],
    "analysis": "stacks",  # sleuth reads the rank records (hypotheses/hang/) into the result's fields
    "parts": ["_stacks_proc.py"],  # run first, in this namespace: /proc and which processes are ranks
}

if "emit" not in globals():  # run standalone: emit (JSON lines on stdout) from the far end's helper part
    import os
    import runpy

    _far = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "far", "common.py"))
    emit, cache_folder = _far["emit"], _far["cache_folder"]
    params = {}
    for _part in PROBE["parts"]:  # what sleuth sends first, run in this namespace
        _path = os.path.join(os.path.dirname(os.path.abspath(__file__)), _part)
        with open(_path) as _fh:
            exec(compile(_fh.read(), _path, "exec"), globals())

import json
import os
import re
import shutil
import subprocess
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # defined by the part run first (PROBE["parts"]), in this namespace at the far end
    from ._stacks_proc import (
        FR_ENV,
        HZ,
        environ,
        job_of,
        launched,
        launcher_ranks,
        lineage,
        local_world,
        main_state,
        number_ranks,
        read,
        stat_of,
        status_of,
        threads,
    )

_HERE = {}


def master_here(addr, timeout=2.0):
    """Whether MASTER_ADDR is this machine: an address of this machine can be bound here (the
    loopback's, a name that resolves to one); one that resolves to none is another machine's.
    None when it cannot be told (empty, or the name does not resolve within *timeout*)."""
    if not addr:
        return None
    if addr in _HERE:
        return _HERE[addr]
    import socket
    import threading

    got = []

    def resolve():
        try:
            got.append(socket.getaddrinfo(addr, None, 0, socket.SOCK_STREAM))
        except (OSError, UnicodeError):
            got.append([])

    t = threading.Thread(target=resolve)
    t.daemon = True
    t.start()
    t.join(timeout)
    answer = None
    if got and got[0]:
        answer = False
        for family, _type, _proto, _name, sockaddr in got[0]:
            s = socket.socket(family, socket.SOCK_STREAM)
            try:
                s.bind((sockaddr[0], 0) + tuple(sockaddr[2:]))
                answer = True
                break
            except OSError:
                pass
            finally:
                s.close()
    _HERE[addr] = answer
    return answer


SPAWN_FILE = "torch/multiprocessing/spawn.py"  # its _wrap(fn, i, args, ...) calls fn(i, *args): i is the rank
NO_WRAP = "no torch.multiprocessing.spawn frame with its i was read"


def torch_mapped(pid):
    """Whether libtorch is mapped into *pid* (a torch process), from /proc/PID/maps."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            return any(b"libtorch" in line for line in f)
    except OSError:
        return False


def spawn_index(threads_):
    """(i, world_size or None) from the main thread's frames of a py-spy dump with locals: the
    i of torch's spawn _wrap frame, and the world_size argument of the function it called (the
    tutorial's main(rank, world_size, ...)), when that is an int. Nothing else of the locals is
    kept: they may hold anything of the user's."""
    for t in threads_ or []:
        frames = t.get("frames") or []
        for k, f in enumerate(frames):
            if f.get("name") != "_wrap" or not str(f.get("filename") or "").endswith(SPAWN_FILE):
                continue
            mine = {x.get("name"): str(x.get("repr") or "") for x in f.get("locals") or []}
            if not mine.get("i", "").isdigit():
                return None
            called = {x.get("name"): str(x.get("repr") or "") for x in (frames[k - 1].get("locals") or [])} if k else {}
            world = called.get("world_size", "")
            return int(mine["i"]), (int(world) if world.isdigit() else None)
    return None


def spawned(spy, everyone, taken, timeout):
    """Ranks that torch.multiprocessing.spawn started (PyTorch's DDP tutorial, multigpu.py):
    nothing in their environment says the rank, torch's _wrap frame holds it. The candidates are
    children started by multiprocessing (spawn's `--multiprocessing-fork`, or a fork: the
    parent's own command line) with libtorch mapped; each is read with py-spy's locals, and read
    again when the read failed or a sibling of a rank showed no spawn frame (a non-blocking read may
    catch it mid-call). A process of the same spawn whose rank is still unread is kept, rank None,
    with why: it is here, not on another node."""
    if spy is None:
        return []
    cands = []
    for pid, p in sorted(everyone.items()):
        parent = everyone.get(p["ppid"])
        if pid in taken or p["ppid"] in taken or parent is None or launched(p["env"]):
            continue  # (a child of a rank found already is that rank's helper: a forked data-loader worker)
        if ("--multiprocessing-fork" in p["cmd"] or p["cmd"] == parent["cmd"]) and torch_mapped(pid):
            cands.append(p)
    cands = cands[:256]
    index, why = {}, {}
    for attempt in range(3):  # a non-blocking read of a running process may catch it mid-call: read again
        parents = {p["ppid"] for p in cands if p["pid"] in index}
        todo = [p for p in cands if p["pid"] not in index and (not attempt or p["pid"] in why and (
            why[p["pid"]] != NO_WRAP or p["ppid"] in parents))]
        if not todo:
            break
        if attempt:
            time.sleep(0.1)
        got = _dumps(spy, todo, timeout, ["--nonblocking", "--locals"], raw=True)
        for p in todo:
            read_ = got.get(p["pid"]) or {}
            idx = spawn_index(read_.get("raw"))
            if idx is not None:
                index[p["pid"]] = idx
                why.pop(p["pid"], None)
            else:
                why[p["pid"]] = read_.get("error") or NO_WRAP
    ranks = []
    parents = {p["ppid"] for p in cands if p["pid"] in index}
    for p in cands:
        if p["pid"] in index:
            p["rank"], p["spawn_world"] = str(index[p["pid"]][0]), index[p["pid"]][1]
        elif p["ppid"] in parents:  # a process of the same spawn, here, whose rank could not be read
            p["rank"], p["spawn_world"], p["rank_unread"] = None, None, why.get(p["pid"]) or NO_WRAP
        else:
            continue
        p["rank_from"], p["job"] = "torch.multiprocessing.spawn", f"spawn:{p['ppid']}"
        ranks.append(p)
    for p in ranks:  # the world: the function's world_size, else the spawn's processes (said so)
        n = sum(1 for q in ranks if q["ppid"] == p["ppid"])
        given = p["spawn_world"] or next((q["spawn_world"] for q in ranks if q["ppid"] == p["ppid"] and q["spawn_world"]),
                                         None)
        p["world"], p["world_from"] = (str(given), "world_size") if given else (str(n), "nprocs")
        p.update(local_world=n, local_world_from="torch.multiprocessing.spawn", launcher=p["ppid"])
    return ranks


def job_key(p):
    return p.get("job") or job_of(p["env"])


def find(match, pids, most, job="", spy=None, timeout=5.0):
    mine = lineage()
    wanted = set()
    for p in re.split(r"[,\s]+", str(pids or "").strip()):
        if p:
            wanted.add(int(p))
    pattern = re.compile(match) if match else None
    everyone = {}
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid in mine:
            continue
        raw = read(f"/proc/{pid}/cmdline", binary=True)
        if not raw:
            continue  # a kernel thread, or gone
        argv = [a.decode("utf-8", "replace") for a in raw.rstrip(b"\0").split(b"\0")]
        cmd = " ".join(argv)
        env = environ(pid)
        st = stat_of(f"/proc/{pid}/stat") or {"ppid": 0, "state": "?"}
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        proc = {"pid": pid, "ppid": st["ppid"], "cmd": cmd[:400], "uid": uid, "env": env, "rank": None}
        everyone[pid] = proc
        if wanted:
            if pid not in wanted:
                continue
        elif pattern is not None:
            if not pattern.search(cmd) or "sleuth" in cmd and "stacks" in cmd:
                continue
        elif not launched(env):
            continue  # by default: the processes a launcher (torchrun, srun, Lightning, accelerate) made ranks
        found.append(proc)
    launcher_ranks(found, everyone, selected=bool(wanted or pattern))
    spawn = spawned(spy, everyone, {p["pid"] for p in found}, timeout) if not wanted and pattern is None else []
    found.extend(spawn)
    number_ranks([p for p in found if p.get("rank_from") not in ("launcher", "torch.multiprocessing.spawn")])
    if job:
        found = [p for p in found if job_key(p) == job]
    # a launcher whose children were found too (torchrun, its ranks) is the launcher, not a rank
    parents = {p["ppid"] for p in found}
    launchers = [p for p in found if p["pid"] in parents and p.get("rank") in (None, "")]
    found = [p for p in found if p not in launchers]
    launchers += [everyone[q] for q in sorted({p["ppid"] for p in spawn if p in found}) if q in everyone]
    # a child of a rank with the rank's own rank (it inherited the environment: a data-loader
    # worker, a compile worker, any subprocess) is that rank's helper, not another rank
    # (or none of its own: a rank's fork, matched by --param match, reads as the rank's program)
    rank_of = {p["pid"]: p.get("rank") for p in found}
    helpers = [] if wanted else [p for p in found if rank_of.get(p["ppid"]) not in (None, "") and (
        p.get("rank") == rank_of[p["ppid"]] or p.get("rank") in (None, "") and not p.get("rank_unread"))]
    for p in helpers:
        p["comm"] = (read(f"/proc/{p['pid']}/comm") or "").strip()
    found = [p for p in found if p not in helpers]
    found.sort(key=lambda p: (int(p["rank"]) if str(p.get("rank") or "").isdigit() else 1 << 30, p["pid"]))
    return found[:most], launchers, helpers, max(0, len(found) - most)


def looked_for(match, pids, job):
    """What find() looked for, in words: said where a rank of the world is not found here."""
    if str(pids or "").strip():
        said = "the processes --param pid named (" + ", ".join(re.split(r"[,\s]+", str(pids).strip())) + ")"
    elif match:
        said = f"processes whose command line matches {match!r} (--param match)"
    else:
        said = ("processes with RANK, or LOCAL_RANK and WORLD_SIZE, in their environment (torchrun, accelerate, "
                "Lightning's children), the process that started local ranks 1..n-1 (Lightning's launcher, itself "
                "rank 0), and the processes torch.multiprocessing.spawn started (the rank its spawn frame holds)")
        if hasattr(os, "geteuid") and os.geteuid() != 0:
            said += f"; the environment of another user's process is not readable as uid {os.geteuid()}"
    return said + (f", of job {job} (--param job)" if job else "")


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


class _PlainUnpickler:
    """torch's Flight Recorder dumps are pickles of plain dicts, lists, strings and numbers:
    anything that names a class or a function is refused (a dump file is never trusted)."""

    @staticmethod
    def load(data):
        import io
        import pickle

        class Plain(pickle.Unpickler):
            def find_class(self, module, name):
                raise pickle.UnpicklingError(f"{module}.{name} is not plain data")

        return Plain(io.BytesIO(data)).load()


def fr_dump_path(p):
    """Where torch writes this rank's Flight Recorder dump when its watchdog fires (a timeout
    with TORCH_NCCL_DUMP_ON_TIMEOUT=1): the prefix plus the rank."""
    env = p["env"] or {}
    if p.get("rank") in (None, ""):
        return None
    prefix = env.get("TORCH_FR_DUMP_TEMP_FILE") or env.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") or "/tmp/nccl_trace_rank_"
    return prefix + str(p["rank"])


def started_at(pid):
    """When the process started (seconds since the epoch), from /proc."""
    text = read(f"/proc/{pid}/stat")
    uptime = read("/proc/uptime")
    if not text or not uptime:
        return None
    ticks = int(text.rsplit(")", 1)[1].split()[19])
    return time.time() - float(uptime.split()[0]) + ticks / float(HZ)


def fr_condense(raw, source, path):
    """The parts of a dump sleuth reads: per group its last enqueued and completed collective,
    and the last entries (group, number, op, sizes, finished)."""
    if isinstance(raw, dict) and isinstance(raw.get("recorders"), dict):  # the hook's: NCCL's and the CPU one
        parts = [fr_condense(r, source, path) for r in raw["recorders"].values()]
        read = [p for p in parts if not p.get("error")]
        if not read:
            errors = "; ".join(p["error"] for p in parts) or "this torch has no Flight Recorder"
            return {"source": source, "path": path, "error": errors}
        status = {}
        for part in read:
            for pg, st in part["pg_status"].items():
                mine = status.setdefault(pg, {})
                for k, v in st.items():
                    mine[k] = max(mine.get(k, v), v)
        return {"source": source, "path": path, "version": read[0].get("version"), "pg_status": status,
                "entries": [e for part in read for e in part["entries"]]}
    if not isinstance(raw, dict):
        return {"source": source, "path": path, "error": "not a Flight Recorder dump"}
    if raw.get("error"):
        return {"source": source, "path": path, "error": str(raw["error"])}
    entries = []
    for e in (raw.get("entries") or [])[-64:]:
        if not isinstance(e, dict):
            continue
        pg = e.get("process_group") or ["?", "?"]
        entries.append({"pg": str(pg[0]), "pg_name": str(pg[1]) if len(pg) > 1 else "", "seq": e.get("collective_seq_id"),
                        "p2p_seq": e.get("p2p_seq_id"), "p2p": bool(e.get("is_p2p")), "op": e.get("profiling_name"),
                        "sizes": e.get("input_sizes"), "state": e.get("state"), "retired": e.get("retired"),
                        "record": e.get("record_id")})
    status = {}
    for pg, st in (raw.get("pg_status") or {}).items():
        if isinstance(st, dict):
            status[str(pg)] = {k: int(v) for k, v in st.items() if str(v).lstrip("-").isdigit()}
    return {"source": source, "path": path, "version": raw.get("version"), "pg_status": status, "entries": entries}


def flight_recorders(procs, timeout):
    """Each rank's Flight Recorder: asked of the hook where the rank registered it (a byte on its
    FIFO; no signal), else read from the dump its watchdog left. {pid: condensed or None}."""
    out = {}  # type: dict
    for p in procs:
        out[p["pid"]] = None
    asked = {}
    for p in procs:
        fifo = os.path.join(hook_dir(p["env"]), f"fr-{p['pid']}.fifo")
        answer = fifo[:-len(".fifo")] + ".json"
        if os.path.exists(fifo):
            try:
                if os.path.exists(answer):
                    os.unlink(answer)
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO: nobody listens (not this process)
                try:
                    os.write(fd, b"1")
                finally:
                    os.close(fd)
                asked[p["pid"]] = answer
                continue
            except OSError as exc:
                out[p["pid"]] = {"source": "hook", "path": fifo, "error": f"the hook did not listen: {exc.strerror}"}
        path = fr_dump_path(p)
        born = started_at(p["pid"])
        if path and os.path.isfile(path):
            try:
                if born is not None and os.path.getmtime(path) < born:
                    out[p["pid"]] = {"source": "dump", "path": path, "error": "the dump there is older than the process"}
                    continue
                with open(path, "rb") as f:
                    data = f.read()
                raw = json.loads(data) if data[:1] == b"{" else _PlainUnpickler.load(data)
                out[p["pid"]] = fr_condense(raw, "dump", path)
            except Exception as exc:
                out[p["pid"]] = {"source": "dump", "path": path, "error": f"{type(exc).__name__}: {exc}"}
    deadline = time.time() + timeout
    while asked and time.time() < deadline:
        for pid, answer in list(asked.items()):
            if os.path.exists(answer):
                try:
                    with open(answer, "rb") as f:
                        out[pid] = fr_condense(json.loads(f.read() or b"null"), "hook", answer)
                except (OSError, ValueError) as exc:
                    out[pid] = {"source": "hook", "path": answer, "error": f"unreadable answer: {exc}"}
                del asked[pid]
        time.sleep(0.01)
    for pid, answer in asked.items():
        out[pid] = {"source": "hook", "path": answer, "error": f"no answer from the hook within {timeout:.1f} s"}
    return out


def code_at(path, line):
    if not path or not line or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for i, text in enumerate(f, 1):
                if i == line:
                    return text.strip()[:200]
    except OSError:
        return None
    return None


def window(spy, procs, samples, interval, timeout, denied, hook_only):
    """The sampling window: py-spy's samples (non-blocking: nothing is stopped or signalled, so
    the CPU and wake-up counters taken around it are the job's own) and, between them, each
    main thread's state read every few milliseconds (R running, S waiting, T stopped, D in the
    kernel). Returns the dumps, the state counts and the window's length."""
    dumps = {p["pid"]: [] for p in procs}
    states = {p["pid"]: {} for p in procs}

    def read_states():
        for p in procs:
            letter = main_state(p["pid"]) or "gone"
            states[p["pid"]][letter] = states[p["pid"]].get(letter, 0) + 1

    started = time.time()
    for i in range(samples):
        t0 = time.time()
        read_states()
        if spy is not None:
            for pid, got in sample(spy, procs, timeout).items():
                dumps[pid].append(got)
                err = got.get("error") or ""
                if re.search(r"Permission denied|Operation not permitted|os error 1\b|os error 13\b", err, re.I):
                    for p in procs:
                        if p["pid"] != pid:
                            continue
                        p["skip"] = True  # asking py-spy again changes nothing
                        if hooked(p):  # no ptrace, but the process registered the hook: ask it instead
                            hook_only.append(p)
                            dumps[pid].pop()
                        else:
                            denied[pid] = err
        if i + 1 < samples:
            end = t0 + interval
            while time.time() < end - 0.01:
                read_states()
                time.sleep(0.01)
            time.sleep(max(0.0, end - time.time()))
    read_states()
    return dumps, states, time.time() - started


def task_rows(before, after):
    tasks = []
    for tid, now in sorted(after.items()):
        was = before.get(tid)
        tasks.append({"tid": tid, "comm": now["comm"], "state": now["state"], "wchan": now["wchan"],
                      "cpu_s": round(now["cpu"] - was["cpu"], 3) if was else None,
                      "switches": now["switches"] - was["switches"] if was else None})
    return tasks


def source_lines(samples_out):
    """The source line of each thread's innermost frames, read here where the files are."""
    code = {}
    for threads_ in samples_out[-1:]:
        if isinstance(threads_, list):
            for t in threads_:
                frames = t["frames"]
                own = [f for f in frames if f[2] and not re.search(r"/(site|dist)-packages/|/lib/python", str(f[1]))]
                for _name, path, line in frames[:12] + own[:2]:
                    if line:
                        code.setdefault(f"{path}:{line}", code_at(path, line))
    return code


def say_flight_recorder_off(procs, recorders):
    recording = [p for p in procs if any((p["env"] or {}).get(k.decode()) not in (None, "", "0") for k in FR_ENV[:2])]
    if procs and recorders and not recording and not any(recorders.values()):
        emit("finding", finding="flight-recorder-off", text="torch's Flight Recorder is off in this job (no "
             "TORCH_FR_BUFFER_SIZE): only stacks say which collective each rank waits in",
             fix="start the job with `sleuth probe run --shell CMD --hook` (it sets TORCH_FR_BUFFER_SIZE=2000), or "
                 "set TORCH_FR_BUFFER_SIZE=2000 (and TORCH_NCCL_DUMP_ON_TIMEOUT=1 for NCCL dumps on timeout) yourself")


def main():
    via = params.get("via") or "auto"
    spy = py_spy_path(params.get("py_spy") or "") if via != "hook" else None
    timeout = float(params.get("dump_timeout", 5.0))
    procs, launchers, helpers, left = find(params.get("match") or "", params.get("pid") or "",
                                           int(params.get("most", 256)), str(params.get("job") or ""), spy, timeout)
    tidy_hook_dirs(procs)
    if spy is None and via != "hook" and not any(hooked(p) for p in procs):
        emit("finding", finding="no-py-spy", text=f"py-spy is not on this machine (PATH, next to {sys.executable}, "
             "~/.cache/sleuth/bin) and no process registered sleuth's dump hook: only /proc was read")
    samples = max(1, int(params.get("samples", 5)))
    interval = max(0.0, float(params.get("interval", 0.2)))
    denied = {}
    hook_only = [p for p in procs if spy is None and hooked(p)]
    unhooked = [p for p in procs if spy is None and p not in hook_only]
    for p in unhooked:
        p["skip"] = True
    if spy is None and unhooked:
        n = len(unhooked)
        emit("finding", finding="no-hook", text=f"{n} process{'' if n == 1 else 'es'} did not register sleuth's dump "
             "hook (started without `sleuth probe run --shell CMD --hook`): not signalled; only /proc was read")
    # the window starts once the processes are found: its length is what the CPU time is read against
    before = {p["pid"]: threads(p["pid"]) for p in procs}
    dumps, states, window_s = window(spy, procs, samples, interval, timeout, denied, hook_only)
    after = {p["pid"]: threads(p["pid"]) for p in procs}
    status = {p["pid"]: status_of(p["pid"]) for p in procs}
    # after the window (they pause or signal the process): native frames, then the hook's dumps
    mode = str(params.get("native", "auto"))
    asked = [p for p in procs if spy is not None and mode != "off" and not p.get("skip") and after[p["pid"]]
             and (after[p["pid"]].get(p["pid"]) or {}).get("state") not in ("T", "t", "Z", "X")]
    natives = native(spy, asked, max(timeout, 10.0)) if asked else {}
    for i in range(samples if hook_only else 0):
        for pid, got in sample_hook(hook_only, timeout).items():
            dumps[pid].append(got)
        if i + 1 < samples:
            time.sleep(0.02)
    recorders = flight_recorders(procs, timeout) if params.get("flight_recorder", True) else {}
    say_flight_recorder_off(procs, recorders)
    said = set()
    for p in procs:
        pid = p["pid"]
        if pid in denied:
            cause, why, fix = ptrace_why(p["uid"])
            if cause not in said:
                said.add(cause)
                emit("finding", finding="ptrace", cause=cause, pid=pid,
                     text=f"cannot read the stacks of pid {pid}: {why} ({denied[pid]})", fix=fix)
        samples_out = [got["threads"] if "threads" in got else {"error": got.get("error"), "timeout": bool(got.get("timeout"))}
                       for got in dumps[pid]]
        code = source_lines(samples_out)
        nat = natives.get(pid)
        if nat and nat.get("threads"):
            code.update({k: v for k, v in source_lines([nat["threads"]]).items() if k not in code})
        env = p["env"] or {}
        size, size_from, launcher = local_world(p)
        emit("rank", pid=pid, ppid=p["ppid"], uid=p["uid"], cmd=p["cmd"], rank=p.get("rank"),
             rank_from=p.get("rank_from"), local_rank=env.get("LOCAL_RANK"), node_rank=env.get("NODE_RANK"),
             group_rank=env.get("GROUP_RANK"), local_world=size, local_world_from=size_from, launcher=launcher,
             master_addr=env.get("MASTER_ADDR"), master_here=master_here(env.get("MASTER_ADDR")),
             world_size=env.get("WORLD_SIZE") or p.get("world"), world_from=p.get("world_from"), rank_unread=p.get("rank_unread"), job=job_key(p),
             environ_readable=p["env"] is not None,
             alive=bool(after[pid]), tasks=task_rows(before[pid], after[pid]), samples=samples_out, code=code,
             states=states[pid], tracer=status[pid]["tracer"], tracer_comm=status[pid]["tracer_comm"],
             native=nat, denied=denied.get(pid), flight_recorder=recorders.get(pid))
    unanswered = sum(1 for p in procs if any("timeout" in d for d in dumps[p["pid"]]))
    emit("result", processes=len(procs), ranks=sum(1 for p in procs if p.get("rank") not in (None, "")),
         sampled=sum(1 for p in procs if any("threads" in d for d in dumps[p["pid"]])), denied=len(denied),
         unanswered=unanswered, left_out=left, launchers=[{"pid": p["pid"], "cmd": p["cmd"]} for p in launchers],
         helpers=[{"pid": p["pid"], "ppid": p["ppid"], "rank": p.get("rank"), "comm": p["comm"]} for p in helpers],
         looked_for=looked_for(params.get("match") or "", params.get("pid") or "", str(params.get("job") or "")),
         chosen="pid" if str(params.get("pid") or "").strip() else "match" if params.get("match") else None,
         py_spy=spy, samples=samples, window_s=round(window_s, 3), native_read=len([n for n in natives.values()
                                                                                    if n.get("threads")]))


main()

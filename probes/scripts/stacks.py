# pyright: reportPossiblyUnboundVariable=false
# (emit, params and cache_folder come from the prelude sleuth sends first; run standalone, emit and
# cache_folder come from probes/far/common.py; the rest from its parts, PROBE["parts"], run first)
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
    # run first, in this namespace: /proc and which processes are ranks, py-spy, the ranks of
    # torch.multiprocessing.spawn, sleuth's dump hook, torch's Flight Recorder
    "parts": ["_stacks_proc.py", "_stacks_spy.py", "_stacks_spawn.py", "_stacks_hook.py", "_stacks_fr.py"],
}

import os
import re
import sys
import time
from typing import TYPE_CHECKING

if "emit" not in globals():  # run standalone: emit (JSON lines on stdout) from the far end's helper part
    import runpy

    _far = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "far", "common.py"))
    emit, cache_folder = _far["emit"], _far["cache_folder"]
    params = {}
    _far["run_parts"](__file__, PROBE["parts"], globals())  # what sleuth sends first, run in this namespace

if TYPE_CHECKING:  # defined by the parts run first (PROBE["parts"]), in this namespace at the far end
    from ._stacks_fr import flight_recorders, say_flight_recorder_off
    from ._stacks_hook import hooked, sample_hook, tidy_hook_dirs
    from ._stacks_proc import (
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
    from ._stacks_spawn import spawned
    from ._stacks_spy import native, ptrace_why, py_spy_path, sample


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

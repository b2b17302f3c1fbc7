"""The stacks probe's part that reads /proc: a process's environment, state, threads and
parentage, and which of them are a job's ranks (torchrun, accelerate, Lightning, mp.spawn's
launcher). Sent before probes/scripts/stacks.py (its PROBE says ``"parts"``) and run in the
same namespace; standard library only, Python 3.8+."""

import os
import re

# torch's Flight Recorder: on when the job starts with a buffer size; where its dumps go
FR_ENV = (b"TORCH_FR_BUFFER_SIZE", b"TORCH_NCCL_TRACE_BUFFER_SIZE", b"TORCH_FR_DUMP_TEMP_FILE",
          b"TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
# what launchers put in a rank's environment: torchrun and accelerate give RANK; Lightning's
# launcher gives its children LOCAL_RANK, NODE_RANK and WORLD_SIZE (rank 0 is the launcher itself)
LAUNCH_ENV = (b"RANK", b"LOCAL_RANK", b"WORLD_SIZE", b"GROUP_RANK", b"NODE_RANK", b"LOCAL_WORLD_SIZE",
              b"TORCHELASTIC_RUN_ID", b"MASTER_ADDR", b"MASTER_PORT", b"SLEUTH_STACKS_DIR")
HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def read(path, binary=False):
    try:
        with open(path, "rb" if binary else "r") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def environ(pid):
    raw = read(f"/proc/{pid}/environ", binary=True)
    if raw is None:
        return None
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key in LAUNCH_ENV + FR_ENV:
            out[key.decode()] = value.decode("utf-8", "replace")
    return out


def job_of(env):
    """Which job a rank belongs to: the launcher's run id (torchrun --rdzv-id; --standalone makes
    one per launch), else the rendezvous address. Two jobs' ranks are never compared."""
    env = env or {}
    run = env.get("TORCHELASTIC_RUN_ID")
    if run and run != "none":
        return run
    if env.get("MASTER_PORT"):
        return f"{env.get('MASTER_ADDR') or '?'}:{env['MASTER_PORT']}"
    return None


def stat_of(path):
    text = read(path)
    if not text:
        return None
    rest = text.rsplit(")", 1)[1].split()
    return {"state": rest[0], "ppid": int(rest[1]), "cpu": (int(rest[11]) + int(rest[12])) / float(HZ)}


def status_of(pid):
    """State letter, TracerPid and the tracer's name, from /proc/PID/status."""
    text = read(f"/proc/{pid}/status") or ""
    m = re.search(r"^TracerPid:\s+(\d+)", text, re.M)
    tracer = int(m.group(1)) if m else 0
    return {"tracer": tracer or None, "tracer_comm": (read(f"/proc/{tracer}/comm") or "").strip() or None if tracer else None}


def main_state(pid):
    """The main thread's state letter now (R, S, D, T, t, Z, ...), or None when it is gone."""
    st = stat_of(f"/proc/{pid}/task/{pid}/stat")
    return st["state"] if st else None


def switches(path):
    text = read(path) or ""
    total = 0
    for key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
        m = re.search(rf"^{key}:\s+(\d+)", text, re.M)
        if m:
            total += int(m.group(1))
    return total


def threads(pid):
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}/"
        st = stat_of(base + "stat")
        if st is None:
            continue
        out[int(tid)] = {"comm": (read(base + "comm") or "").strip(), "state": st["state"], "cpu": st["cpu"],
                         "switches": switches(base + "status"), "wchan": (read(base + "wchan") or "").strip() or None}
    return out


def lineage():
    """This process, its ancestors and the agent's tree: never taken for the job."""
    mine = set()
    pid = os.getpid()
    while pid > 1 and pid not in mine:
        mine.add(pid)
        st = stat_of(f"/proc/{pid}/stat")
        if st is None:
            break
        pid = st["ppid"]
    return mine


def launched(env):
    """Whether a launcher started this process as a rank: RANK (torchrun, accelerate, srun
    wrappers), or LOCAL_RANK with WORLD_SIZE (Lightning's launcher gives its children no RANK)."""
    env = env or {}
    return env.get("RANK") not in (None, "") or (env.get("LOCAL_RANK") not in (None, "") and
                                                  env.get("WORLD_SIZE") not in (None, ""))


def number_ranks(found):
    """Each process's global rank and where it was read: RANK; else NODE_RANK times the node's
    size plus LOCAL_RANK; a launcher whose children are local ranks 1..n-1 is itself local rank
    0 (Lightning's: the script the user started is rank 0 and starts the others)."""
    for p in found:
        env = p["env"] or {}
        if env.get("RANK") not in (None, ""):
            p["rank"], p["rank_from"] = env["RANK"], "RANK"
    local = [p for p in found if p.get("rank") is None and (p["env"] or {}).get("LOCAL_RANK", "").isdigit()]
    for p in local:
        env = p["env"] or {}
        size = env.get("LOCAL_WORLD_SIZE") or str(p.get("local_world") or "")
        if not size.isdigit():
            siblings = [q for q in found if q["ppid"] == p["ppid"] or q["pid"] == p["ppid"]]
            size = str(len(siblings) + (1 if not any(q["pid"] == p["ppid"] for q in found) else 0))
        node = env.get("NODE_RANK") or env.get("GROUP_RANK") or "0"
        p["rank"] = str(int(node) * int(size) + int(env["LOCAL_RANK"])) if node.isdigit() else env["LOCAL_RANK"]
        p["rank_from"] = "LOCAL_RANK" + (f" + NODE_RANK {node} × {size}" if node not in ("", "0") else "")


def program(cmd):
    """The interpreter and what it runs (a script, -m module, -c code), without the arguments:
    what a launcher's ranks have in common (Hydra gives each rank arguments of its own)."""
    words = cmd.split(" ")
    out = words[:1]
    for i, word in enumerate(words[1:], 1):
        out.append(word)
        if word in ("-m", "-c"):
            out.extend(words[i + 1:i + 2])
            break
        if not word.startswith("-"):
            break
    return tuple(out)


def launcher_ranks(found, everyone, selected):
    """Lightning's launcher (and any launcher that is its job's rank 0): the script the user
    started is local rank 0 and starts local ranks 1..n-1 with LOCAL_RANK and no RANK; its own
    environment says nothing (Lightning sets LOCAL_RANK=0 in os.environ after the process
    started, which /proc does not show). Processes rank 0 starts afterwards inherit that
    os.environ, LOCAL_RANK=0 included: its data-loader workers under spawn or forkserver, their
    resource tracker, compile workers. Those run another program than the ranks and are rank 0's
    helpers; a LOCAL_RANK=0 child running the ranks' own program is local rank 0 itself, and its
    parent only a launcher (torchrun's children all carry RANK). Where the user chose the
    processes (*selected*: --param match or pid), the launcher counts only if it was chosen."""
    by_parent = {}
    for p in found:
        env = p["env"] or {}
        if not env.get("RANK") and env.get("LOCAL_RANK", "").isdigit():
            by_parent.setdefault(p["ppid"], []).append(p)
    chosen = {p["pid"] for p in found}
    for ppid, kids in by_parent.items():
        parent = everyone.get(ppid)
        if parent is None or launched(parent["env"]) or (ppid in chosen) != selected:
            continue
        ranks_ = [k for k in kids if k["env"]["LOCAL_RANK"] != "0"]
        zeros = [k for k in kids if k["env"]["LOCAL_RANK"] == "0"]
        programs = {program(k["cmd"]) for k in ranks_}
        if not ranks_ or any(program(k["cmd"]) in programs for k in zeros):
            continue
        size = max(len({k["env"]["LOCAL_RANK"] for k in ranks_}) + 1,
                   max(int(k["env"]["LOCAL_RANK"]) for k in ranks_) + 1)
        env0 = dict(ranks_[0]["env"] or {})
        env0.update({"LOCAL_RANK": "0"})
        env0.pop("SLEUTH_STACKS_DIR", None)
        env0.update({k: v for k, v in (parent["env"] or {}).items() if k == "SLEUTH_STACKS_DIR"})
        parent.update(rank=None, rank_from="launcher", env=env0, own_env=parent["env"])
        for p in [parent] + kids:
            p.update(local_world=size, local_world_from="launcher", launcher=parent["pid"])
        if ppid not in chosen:
            found.append(parent)
        number_ranks([parent])
        parent["rank_from"] = "launcher"


def local_world(p):
    """How many processes the launcher that started *p* started on this machine, and how that
    is known: LOCAL_WORLD_SIZE (torchrun), a launcher that is rank 0 and its children, the
    processes torch.multiprocessing.spawn started. None where nothing says."""
    env = p["env"] or {}
    if env.get("LOCAL_WORLD_SIZE", "").isdigit():
        return int(env["LOCAL_WORLD_SIZE"]), "LOCAL_WORLD_SIZE", p["ppid"]
    if p.get("local_world"):
        return p["local_world"], p.get("local_world_from"), p.get("launcher") or p["ppid"]
    return None, None, None

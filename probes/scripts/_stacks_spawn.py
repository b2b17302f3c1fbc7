"""The stacks probe's part that finds the ranks torch.multiprocessing.spawn started (PyTorch's
DDP tutorial): nothing in their environment says the rank, torch's _wrap frame holds it, read
with py-spy's locals. Sent before probes/scripts/stacks.py (its PROBE says ``"parts"``) and run
in the same namespace; standard library only, Python 3.8+."""

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # defined by the parts on /proc and on py-spy, in this namespace at the far end
    from ._stacks_proc import launched
    from ._stacks_spy import _dumps

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

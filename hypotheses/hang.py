"""What a job's stacks say when it stops: the ranks grouped by where their threads wait, the
odd ranks named with file:line and function, stuck told from slow, and which kind of stop it
is — a collective mismatch, a deadlock inside a rank, a straggler — or a healthy job.

Pure: it reads the ``rank`` records of a ``stacks`` run (probes/scripts/stacks.py: py-spy's
samples of every thread, and per thread the CPU time and context switches over the window)
and returns the result fields the hang hypotheses' rules read, plus sentences. A thread with
no CPU and no context switch over the window is stuck; one that moved is at most slow.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["COLLECTIVES", "RankView", "analyze_stacks", "is_library", "read_flight_recorder", "state_word",
           "with_hang_analysis"]

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
STRONG = 0.01  # the project's strength (hypotheses/verification.py): a chance below it is strong


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


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(0, k + 1))


@dataclass
class RankView:
    label: str  # "rank 2", or "pid 4711" when the process has no rank
    pid: int
    member: str | None
    main: Where | None = None  # the main thread's usual place
    main_share: tuple[int, int] = (0, 0)  # samples in that place, samples read
    threads: dict[str, tuple[Where | None, int, int]] = field(default_factory=dict)  # name -> (place, in it, read)
    stuck: bool | None = None  # the main thread: no CPU, no context switch over the window
    cpu_s: float | None = None
    switches: int | None = None
    error: str | None = None  # why no stack was read
    code: dict[str, str | None] = field(default_factory=dict)
    in_collective_share: float = 0.0  # of the samples read, how many found the main thread in a collective
    in_collective: tuple[int, int] = (0, 0)  # samples with the main thread in a collective, samples read
    state: str | None = None  # the main thread's /proc state at the end of the window
    states: dict[str, int] = field(default_factory=dict)  # the main thread's states over the window's reads
    wchan: str | None = None
    tracer: int | None = None
    tracer_comm: str | None = None
    wait: dict[str, Any] | None = None  # the native wait (py-spy --native), when read at the usual place
    wait_elsewhere: dict[str, Any] | None = None  # a native wait read after the rank had moved on
    native_read: bool = False
    framework: dict[str, Any] | None = None
    places: int = 0  # distinct places of the main thread over the samples

    def in_a_collective(self) -> bool:
        return any(w is not None and w.collective for w, _n, _m in self.threads.values()) or \
            bool(self.wait and self.wait["kind"] == "collective")

    def signature(self) -> tuple:
        """Where this rank waits: its main thread's place and native wait, and every thread's
        that is in a collective."""
        others = sorted((name, w.key()) for name, (w, _n, _m) in self.threads.items()
                        if w is not None and w.collective and name != "MainThread")
        native = (self.wait or {}).get("frame") if self.native_read else "?"
        return (self.main.key() if self.main else None, native, tuple(others))

    def line_of(self, w: Where) -> str | None:
        return self.code.get(f"{w.file}:{w.line}")

    def reads(self) -> int:
        return sum(self.states.values())

    def stopped(self) -> bool:
        """Stopped (T) or stopped by a tracer (t) in every read of the window."""
        n = self.reads()
        return bool(n) and self.states.get("T", 0) + self.states.get("t", 0) == n if self.states else \
            self.state in ("T", "t")

    def dead(self) -> bool:
        return self.state in ("Z", "X") or bool(self.states) and self.states.get("Z", 0) + self.states.get("gone", 0) \
            == self.reads()

    def in_kernel(self) -> bool:
        """Uninterruptible (D) in every read: waiting on the kernel (a disk, NFS, a driver)."""
        return bool(self.states) and self.states.get("D", 0) == self.reads()

    def state_text(self) -> str:
        if self.dead():
            return "dead (Z: it exited, its parent has not reaped it)"
        if self.stopped():
            if self.tracer:
                return f"traced (t) by pid {self.tracer}" + (f" ({self.tracer_comm})" if self.tracer_comm else "")
            return "stopped (T: a stop signal, job control or a debugger left it stopped)"
        if self.in_kernel():
            return f"in uninterruptible sleep (D) in {self.wchan or 'the kernel'}"
        return {"R": "running", "S": "sleeping", "D": "in the kernel (D)", "T": "stopped", "t": "traced"}.get(
            self.state or "", self.state or "?")

    def to_dict(self) -> dict[str, Any]:
        def place(w: Where | None) -> dict[str, Any] | None:
            if w is None:
                return None
            return {"function": w.function, "file": w.file, "line": w.line, "collective": w.collective,
                    "code": self.line_of(w), "innermost": list(w.top) if w.top else None}
        return {"label": self.label, "pid": self.pid, "member": self.member, "stuck": self.stuck, "cpu_s": self.cpu_s,
                "switches": self.switches, "error": self.error, "main": place(self.main),
                "main_samples": list(self.main_share), "state": self.state, "states": dict(self.states),
                "wchan": self.wchan, "tracer": self.tracer, "native_wait": self.wait,
                "native_wait_elsewhere": self.wait_elsewhere,
                "native_read": self.native_read, "framework": self.framework,
                "threads": {n: {"where": place(w), "samples": [k, m]} for n, (w, k, m) in self.threads.items()}}


def _is_sleuth_thread(t: Mapping[str, Any]) -> bool:
    if t.get("name") == "sleuth-flight-recorder":
        return True
    frames = t.get("frames") or []
    return bool(frames) and any("_sleuth_flight_recorder" in str(f[0]) for f in frames)


def _label(rec: Mapping[str, Any]) -> str:
    return f"rank {rec['rank']}" if rec.get("rank") not in (None, "") else f"pid {rec['pid']}"


def _main_thread(threads: list[Mapping[str, Any]], pid: int) -> Mapping[str, Any] | None:
    return next((t for t in threads if t.get("tid") == pid), None) or \
        next((t for t in threads if t.get("name") == "MainThread"), None)


def _view(rec: Mapping[str, Any], member: str | None) -> RankView:
    view = RankView(_label(rec), int(rec["pid"]), member, code=dict(rec.get("code") or {}))
    places: dict[str, Counter] = {}
    reads = 0
    tids: dict[str, int] = {}
    for sample in rec.get("samples") or []:
        if not isinstance(sample, list):
            view.error = view.error or (sample or {}).get("error")
            continue
        reads += 1
        for t in sample:
            if _is_sleuth_thread(t):
                continue  # the hook's Flight Recorder thread: sleuth's, not the job's
            name = str(t.get("name") or t.get("tid"))
            if t.get("tid") is not None:
                tids[name] = int(t["tid"])
            places.setdefault(name, Counter())[_where(t.get("frames") or [])] += 1
        main_t = _main_thread(sample, view.pid)
        if main_t is not None and view.framework is None:
            view.framework = framework_frame(main_t.get("frames") or [])
    if rec.get("denied"):
        view.error = f"stacks not readable: {rec['denied']}"
    for name, counts in places.items():
        w, n = counts.most_common(1)[0]
        view.threads[name] = (w, n, reads)
    main = view.threads.get("MainThread")
    main_name = "MainThread" if main is not None else None
    if main is None and tids:  # the thread whose id is the process's
        for name, tid in tids.items():
            if tid == view.pid:
                main, main_name = view.threads.get(name), name
    nat = rec.get("native") or {}
    if isinstance(nat.get("threads"), list):
        view.native_read = True
        main_t = _main_thread(nat["threads"], view.pid)
        if main_t is not None:
            view.wait = native_wait(main_t.get("frames") or [])
            view.framework = view.framework or framework_frame(main_t.get("frames") or [])
    if main is not None and view.wait is not None:
        # the native read comes after the window: its wait is this rank's only where its Python
        # frames are at the window's usual place (else the rank had moved on: said, not used)
        at = _where(_main_thread(nat["threads"], view.pid).get("frames") or [])  # type: ignore[union-attr]
        if at is None or main[0] is None or (at.function, at.file, at.line) != (main[0].function, main[0].file,
                                                                                   main[0].line):
            view.wait_elsewhere, view.wait = view.wait, None
    if main is not None:
        counts = places.get(main_name or "", Counter())
        w, n, m = main
        if w is not None and not w.collective and view.wait and view.wait["kind"] == "collective":
            w = Where(w.function, w.file, w.line, "DDP reducer" if "Reducer" in view.wait["frame"] else "collective", w.top)
        view.main, view.main_share = w, (n, m)
        view.places = len(counts)
        k = sum(c for p, c in counts.items() if p is not None and p.collective)
        view.in_collective = (k, reads)
        view.in_collective_share = k / max(1, reads)
    view.states = {str(k): int(v) for k, v in (rec.get("states") or {}).items()}
    view.tracer, view.tracer_comm = rec.get("tracer"), rec.get("tracer_comm")
    for task in rec.get("tasks") or []:
        if int(task.get("tid", -1)) == view.pid:
            view.cpu_s, view.switches = task.get("cpu_s"), task.get("switches")
            view.state, view.wchan = task.get("state"), task.get("wchan")
            if view.cpu_s is not None and view.switches is not None:
                view.stuck = view.cpu_s == 0 and view.switches == 0 and task.get("state") != "R"
    if view.stopped() or view.dead():
        view.stuck = True  # it makes no progress whatever its counters say
    return view


def _ranks_text(views: list[RankView]) -> str:
    labels = [v.label for v in views]
    if all(lbl.startswith("rank ") for lbl in labels):
        nums = sorted(int(lbl.split()[1]) for lbl in labels)
        return ("rank " if len(nums) == 1 else "ranks ") + ", ".join(map(str, nums))
    return ", ".join(labels)


def _member(v: RankView) -> str:
    return f" on {v.member}" if v.member else ""


def _where_text(v: RankView) -> str:
    """Where a rank's main thread is: the job's frame (its line of code), the framework frame
    and the native wait below it."""
    if v.main is None:
        return "?"
    said = v.main.text()
    if v.line_of(v.main):
        said += f" `{v.line_of(v.main)}`"
    if v.framework:
        f = v.framework
        said += f", under {f['package']}'s {f['function']} ({_short(f['file'])}:{f['line']})"
    if v.wait:
        said += f", in {v.wait['frame']} ({v.wait['what']})"
    return said


def analyze_stacks(records: Iterable[Mapping[str, Any]], member_of: Mapping[int, str] | None = None,
                   window: float | None = None) -> dict[str, Any]:
    """What :func:`_analyze` reads from the stacks, with the Flight Recorder's reading after it
    (``flight_recorder``, ``fr_behind``, ``fr_mismatch``, ``fr_agrees``; its sentences follow the
    stacks' own, and whether it names the same ranks). *window* is the sampling window's length
    where the records carry no result (a fleet's members)."""
    records_list = list(records)
    recs = [r for r in records_list if r.get("kind") == "rank"]
    views = [_view(r, (member_of or {}).get(i)) for i, r in enumerate(recs)]
    if window is None:
        window = max((float(r.get("window_s") or 0) for r in records_list if r.get("kind") == "result"), default=0.0)
    result = next((r for r in records_list if r.get("kind") == "result"), {})
    out = _analyze(recs, views, window, (str(result.get("looked_for") or ""), result.get("chosen")), member_of)
    helpers = [h for r in records_list if r.get("kind") == "result" for h in (r.get("helpers") or [])]
    if helpers:
        kinds = Counter(str(h.get("comm") or "?") for h in helpers)
        out["sentences"].append(
            f"{len(helpers)} child process{'es' if len(helpers) != 1 else ''} of the ranks ("
            + ", ".join(f"{c} ×{n}" for c, n in kinds.most_common()) + "), started with their rank's environment, "
            "are the ranks' helpers (data-loader "
            "workers and the like), not ranks: left out of the comparison")
    fr = read_flight_recorder(recs, views, healthy=bool(out["healthy"]))
    out.update({k: fr[k] for k in ("flight_recorder", "fr_behind", "fr_mismatch")})
    for row in out["per_rank"]:
        if row["label"] in fr["fr_per_rank"]:
            row["flight_recorder"] = fr["fr_per_rank"][row["label"]]
    out["sentences"].extend(fr["fr_sentences"])
    odd = {r["rank"] for r in out["odd_ranks"]}
    if fr["fr_behind"] and odd:
        out["fr_agrees"] = set(fr["fr_behind"]) == odd
        out["sentences"].append(
            f"the flight recorder agrees: {', '.join(sorted(odd, key=str))}" if out["fr_agrees"] else
            f"the flight recorder names {', '.join(fr['fr_behind'])}, the stacks {', '.join(sorted(odd, key=str))}: "
            "read both before acting")
    else:
        out["fr_agrees"] = None
    if fr["fr_behind"] or fr["fr_mismatch"]:
        out["agreed"] = False
    return out


def _spinning(v: RankView, window: float) -> bool:
    """Busy on CPU for most of the window and in the same place in every sample: a host thread
    waiting on the GPU does exactly this (CUDA spins by default), and so does one long call.
    CPU time alone says nothing about progress then."""
    n, m = v.main_share
    return bool(window) and v.cpu_s is not None and v.cpu_s >= 0.6 * window and m >= 2 and n == m


def _fresh(recs: list[Mapping[str, Any]], views: list[RankView]) -> dict[str, Any]:
    return {"ranks": len(views), "sampled": sum(1 for v in views if v.main is not None),
            "unreadable": sum(1 for v in views if v.main is None), "missing": 0, "elsewhere": False, "stuck": 0, "stopped": 0, "odd": 0,
            "mismatch": False, "deadlocks": 0, "stragglers": 0, "healthy": False, "verdict": "unknown",
            "compared": True, "agreed": False, "straggler_tested": False, "odd_ranks": [], "groups": [],
            "sentences": [], "per_rank": [v.to_dict() for v in views]}


def _numbers_text(nums: list[int]) -> str:
    """Rank numbers in words, runs of three or more as a range: "rank 0", "ranks 4–7, 9"."""
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(f"{nums[i]}–{nums[j]}" if j - i >= 2 else ", ".join(map(str, nums[i:j + 1])))
        i = j + 1
    return ("rank " if len(nums) == 1 else "ranks ") + ", ".join(parts)


# how a rank's local world (what its launcher started on its machine) was known, in words
_LOCAL_WORLD_FROM = {"LOCAL_WORLD_SIZE": "LOCAL_WORLD_SIZE", "launcher": "rank 0 and the local ranks it started",
                     "torch.multiprocessing.spawn": "the processes torch.multiprocessing.spawn started"}


def _other_node(recs: list[Mapping[str, Any]], world: int,
                member_of: Mapping[int, str] | None) -> tuple[list[str], list[str]]:
    """What shows a node besides the ones read, and what shows none: a node rank above 0
    (NODE_RANK, torchrun's GROUP_RANK), a MASTER_ADDR that is not this machine, a world larger
    than the processes every launcher found started here (LOCAL_WORLD_SIZE, Lightning's
    launcher and its children, torch.multiprocessing.spawn's). (another node, this machine)."""
    other: list[str] = []
    here: list[str] = []
    nodes = sorted({(key, str(r.get(field))) for r in recs for key, field in (("NODE_RANK", "node_rank"),
                                                                             ("GROUP_RANK", "group_rank"))
                    if str(r.get(field) or "").isdigit()}, key=lambda kv: (kv[0], int(kv[1])))
    above = [f"{key} {n}" for key, n in nodes if n != "0"]
    if above:
        other.append(f"the ranks here have {', '.join(above)}")
    elif nodes:
        here.append(" and ".join(sorted({key for key, _n in nodes})) + " 0")
    masters = {str(r.get("master_addr")): r.get("master_here") for r in recs if r.get("master_addr")}
    away = sorted(a for a, at in masters.items() if at is False)
    if away:
        other.append(f"MASTER_ADDR {', '.join(away)} is not this machine")
    elif masters and all(at is True for at in masters.values()):
        here.append(f"MASTER_ADDR {', '.join(sorted(masters))} is this machine")
    launchers: dict[tuple[str, str], int] = {}
    how: set[str] = set()
    for i, r in enumerate(recs):
        if not str(r.get("local_world") or "").isdigit():
            launchers = {}
            break
        key = ((member_of or {}).get(i, ""), str(r.get("launcher")))
        launchers[key] = max(launchers.get(key, 0), int(r["local_world"]))
        how.add(str(r.get("local_world_from")))
    if launchers:
        started = sum(launchers.values())
        what = "the launcher found accounts" if len(launchers) == 1 else f"the {len(launchers)} launchers found account"
        by = "; ".join(_LOCAL_WORLD_FROM.get(h, h) for h in sorted(how))
        if started < world:
            other.append(f"{what} for {started} of the world's {world} ({by})")
        else:
            here.append(f"{what} for all {world} ({by})")
    return other, here


def _missing(recs: list[Mapping[str, Any]], out: dict[str, Any], looked_for: tuple[str, str | None] = ("", None),
             member_of: Mapping[int, str] | None = None) -> None:
    """The world's ranks not found here: elsewhere (another node) only where something shows
    another node; otherwise not found here, with what was looked for (*looked_for*: the words,
    and the parameter that chose the processes, pid or match, if one did) and what shows none."""
    world = max((int(r["world_size"]) for r in recs if str(r.get("world_size") or "").isdigit()), default=0)
    found = {str(r.get("rank")) for r in recs if r.get("rank") not in (None, "")}
    unread = [r for r in recs if r.get("rank") in (None, "") and r.get("rank_unread")]
    missing = max(0, world - len(found) - len(unread)) if world else 0
    out["missing"] = missing
    if unread:  # a process of the job here whose rank could not be read: never counted as elsewhere
        out["sentences"].append(
            f"{len(unread)} process{'es' if len(unread) > 1 else ''} of the job here (pid "
            + ", ".join(str(r.get("pid")) for r in unread) + f") could not be told {'their ranks' if len(unread) > 1 else 'its rank'}"
            f" ({unread[0]['rank_unread']}); {'they are' if len(unread) > 1 else 'it is'} read with the others, "
            "not counted as elsewhere")
    assumed = sorted({str(r.get("world_size")) for r in recs if r.get("world_from") == "nprocs"})
    if assumed:  # nothing of the job said the world's size: said, so that no one reads it as checked
        out["sentences"].append(
            f"world size taken as the {' or '.join(assumed)} processes torch.multiprocessing.spawn started here (no "
            "WORLD_SIZE in their environment, no world_size argument to read): a rank on another node would not be seen")
    if not missing:
        return
    absent = [n for n in range(world) if str(n) not in found]
    which = _numbers_text(absent) if not unread and len(absent) == missing else f"{missing} rank{'s' if missing > 1 else ''}"
    other, here = _other_node(recs, world, member_of)
    out["elsewhere"] = bool(other)
    where = "here" if not member_of else f"on {', '.join(sorted(set(member_of.values())))}"
    head = f"world size {world}, {len(found)} rank{'s' if len(found) != 1 else ''} found {where}: "
    if other:  # "N is/are elsewhere": the count first, as before, then which
        out["sentences"].append(
            head + f"{missing} {'is' if missing == 1 else 'are'} elsewhere ({which}), on another node — "
            + "; ".join(other) + (": run stacks on the fleet" if not member_of else ": a node outside this fleet"))
        return
    words, chosen = looked_for
    tail = {"pid": "name its pid too, or read without --param pid",
            "match": "widen the pattern, or read without --param match"}.get(str(chosen), (
        f"{'it' if missing == 1 else 'they'} may have exited, or run as another user or without a launcher's "
        "environment (--param pid= names the processes to read)"))
    out["sentences"].append(
        head + f"{which} {'is' if missing == 1 else 'are'} not found {where}, and nothing shows another node"
        + (f" ({'; '.join(here)})" if here else "") + (f"; looked for {words}" if words else "") + f" — {tail}")


def _several_jobs(recs: list[Mapping[str, Any]], views: list[RankView], out: dict[str, Any]) -> bool:
    jobs: dict[str, list[RankView]] = {}
    for r, v in zip(recs, views):
        if r.get("job"):
            jobs.setdefault(str(r["job"]), []).append(v)
    if len(jobs) < 2:
        return False
    out.update(verdict="several-jobs", stuck=0, missing=0, elsewhere=False, compared=False,
               jobs=[{"job": key, "ranks": [v.label for v in members], "pids": [v.pid for v in members]}
                     for key, members in jobs.items()])
    out["sentences"].append(f"{len(jobs)} jobs run here; their ranks are not compared — "
                            + "; ".join(f"job {key}: {_ranks_text(members)} (pid "
                                        + ", ".join(str(v.pid) for v in members) + ")" for key, members in jobs.items())
                            + f". Read one job: --param job={next(iter(jobs))}")
    return True


def _odd_row(v: RankView, kind: str) -> dict[str, Any]:
    w = v.main
    return {"rank": v.label, "member": v.member, "function": w.function if w else None, "file": w.file if w else None,
            "line": w.line if w else None, "collective": w.collective if w else None,
            "code": v.line_of(w) if w else None, "stuck": v.stuck, "kind": kind, "state": v.state,
            "native_wait": v.wait, "framework": v.framework}


def _others_wait_text(others: list[RankView]) -> str:
    places = Counter(_where_text(v) for v in others)
    return "; ".join(f"{_ranks_text([v for v in others if _where_text(v) == p])} "
                     f"{'wait' if n > 1 else 'waits'} in {p}" for p, n in places.most_common(3))


def _stopped_reading(readable: list[RankView], views: list[RankView], out: dict[str, Any]) -> bool:
    """A rank stopped (T, or traced), dead (Z) or in the kernel (D) all window: the odd rank,
    whatever its frames say — the others wait for it."""
    held = [v for v in views if v.stopped() or v.dead() or v.in_kernel()]
    if not held:
        return False
    out["stopped"] = len(held)
    out["stuck"] = sum(1 for v in readable if v.stuck) + sum(1 for v in held if v not in readable)
    others = [v for v in readable if v not in held]
    for v in held:
        kind = "dead" if v.dead() else "stopped" if v.stopped() else "kernel"
        out["odd_ranks"].append(_odd_row(v, kind))
        where = f" in {_where_text(v)}" if v.main else ""
        tail = f"; {_others_wait_text(others)}: they wait for it" if others else ""
        out["sentences"].append(f"{v.label}{_member(v)} is {v.state_text()}{where}{tail}")
    out["odd"] = len(held)
    if not others:
        out["sentences"].append(f"all {len(held)} ranks are held ({', '.join(sorted({v.state_text() for v in held}))}): "
                                "the job was stopped from outside (job control, a freezer cgroup, a debugger)")
    out["verdict"] = "stopped" if any(r["kind"] == "stopped" for r in out["odd_ranks"]) else out["odd_ranks"][0]["kind"]
    return True


def _busy_reading(readable: list[RankView], window: float, out: dict[str, Any]) -> bool:
    spinning = [v for v in readable if _spinning(v, window)]
    if not (all(v.stuck is False for v in readable) and 2 * len(spinning) >= len(readable)):
        return False
    # Moving by CPU only: neither healthy nor a straggler can be told from this window
    out["verdict"], out["compared"] = "busy", False
    places = Counter(v.main.text() for v in spinning if v.main)
    waits = {v.wait["what"] for v in spinning if v.wait}
    out["sentences"].append(
        f"{_ranks_text(spinning)} {'are' if len(spinning) > 1 else 'is'} busy in "
        + "; ".join(f"{where}" for where, _n in places.most_common(3))
        + (f" ({', '.join(sorted(waits))})" if waits else "")
        + f" in every sample, on CPU for most of the {window:.2f} s window: a thread waiting on the GPU "
        "spins like this (CUDA's default), so CPU time does not tell progress from a hang here — read "
        "again over a longer window (--param samples=20) or with the Flight Recorder (--hook)")
    return True


def _polling_reading(readable: list[RankView], out: dict[str, Any]) -> bool:
    """Every rank awake but in a collective (or the store) in every sample: they poll one wait
    (blocking-wait modes, store-based barriers) and none was seen leave it — not healthy."""
    def held(v: RankView) -> bool:
        k, m = v.in_collective
        return (m > 0 and k == m) or (v.places == 1 and bool(v.wait) and v.wait["kind"] in ("collective", "store"))
    if not readable or not all(held(v) for v in readable):
        return False
    out["verdict"], out["compared"] = "waiting", False
    out["sentences"].append(
        f"all {len(readable)} ranks wait in a collective in every sample, awake: {_others_wait_text(readable)} — "
        f"none was seen outside it in {max(v.in_collective[1] for v in readable) or 'these'} samples: ranks polling "
        "one wait (a blocking-wait mode, a store barrier), a rank outside this set, the transport, a collective "
        "longer than the window, or a job at work whose steps are mostly collectives (a loaded machine) read like "
        "this. Read again over a longer window (--param samples=20) or with the Flight Recorder (--hook) to tell which")
    return True


def _straggler_test(readable: list[RankView]) -> tuple[list[tuple[RankView, str]], bool]:
    """Ranks that wait far less than the others (the others wait for them), each with its
    strength: by the main thread's /proc state over the window's reads (waiting = S or D; a
    rank that computes, is throttled or is stopped now and then is R or T), and by the share of
    py-spy samples in a collective. A rank is named where the chance of so few waits, had it
    waited like the others (their rate by Laplace's rule), is below the project's strength
    (0.01) over the number of ranks and tests; a rank stopped (T) in
    some reads while the others are not is named by that share the same way. Reads are thinned to one per ~50 ms so that
    neighbouring reads of one phase are not counted as independent. Returns the named ranks
    with the sentence part, and whether the test could have named one at all."""
    tests = 3 * max(1, len(readable))
    cut = STRONG / tests
    named: list[tuple[RankView, str]] = []
    powered = False
    for v in readable:
        others = [o for o in readable if o is not v]
        if not others:
            continue
        found: list[str] = []
        # by state reads
        n = v.reads() // 5
        if n:
            waits = (v.states.get("S", 0) + v.states.get("D", 0)) // 5
            o_w = sum(o.states.get("S", 0) + o.states.get("D", 0) for o in others) // 5
            o_n = sum(o.reads() for o in others) // 5
            rate = (o_w + 1) / (o_n + 2)
            if (1 - rate) ** n < cut:
                powered = True
            chance = _binom_cdf(waits, n, rate)
            if chance < cut and waits / n < rate:
                stopped = v.states.get("T", 0) + v.states.get("t", 0)
                found.append(f"waiting in {waits} of {n} reads of its state against {o_w} of {o_n} for the others"
                             + (f", stopped (T) in {stopped} of {v.reads()} reads: stopped and continued from outside"
                                if stopped else "")
                             + f"; chance {chance:.1e} if it waited like them")
        # by stops: a rank stopped (T) in some reads while the others are not is being stopped and
        # continued from outside (a duty cycle, a freezer); this holds when every rank is short of
        # CPU and the waiting shares look alike
        if n:
            stops = (v.states.get("T", 0) + v.states.get("t", 0)) // 5
            o_s = sum(o.states.get("T", 0) + o.states.get("t", 0) for o in others) // 5
            o_n = sum(o.reads() for o in others) // 5
            rate = (o_s + 1) / (o_n + 2)
            chance = 1.0 - _binom_cdf(stops - 1, n, rate) if stops else 1.0
            if chance < cut and stops / n > rate and not any("stopped (T)" in f for f in found):
                found.append(f"stopped (T) in {stops} of {n} reads against {o_s} of {o_n} for the others: stopped "
                             f"and continued from outside; chance {chance:.1e}")
        k, m = v.in_collective
        if m:
            o_k = sum(o.in_collective[0] for o in others)
            o_m = sum(o.in_collective[1] for o in others)
            rate = (o_k + 1) / (o_m + 2)
            if (1 - rate) ** m < cut:
                powered = True
            chance = _binom_cdf(k, m, rate)
            if chance < cut and k / m < rate:
                found.append(f"in a collective in {k} of {m} samples against {o_k} of {o_m} for the others; "
                             f"chance {chance:.1e}")
        if found:
            named.append((v, "; ".join(found)))
    return named, powered


def _straggler(v: RankView, others: str, out: dict[str, Any], window: float, why: str | None) -> None:
    """The straggler's row and sentence (one place for both readings that name one)."""
    n, m = v.main_share
    out["stragglers"] += 1
    out["odd"] = out["stragglers"] + sum(1 for r in out["odd_ranks"] if r.get("kind") != "straggler")
    out["odd_ranks"].append({**_odd_row(v, "straggler"), "stuck": False, "strength": why})
    share = f", {v.cpu_s / window:.0%} of the window" if v.cpu_s is not None and window else ""
    out["sentences"].append(
        f"{v.label}{_member(v)} is a straggler: in {_where_text(v)} in {n} of {m} samples, moving (CPU "
        f"{v.cpu_s or 0:.2f} s{share}, {v.switches or 0} wake-ups)" + (f"; {why}" if why else "")
        + f"; {others}: it holds the others back")


def _moving_reading(readable: list[RankView], window: float, out: dict[str, Any]) -> None:
    named, powered = _straggler_test(readable)
    out["straggler_tested"] = powered or bool(named)
    if named and len(named) < len(readable):
        waiting = [v for v in readable if all(v is not x for x, _ in named)]
        for v, why in named:
            _straggler(v, _others_wait_text(waiting), out, window, why)
        out["verdict"] = "straggler"
        return
    out["healthy"], out["verdict"], out["odd"] = True, "healthy", 0
    groups = Counter(v.main.text() for v in readable if v.main)
    out["sentences"].append(f"healthy: all {len(readable)} ranks move (each main thread used CPU or woke in the window, "
                            "and was seen outside a collective)"
                            + (f"; most often in {groups.most_common(1)[0][0]}" if groups else ""))
    if not out["straggler_tested"]:
        out["sentences"].append("not enough samples to tell a straggler from this window: none is ruled out — read "
                                "again with more samples (--param samples=20)")


def _deadlocked_threads(v: RankView, raw: Mapping[str, Any]) -> list[tuple[str, Where]]:
    """The job's own threads of rank *v* that wait on a lock, an event or a join: Python's wait
    functions innermost (the frame below the job's), or a `with lock:` / `.acquire(` line."""
    waiting: list[tuple[str, Where]] = []
    inner: dict[str, list[Any]] = {}
    for sample in (raw.get("samples") or [])[-1:]:
        if isinstance(sample, list):
            for t in sample:
                frames = _python_frames(t.get("frames") or [])
                if frames:
                    inner[str(t.get("name") or t.get("tid"))] = frames
    for name, (tw, _k, _m) in v.threads.items():
        if tw is None or is_library(tw.file):
            continue
        frames = inner.get(name) or []
        below = [f for f in frames if f[1] != tw.file or f[2] != tw.line]
        top = frames[0] if frames else None
        waits_in_lib = bool(top and _WAIT_FILES.search(str(top[1])) and
                            _WAIT_FUNCS.search(str(top[0]).rsplit(".", 1)[-1]))
        if (below and waits_in_lib) or _LOCK_LINE.search(v.line_of(tw) or ""):
            waiting.append((name, tw))
    return waiting


def _stuck_reading(recs: list[Mapping[str, Any]], readable: list[RankView], out: dict[str, Any]) -> None:
    said: list[str] = out["sentences"]
    out["stuck"] = sum(1 for v in readable if v.stuck)
    groups: dict[tuple, list[RankView]] = {}
    for v in readable:
        groups.setdefault(v.signature(), []).append(v)
    ordered = sorted(groups.values(), key=lambda g: (-len(g), g[0].label))
    out["groups"] = [{"ranks": [v.label for v in g], "where": _where_text(g[0])} for g in ordered]
    majority = ordered[0] if len(ordered) == 1 or len(ordered[0]) > len(ordered[1]) else None
    if majority is None:  # no majority (two ranks, two places; or a tie)
        for g in ordered:
            said.append(f"{_ranks_text(g)} {'wait' if len(g) > 1 else 'waits'} in {_where_text(g[0])}")
        out["verdict"] = "split"
        out["mismatch"] = sum(1 for g in ordered if g[0].in_a_collective()) > 1
        return
    odd = [v for g in ordered[1:] for v in g]
    out["odd"] = len(odd)
    base_text = _where_text(majority[0])
    raw_of = {int(r["pid"]): r for r in recs}
    for v in odd:
        w = v.main
        assert w is not None
        if v.in_a_collective() and v.stuck:
            out["mismatch"] = True
            out["odd_ranks"].append(_odd_row(v, "mismatch"))
            said.append(f"{v.label}{_member(v)} waits in {_where_text(v)}; {_ranks_text(majority)} wait in {base_text}: "
                        "a collective mismatch (another collective, another call site or another group)")
        elif v.stuck:
            lockish = _deadlocked_threads(v, raw_of.get(v.pid, {}))
            main_waits = any(tw == w for _n, tw in lockish)
            if majority[0].in_a_collective() and main_waits and len(lockish) >= 2:
                out["deadlocks"] += 1
                out["odd_ranks"].append(_odd_row(v, "deadlock"))
                threads = "; ".join(f"{n} in {tw.text()}" + (f" `{v.line_of(tw)}`" if v.line_of(tw) else "")
                                    for n, tw in lockish)
                said.append(f"{v.label}{_member(v)} is in no collective while {_ranks_text(majority)} wait in "
                            f"{base_text}; its threads wait on each other: {threads} — a deadlock inside {v.label}")
            else:
                out["odd_ranks"].append(_odd_row(v, "stuck"))
                said.append(f"{v.label}{_member(v)} is stuck in {_where_text(v)} (no CPU, no wake-up in the window) "
                            f"while {_ranks_text(majority)} wait in {base_text}")
        else:
            _straggler(v, f"{_ranks_text(majority)} wait in {base_text}", out, 0.0, None)
    if not odd:
        moving = [v for v in readable if v.stuck is False]
        if all(v.stuck for v in readable):
            known = all(v.native_read or v.main and v.main.collective for v in readable)
            if majority[0].in_a_collective():
                out["agreed"] = not out["missing"]
                said.append(f"all {len(readable)} ranks are stuck in {base_text}"
                            + (": the missing ranks are the ones to look at" if out["missing"] else
                               ": every rank waits in the same collective — a rank outside this set, or the transport"))
            elif majority[0].wait and majority[0].wait["kind"] == "gpu":
                said.append(f"all {len(readable)} ranks are stuck in {base_text}: waiting on the GPU, not in a "
                            "collective — a kernel that does not finish, or one longer than the window (read again "
                            "over a longer window: --param samples=20)")
            else:
                said.append(f"all {len(readable)} ranks are stuck in {base_text}: no collective was seen"
                            + ("" if known else " (the native frames were not read: --param native=all tells whether "
                                                "they wait in C++)") + " — the Flight Recorder (--hook) or a longer "
                            "window tells more")
        elif moving:
            said.append(f"{_ranks_text(moving)} move, in {base_text}")
    kinds = {r.get("kind") for r in out["odd_ranks"]}
    out["verdict"] = ("mismatch" if "mismatch" in kinds else "deadlock" if "deadlock" in kinds else
                      "straggler" if "straggler" in kinds else "stuck" if out["stuck"] else "unknown")


def _analyze(recs: list[Mapping[str, Any]], views: list[RankView], window: float = 0.0,
             looked_for: tuple[str, str | None] = ("", None), member_of: Mapping[int, str] | None = None) -> dict[str, Any]:
    """The fields the hang rules read (``ranks``, ``sampled``, ``stuck``, ``stopped``, ``odd``,
    ``mismatch``, ``deadlocks``, ``stragglers``, ``healthy``, ``straggler_tested``, ``agreed``,
    ``missing``, ``elsewhere``, ``unreadable``, ``compared``), ``verdict``, ``sentences``, ``odd_ranks`` and
    ``per_rank``. Each reading is one function; the first that applies decides."""
    out = _fresh(recs, views)
    readable = [v for v in views if v.main is not None]
    for v in views:
        if v.main is None:
            pid = "" if v.label.startswith("pid ") else f" (pid {v.pid})"
            out["sentences"].append(f"{v.label}{_member(v)}{pid}: no stacks — {v.error or 'nothing was read'}")
    _missing(recs, out, looked_for, member_of)
    if _several_jobs(recs, views, out):  # two jobs' ranks are never compared: which is odd would mean nothing
        return out
    if _stopped_reading(readable, views, out):
        return out
    if not readable:
        return out
    if _busy_reading(readable, window, out):
        return out
    if all(v.stuck is False for v in readable):
        if not _polling_reading(readable, out):
            _moving_reading(readable, window, out)
        return out
    _stuck_reading(recs, readable, out)
    return out


def state_word(r: dict[str, Any]) -> str:
    """A rank's state in a word: its /proc state where it decides (stopped, traced, dead, in the
    kernel), else stuck or moving over the window."""
    states = r.get("states") or {}
    reads = sum(states.values())
    if r.get("state") in ("Z", "X"):
        return "dead (Z)"
    if reads and states.get("T", 0) + states.get("t", 0) == reads or not reads and r.get("state") in ("T", "t"):
        return f"traced (t) by {r['tracer']}" if r.get("tracer") else "stopped (T)"
    if reads and states.get("D", 0) == reads:
        return f"D {r.get('wchan') or ''}".strip()
    if reads and states.get("T", 0):
        return f"T {states['T']}/{reads}"
    return "stuck" if r.get("stuck") else "moving" if r.get("stuck") is False else "?"


def _group_text(pg: str, names: Mapping[str, str]) -> str:
    name = names.get(pg) or ""
    return f"group {pg}" + (f" ({name})" if name and name not in ("undefined", pg) else "")


def _sizes(sizes: Any) -> str:
    return "" if not sizes else " " + "x".join(str(n) for n in sizes[0]) if isinstance(sizes, list) and sizes and \
        isinstance(sizes[0], list) else f" {sizes}"


def read_flight_recorder(recs: list[Mapping[str, Any]], views: list[RankView], healthy: bool) -> dict[str, Any]:
    """torch's Flight Recorder of each rank (the stacks probe asks the hook, or reads a dump the
    watchdog left), compared across ranks: per process group, the last collective each rank
    entered; a rank behind the others has not entered the collective they wait in (the missing
    rank), and the same collective number posted as different collectives is a mismatch."""
    per: dict[str, dict[str, Any]] = {}
    out: dict[str, Any] = {"flight_recorder": 0, "fr_behind": [], "fr_mismatch": False, "fr_agrees": None,
                           "fr_sentences": [], "fr_per_rank": {}}
    for rec, v in zip(recs, views):
        fr = rec.get("flight_recorder")
        if not isinstance(fr, dict):
            continue
        if fr.get("error"):
            out["fr_per_rank"][v.label] = {"source": fr.get("source"), "error": fr["error"]}
            continue
        per[v.label] = fr
    out["flight_recorder"] = len(per)
    names: dict[str, str] = {}
    entered: dict[str, dict[str, int]] = {}
    pending: dict[str, list[dict[str, Any]]] = {}
    by_seq: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for label, fr in per.items():
        mine: dict[str, int] = {}
        for e in fr.get("entries") or []:
            if e.get("p2p") or e.get("seq") is None:
                continue
            pg = str(e.get("pg"))
            if e.get("pg_name"):
                names.setdefault(pg, str(e["pg_name"]))
            mine[pg] = max(mine.get(pg, 0), int(e["seq"]))
            by_seq.setdefault((pg, int(e["seq"])), {})[label] = e
            if e.get("retired") is False and e.get("state") != "completed":
                pending.setdefault(label, []).append(e)
        for pg, st in (fr.get("pg_status") or {}).items():
            if "last_enqueued_collective" in st:
                mine[str(pg)] = max(mine.get(str(pg), 0), int(st["last_enqueued_collective"]))
        entered[label] = mine
        waits = pending.get(label, [])
        out["fr_per_rank"][label] = {"source": fr.get("source"), "entered": mine,
                                     "waits_in": [f"{e.get('op')} #{e.get('seq')} on {_group_text(str(e.get('pg')), names)}"
                                                  for e in waits]}
    said: list[str] = out["fr_sentences"]
    if len(per) < 2:
        return out

    def waits_text(label: str) -> str:
        waits = pending.get(label) or []
        if not waits:
            return f"{label} waits in no collective"
        e = waits[-1]
        return f"{label} waits in {e.get('op')} #{e.get('seq')} on {_group_text(str(e.get('pg')), names)}{_sizes(e.get('sizes'))}"

    order = {v.label: i for i, v in enumerate(views)}

    def rank_order(label: str) -> int:
        return order.get(label, len(order))

    for pg in sorted({pg for m in entered.values() for pg in m}, key=lambda g: (len(g), g)):
        have = {label: m[pg] for label, m in entered.items() if pg in m}
        if len(have) < 2:
            continue
        top = max(have.values())
        ahead = sorted((lbl for lbl, n in have.items() if n == top), key=rank_order)
        behind = sorted((lbl for lbl, n in have.items() if n < top), key=rank_order)
        if not behind or healthy:
            continue
        posted = next((by_seq[(pg, top)][lbl] for lbl in ahead if lbl in by_seq.get((pg, top), {})), None)
        what = f"{posted.get('op')} #{top}" if posted else f"collective #{top}"
        ahead_views = [v for v in views if v.label in ahead]
        for label in behind:
            out["fr_behind"].append(label)
            said.append(f"flight recorder: {_ranks_text(ahead_views)} {'are' if len(ahead) > 1 else 'is'} in {what} on "
                        f"{_group_text(pg, names)}, which {label} has not entered (its last there: #{have[label]}); "
                        f"{waits_text(label)}")
    for (pg, seq), posted in sorted(by_seq.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if len(posted) < 2:
            continue
        kinds: dict[tuple[str, str], list[str]] = {}
        for label, e in posted.items():
            kinds.setdefault((str(e.get("op")), _sizes(e.get("sizes"))), []).append(label)
        if len(kinds) > 1:
            out["fr_mismatch"] = True
            parts = sorted(kinds.items(), key=lambda kv: (len(kv[1]), kv[0]))
            said.append(f"flight recorder: collective #{seq} on {_group_text(pg, names)} is not the same on every rank: "
                        + "; ".join(f"{_ranks_text([v for v in views if v.label in labels])} posted {op}{sz}"
                                    for (op, sz), labels in parts))
    return out


def with_hang_analysis(records: list[dict[str, Any]], member_of: Mapping[int, str] | None = None) -> list[dict[str, Any]]:
    """The run's records with the analysis merged into its ``result`` record (what rules read)."""
    found = analyze_stacks(records, member_of)
    out = []
    for rec in records:
        if rec.get("kind") == "result":
            rec = {**rec, **found}
        out.append(rec)
    return out

"""What a job's stacks say when it stops: the ranks grouped by where their threads wait, the
odd ranks named with file:line and function, stuck told from slow, and which kind of stop it
is — a collective mismatch, a deadlock inside a rank, a straggler — or a healthy job.

Pure: it reads the ``rank`` records of a ``stacks`` run (probes/scripts/stacks.py: py-spy's
samples of every thread, and per thread the CPU time and context switches over the window)
and returns the result fields the hang hypotheses' rules read, plus sentences. A thread with
no CPU and no context switch over the window is stuck; one that moved is at most slow.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["COLLECTIVES", "RankView", "analyze_stacks", "is_library", "read_flight_recorder", "with_hang_analysis"]

COLLECTIVES = frozenset({
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce_scatter", "reduce_scatter_tensor",
    "broadcast", "broadcast_object_list", "reduce", "gather", "gather_object", "scatter", "scatter_object_list",
    "barrier", "monitored_barrier", "all_to_all", "all_to_all_single", "send", "recv", "isend", "irecv",
    "batch_isend_irecv", "wait", "_wait",
})
_LIBRARY = re.compile(r"/(site|dist)-packages/|/lib/python\d+(\.\d+)?/|^<")
_LOCKISH = re.compile(r"\bwith\b.*(lock|Lock|mutex|cond|sem)|\.acquire\(|\.wait\(|\.join\(|\.get\(|\bLock\b")


def is_library(path: str | None) -> bool:
    """A frame of Python's own library or an installed package (torch's included), not the job's."""
    return not path or bool(_LIBRARY.search(path))


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Where:
    """The innermost frame of the job's own code in a thread, and the collective below it."""

    function: str
    file: str
    line: int
    collective: str | None = None

    def key(self) -> tuple[str, str, int, str | None]:
        return (self.function, self.file, self.line, self.collective)

    def text(self) -> str:
        said = f"{self.function} at {_short(self.file)}:{self.line}"
        if self.collective:
            said += f" ({self.collective})"
        return said


def _where(frames: list[list[Any]]) -> Where | None:
    collective = None
    for name, path, line in frames:  # innermost first
        short = str(name).rsplit(".", 1)[-1]
        if collective is None and path and "torch/distributed/" in str(path) and short in COLLECTIVES:
            collective = short
        if not is_library(path):
            return Where(str(name), str(path), int(line or 0), collective)
    if frames:  # only library frames: say the innermost one
        name, path, line = frames[0]
        return Where(str(name), str(path or "?"), int(line or 0), collective)
    return None


@dataclass
class RankView:
    label: str  # "rank 2", or "pid 4711" when the process has no RANK
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

    def in_collective(self) -> bool:
        return any(w is not None and w.collective for w, _n, _m in self.threads.values())

    def signature(self) -> tuple:
        """Where this rank waits: its main thread's place, and every thread's that is in a collective."""
        others = sorted((name, w.key()) for name, (w, _n, _m) in self.threads.items()
                        if w is not None and w.collective and name != "MainThread")
        return (self.main.key() if self.main else None, tuple(others))

    def line_of(self, w: Where) -> str | None:
        return self.code.get(f"{w.file}:{w.line}")

    def to_dict(self) -> dict[str, Any]:
        def place(w: Where | None) -> dict[str, Any] | None:
            if w is None:
                return None
            return {"function": w.function, "file": w.file, "line": w.line, "collective": w.collective,
                    "code": self.line_of(w)}
        return {"label": self.label, "pid": self.pid, "member": self.member, "stuck": self.stuck, "cpu_s": self.cpu_s,
                "switches": self.switches, "error": self.error, "main": place(self.main),
                "main_samples": list(self.main_share),
                "threads": {n: {"where": place(w), "samples": [k, m]} for n, (w, k, m) in self.threads.items()}}


def _is_sleuth_thread(t: Mapping[str, Any]) -> bool:
    if t.get("name") == "sleuth-flight-recorder":
        return True
    frames = t.get("frames") or []
    return bool(frames) and any("_sleuth_flight_recorder" in str(f[0]) for f in frames)


def _label(rec: Mapping[str, Any]) -> str:
    return f"rank {rec['rank']}" if rec.get("rank") not in (None, "") else f"pid {rec['pid']}"


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
    if rec.get("denied"):
        view.error = f"stacks not readable: {rec['denied']}"
    for name, counts in places.items():
        w, n = counts.most_common(1)[0]
        view.threads[name] = (w, n, reads)
    main = view.threads.get("MainThread")
    if main is None and tids:  # the thread whose id is the process's
        for name, tid in tids.items():
            if tid == view.pid:
                main = view.threads.get(name)
    if main is not None:
        view.main, view.main_share = main[0], (main[1], main[2])
        name = next((n for n, t in view.threads.items() if t is main), None)
        counts = places.get(name or "", Counter())
        view.in_collective_share = sum(k for w, k in counts.items() if w is not None and w.collective) / max(1, reads)
    for task in rec.get("tasks") or []:
        if int(task.get("tid", -1)) == view.pid:
            view.cpu_s, view.switches = task.get("cpu_s"), task.get("switches")
            if view.cpu_s is not None and view.switches is not None:
                view.stuck = view.cpu_s == 0 and view.switches == 0 and task.get("state") != "R"
    return view


def _ranks_text(views: list[RankView]) -> str:
    labels = [v.label for v in views]
    if all(lbl.startswith("rank ") for lbl in labels):
        nums = sorted(int(lbl.split()[1]) for lbl in labels)
        return ("rank " if len(nums) == 1 else "ranks ") + ", ".join(map(str, nums))
    return ", ".join(labels)


def _member(v: RankView) -> str:
    return f" on {v.member}" if v.member else ""


def analyze_stacks(records: Iterable[Mapping[str, Any]], member_of: Mapping[int, str] | None = None) -> dict[str, Any]:
    """What :func:`_analyze` reads from the stacks, with the Flight Recorder's reading after it
    (``flight_recorder``, ``fr_behind``, ``fr_mismatch``, ``fr_agrees``; its sentences follow the
    stacks' own, and whether it names the same ranks)."""
    records_list = list(records)
    recs = [r for r in records_list if r.get("kind") == "rank"]
    views = [_view(r, (member_of or {}).get(i)) for i, r in enumerate(recs)]
    window = max((float(r.get("window_s") or 0) for r in records_list if r.get("kind") == "result"), default=0.0)
    out = _analyze(recs, views, window)
    helpers = [h for r in records_list if r.get("kind") == "result" for h in (r.get("helpers") or [])]
    if helpers:
        kinds = Counter(str(h.get("comm") or "?") for h in helpers)
        out["sentences"].append(
            f"{len(helpers)} child process{'es' if len(helpers) != 1 else ''} of the ranks, with their rank's RANK ("
            + ", ".join(f"{c} ×{n}" for c, n in kinds.most_common()) + "), are the ranks' helpers (data-loader "
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
    return out


def _spinning(v: RankView, window: float) -> bool:
    """Busy on CPU for most of the window and in the same place in every sample: a host thread
    waiting on the GPU does exactly this (CUDA spins by default), and so does one long call.
    CPU time alone says nothing about progress then."""
    n, m = v.main_share
    return bool(window) and v.cpu_s is not None and v.cpu_s >= 0.6 * window and m >= 2 and n == m


def _analyze(recs: list[Mapping[str, Any]], views: list[RankView], window: float = 0.0) -> dict[str, Any]:
    """The fields the hang rules read (``ranks``, ``sampled``, ``stuck``, ``odd``, ``mismatch``,
    ``deadlocks``, ``stragglers``, ``healthy``, ``missing``, ``unreadable``), ``verdict``,
    ``sentences``, ``odd_ranks`` (label, file:line, function) and ``per_rank``."""
    readable = [v for v in views if v.main is not None]
    unreadable = [v for v in views if v.main is None]
    world = max((int(r["world_size"]) for r in recs if str(r.get("world_size") or "").isdigit()), default=0)
    ranks_found = {str(r.get("rank")) for r in recs if r.get("rank") not in (None, "")}
    missing = max(0, world - len(ranks_found)) if world else 0
    out: dict[str, Any] = {"ranks": len(views), "sampled": len(readable), "unreadable": len(unreadable),
                           "missing": missing, "stuck": sum(1 for v in readable if v.stuck), "odd": 0,
                           "mismatch": False, "deadlocks": 0, "stragglers": 0, "healthy": False, "verdict": "unknown",
                           "compared": True,
                           "odd_ranks": [], "groups": [], "sentences": [],
                           "per_rank": [v.to_dict() for v in views]}
    said: list[str] = out["sentences"]
    for v in unreadable:
        pid = "" if v.label.startswith("pid ") else f" (pid {v.pid})"
        said.append(f"{v.label}{_member(v)}{pid}: no stacks — {v.error or 'nothing was read'}")
    if missing:
        said.append(f"world size {world}, {len(ranks_found)} ranks found here: {missing} "
                    f"{'is' if missing == 1 else 'are'} elsewhere (another node: run stacks on the fleet)")
    jobs: dict[str, list[tuple[Mapping[str, Any], RankView]]] = {}
    for r, v in zip(recs, views):
        if r.get("job"):
            jobs.setdefault(str(r["job"]), []).append((r, v))
    if len(jobs) > 1:  # two jobs' ranks are never compared: which is odd would mean nothing
        out.update(verdict="several-jobs", stuck=0, missing=0, compared=False,
                   jobs=[{"job": key, "ranks": [v.label for _r, v in members], "pids": [v.pid for _r, v in members]}
                         for key, members in jobs.items()])
        said.append(f"{len(jobs)} jobs run here; their ranks are not compared — "
                    + "; ".join(f"job {key}: {_ranks_text([v for _r, v in members])} (pid "
                                + ", ".join(str(v.pid) for _r, v in members) + ")" for key, members in jobs.items())
                    + f". Read one job: --param job={next(iter(jobs))}")
        return out
    if not readable:
        return out
    groups: dict[tuple, list[RankView]] = {}
    for v in readable:
        groups.setdefault(v.signature(), []).append(v)
    ordered = sorted(groups.values(), key=lambda g: (-len(g), g[0].label))
    out["groups"] = [{"ranks": [v.label for v in g], "where": g[0].main.text() if g[0].main else None} for g in ordered]
    majority = ordered[0] if len(ordered) == 1 or len(ordered[0]) > len(ordered[1]) else None
    odd = [v for g in ordered[1:] for v in g] if majority is not None else []
    out["odd"] = len(odd)
    moving = [v for v in readable if v.stuck is False]
    spinning = [v for v in readable if _spinning(v, window)]
    if all(v.stuck is False for v in readable) and 2 * len(spinning) >= len(readable):
        # Moving by CPU only: neither healthy nor a straggler can be told from this window
        out["verdict"], out["compared"] = "busy", False
        places = Counter(v.main.text() for v in spinning if v.main)
        said.append(f"{_ranks_text(spinning)} {'are' if len(spinning) > 1 else 'is'} busy in "
                    + "; ".join(f"{where}" for where, _n in places.most_common(3))
                    + f" in every sample, on CPU for most of the {window:.2f} s window: a thread waiting on the GPU "
                    "spins like this (CUDA's default), so CPU time does not tell progress from a hang here — read "
                    "again over a longer window (--param samples=20) or with the Flight Recorder (--hook)")
        return out
    if all(v.stuck is False for v in readable):
        # Every rank moves: a straggler is one that is almost never in a collective while the
        # others mostly are (they wait for it); anything else is a job at work.
        share = sorted(v.in_collective_share for v in readable)
        median = share[len(share) // 2]
        slow = [v for v in readable if v.in_collective_share <= 0.2] if median >= 0.5 else []
        if slow and len(slow) < len(readable):
            waiting = [v for v in readable if v not in slow]
            where = Counter(v.main.text() for v in waiting if v.main).most_common(1)[0][0]
            for v in slow:
                w = v.main
                assert w is not None
                n, m = v.main_share
                out["stragglers"] += 1
                out["odd_ranks"].append({"rank": v.label, "member": v.member, "function": w.function, "file": w.file,
                                         "line": w.line, "collective": w.collective, "code": v.line_of(w),
                                         "stuck": False, "kind": "straggler"})
                said.append(f"{v.label}{_member(v)} is in {w.text()} in {n} of {m} samples and moving "
                            f"(CPU {v.cpu_s or 0:.2f} s, {v.switches or 0} wake-ups); {_ranks_text(waiting)} wait in "
                            f"{where} in most samples: a straggler holds the others back")
            out["odd"], out["verdict"] = len(slow), "straggler"
            return out
        out["healthy"], out["verdict"], out["odd"] = True, "healthy", 0
        said.append(f"healthy: all {len(readable)} ranks move (each main thread used CPU or woke in the window)"
                    + (f"; most often in {majority[0].main.text()}" if majority is not None and majority[0].main else ""))
        return out
    if majority is None:  # no majority (two ranks, two places; or a tie)
        for g in ordered:
            said.append(f"{_ranks_text(g)} {'wait' if len(g) > 1 else 'waits'} in {g[0].main.text() if g[0].main else '?'}")
        out["verdict"] = "split"
        out["mismatch"] = sum(1 for g in ordered if g[0].main and g[0].main.collective) > 1
        return out
    base = majority[0].main
    base_text = base.text() if base else "?"
    for v in odd:
        w = v.main
        assert w is not None
        row = {"rank": v.label, "member": v.member, "function": w.function, "file": w.file, "line": w.line,
               "collective": w.collective, "code": v.line_of(w), "stuck": v.stuck}
        out["odd_ranks"].append(row)
        if w.collective and v.stuck:
            out["mismatch"] = True
            row["kind"] = "mismatch"
            said.append(f"{v.label}{_member(v)} waits in {w.text()}; {_ranks_text(majority)} wait in {base_text}: a "
                        "collective mismatch (another collective, another call site or another group)")
        elif v.stuck:
            # threads of the job's own code waiting at a lock, wait or join line; Python's and
            # torch's idle helper threads (a queue's feeder, a pool's workers) wait on conditions
            # all the time and say nothing about a deadlock
            lockish = [(n, tw) for n, (tw, _k, _m) in v.threads.items()
                       if tw is not None and not is_library(tw.file) and _LOCKISH.search(v.line_of(tw) or "")]
            main_waits = any(tw == w for _n, tw in lockish)
            if base is not None and base.collective and main_waits and len(lockish) >= 2:
                out["deadlocks"] += 1
                row["kind"] = "deadlock"
                threads = "; ".join(f"{n} in {tw.text()}" + (f" `{v.line_of(tw)}`" if v.line_of(tw) else "")
                                    for n, tw in lockish)
                said.append(f"{v.label}{_member(v)} is in no collective while {_ranks_text(majority)} wait in "
                            f"{base_text}; its threads wait on each other: {threads} — a deadlock inside {v.label}")
            else:
                row["kind"] = "stuck"
                code = f" `{v.line_of(w)}`" if v.line_of(w) else ""
                said.append(f"{v.label}{_member(v)} is stuck in {w.text()}{code} (no CPU, no wake-up in the window) while "
                            f"{_ranks_text(majority)} wait in {base_text}")
        else:
            out["stragglers"] += 1
            row["kind"] = "straggler"
            n, m = v.main_share
            said.append(f"{v.label}{_member(v)} is in {w.text()} in {n} of {m} samples and moving "
                        f"(CPU {v.cpu_s or 0:.2f} s, {v.switches or 0} wake-ups); {_ranks_text(majority)} wait in "
                        f"{base_text}: a straggler holds the others back")
    if not odd:
        if all(v.stuck for v in readable):
            said.append(f"all {len(readable)} ranks are stuck in {base_text}"
                        + (": the missing ranks are the ones to look at" if missing else
                           ": the same place everywhere (a rank outside this set, or the transport)"))
        elif moving:
            said.append(f"{_ranks_text(moving)} move, in {base_text}")
    kinds = {r.get("kind") for r in out["odd_ranks"]}
    out["verdict"] = ("mismatch" if "mismatch" in kinds else "deadlock" if "deadlock" in kinds else
                      "straggler" if "straggler" in kinds else "stuck" if out["stuck"] else "unknown")
    return out


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

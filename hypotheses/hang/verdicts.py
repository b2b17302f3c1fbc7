"""The stacks' reading: which kind of stop the ranks show — stopped from outside, busy on the
GPU, polling one wait, healthy, a straggler, a collective mismatch, a deadlock inside a rank,
stuck — as the fields the hang rules read and the sentences that say it. Each reading is one
function; the first that applies decides (:func:`_analyze`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from .frames import _LOCK_LINE, _WAIT_FILES, _WAIT_FUNCS, Where, _python_frames, is_library
from .rank import RankView, _member, _ranks_text, _where_text
from .straggler import _straggler_test
from .world import _missing, _several_jobs


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

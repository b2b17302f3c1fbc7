"""One rank read from its ``rank`` record: where its threads wait over the window's samples,
its /proc state, CPU time and wake-ups (stuck or moving), the native wait below its main
thread, and the words that name ranks and where they wait."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .frames import Where, _short, _where, framework_frame, native_wait


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

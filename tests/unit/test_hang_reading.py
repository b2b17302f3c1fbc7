"""The hang reading (hypotheses/hang/, and probes/scripts/stacks.py's own parsing) on records
shaped like the stacks probe's: the odd rank, its line and the majority; stuck, straggler,
deadlock, busy; the Flight Recorder; ranks elsewhere, spawned ranks, launchers that are rank 0.
The same reading on real jobs (gloo, DDP, Lightning, spawn) is tests/integration/test_stacks.py."""

from __future__ import annotations

import sys
from pathlib import Path

from sleuth.hypotheses.hang import analyze_stacks

# ------------------------------------------------------------------ the reading, on shaped records

def _rank(rank: int, main: list, *, stuck: bool = True, loader: list | None = None, code: dict | None = None,
          samples: int = 3, cpu: float | None = None) -> dict:
    pid = 1000 + rank
    threads = [{"tid": pid, "name": "MainThread", "frames": main}]
    if loader is not None:
        threads.append({"tid": pid + 1, "name": "loader", "frames": loader})
    return {"kind": "rank", "pid": pid, "rank": str(rank), "world_size": "4", "samples": [threads] * samples,
            "code": code or {},
            "tasks": [{"tid": pid, "state": "S", "cpu_s": cpu if cpu is not None else 0.0 if stuck else 0.02,
                       "switches": 0 if stuck else 9}]}


AR = ["all_reduce", "/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", 3252]


def test_the_reading_names_the_odd_rank_its_line_and_the_majority():
    sync = [AR, ["sync_gradients", "/job/train.py", 101], ["main", "/job/train.py", 140]]
    other = [AR, ["log_loss", "/job/train.py", 111], ["main", "/job/train.py", 139]]
    found = analyze_stacks([_rank(0, sync), _rank(1, sync), _rank(2, other), _rank(3, sync)])
    assert (found["verdict"], found["mismatch"], found["odd"], found["stuck"]) == ("mismatch", True, 1, 4)
    [odd] = found["odd_ranks"]
    assert (odd["rank"], odd["function"], odd["file"], odd["line"], odd["collective"]) == (
        "rank 2", "log_loss", "/job/train.py", 111, "all_reduce")
    assert found["sentences"][0].startswith("rank 2 waits in log_loss at train.py:111 (all_reduce); ranks 0, 1, 3 "
                                            "wait in sync_gradients at train.py:101 (all_reduce)")


def test_a_job_whose_ranks_all_move_is_healthy_and_one_stuck_everywhere_is_not():
    step = [["time.sleep", "<built-in>", 0], ["main", "/job/train.py", 77]]
    moving = analyze_stacks([_rank(r, step, stuck=False) for r in range(4)])
    assert moving["healthy"] and moving["verdict"] == "healthy" and moving["odd_ranks"] == []
    sync = [AR, ["sync_gradients", "/job/train.py", 101]]
    stuck = analyze_stacks([_rank(r, sync) for r in range(3)])  # world size 4, three ranks here
    assert not stuck["healthy"] and stuck["stuck"] == 3 and stuck["missing"] == 1
    # nothing shows another node: not found here, never "elsewhere" (issue 45)
    assert stuck["elsewhere"] is False and any(s.startswith("world size 4, 3 ranks found here: rank 3 is not found here, "
                                                            "and nothing shows another node") for s in stuck["sentences"])


def test_a_rank_is_said_to_be_elsewhere_only_when_something_shows_another_node():
    """Issue 45: "elsewhere (another node)" only on evidence of one — a node rank above 0, a
    MASTER_ADDR that is not this machine, a world larger than what the launchers found started
    here; otherwise "not found here", with what shows none and what was looked for."""
    step = [["time.sleep", "<built-in>", 0], ["main", "/job/train.py", 77]]
    looked = {"kind": "result", "looked_for": "processes with RANK in their environment"}

    def ranks(n: int, world: int = 4, **extra: object) -> list[dict]:
        return [{**_rank(r, step, stuck=False), "world_size": str(world), **extra} for r in range(n)]

    def said(found: dict) -> str:
        return next(s for s in found["sentences"] if s.startswith("world size"))

    here = analyze_stacks(ranks(3, master_addr="127.0.0.1", master_here=True, node_rank="0", local_world=4,
                                local_world_from="launcher", launcher=1000) + [looked])
    assert (here["missing"], here["elsewhere"]) == (1, False)
    assert said(here) == (
        "world size 4, 3 ranks found here: rank 3 is not found here, and nothing shows another node (NODE_RANK 0; "
        "MASTER_ADDR 127.0.0.1 is this machine; the launcher found accounts for all 4 (rank 0 and the local ranks it "
        "started)); looked for processes with RANK in their environment — it may have exited, or run as another user "
        "or without a launcher's environment (--param pid= names the processes to read)")
    chosen = analyze_stacks(ranks(3) + [{**looked, "looked_for": "the processes --param pid named (1000, 1001, 1002)",
                                         "chosen": "pid"}])
    assert said(chosen) == (
        "world size 4, 3 ranks found here: rank 3 is not found here, and nothing shows another node; looked for the "
        "processes --param pid named (1000, 1001, 1002) — name its pid too, or read without --param pid")
    node1 = analyze_stacks(ranks(2, node_rank="1"))
    assert node1["elsewhere"] and said(node1).startswith(
        "world size 4, 2 ranks found here: 2 are elsewhere (ranks 2, 3), on another node — the ranks here have NODE_RANK 1: "
        "run stacks on the fleet"), said(node1)
    away = analyze_stacks(ranks(3, master_addr="10.0.0.7", master_here=False))
    assert away["elsewhere"] and "MASTER_ADDR 10.0.0.7 is not this machine" in said(away)
    # torchrun --nnodes 2 --nproc-per-node 4: this node's launcher started 4 of the world's 8
    half = analyze_stacks(ranks(4, world=8, group_rank="0", local_world=4, local_world_from="LOCAL_WORLD_SIZE",
                                launcher=999))
    assert half["elsewhere"] and said(half) == (
        "world size 8, 4 ranks found here: 4 are elsewhere (ranks 4–7), on another node — the launcher found accounts "
        "for 4 of the world's 8 (LOCAL_WORLD_SIZE): run stacks on the fleet")
    # read across a fleet, a missing rank is outside the fleet
    fleet = analyze_stacks(ranks(4, world=8, local_world=4, local_world_from="LOCAL_WORLD_SIZE", launcher=999),
                           member_of={i: "a" for i in range(4)})
    assert said(fleet).endswith("4 of the world's 8 (LOCAL_WORLD_SIZE): a node outside this fleet"), said(fleet)
    assert said(fleet).startswith("world size 8, 4 ranks found on a: "), said(fleet)


def _stacks_namespace() -> dict:
    """stacks.py's names as the prelude makes them: its parts run first, in the same namespace."""
    from sleuth.probes import builtin_probes

    probe = builtin_probes()["stacks"]
    ns: dict = {"emit": lambda *a, **k: None, "params": {}}
    for name, text in probe.part_sources:
        exec(compile(text, name, "exec"), ns)
    exec(compile(probe.source.replace("\nmain()\n", "\n"), "stacks.py", "exec"), ns)
    return ns


def test_a_launcher_that_is_rank_0_is_found_beside_its_children_that_carry_local_rank_0():
    """Issue 45, shaped as /proc shows a Lightning job: the script (pid 10, no rank in its
    environment) is rank 0 and started local ranks 1..3; after the launch, processes rank 0
    starts inherit LOCAL_RANK=0 from its os.environ (spawn data-loader workers, their resource
    tracker): its helpers, not rank 0. torchrun's children, all with RANK, and a launcher whose
    LOCAL_RANK=0 child runs the ranks' own program, are not taken for a rank-0 launcher."""
    ns = _stacks_namespace()
    lenv = {"LOCAL_RANK": "", "WORLD_SIZE": "4", "NODE_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "5"}
    script, worker = "/v/bin/python /job/train.py --lr 1", "/v/bin/python -B -c from multiprocessing.spawn import spawn_main"

    def proc(pid: int, ppid: int, cmd: str, local: str | None) -> dict:
        return {"pid": pid, "ppid": ppid, "cmd": cmd, "uid": 0, "rank": None,
                "env": {**lenv, "LOCAL_RANK": local} if local is not None else {}}

    def lightning() -> dict[int, dict]:
        return {p["pid"]: p for p in [proc(10, 1, "python train.py --lr 1", None),
                                      *(proc(10 + k, 10, script, str(k)) for k in (1, 2, 3)),
                                      proc(20, 10, worker, "0"), proc(21, 10, worker.replace("spawn", "resource_tracker"), "0"),
                                      proc(22, 11, worker, "1")]}

    everyone = lightning()
    found = [p for p in everyone.values() if ns["launched"](p["env"])]
    ns["launcher_ranks"](found, everyone, False)
    ns["number_ranks"]([p for p in found if p.get("rank_from") != "launcher"])
    assert {p["pid"]: (p["rank"], p.get("rank_from")) for p in found} == {
        10: ("0", "launcher"), 11: ("1", "LOCAL_RANK"), 12: ("2", "LOCAL_RANK"), 13: ("3", "LOCAL_RANK"),
        20: ("0", "LOCAL_RANK"), 21: ("0", "LOCAL_RANK"), 22: ("1", "LOCAL_RANK")}
    assert ns["local_world"](everyone[10]) == (4, "launcher", 10) and ns["local_world"](everyone[12]) == (4, "launcher", 10)
    # a launcher whose LOCAL_RANK=0 child runs the ranks' program is only a launcher
    pure = {p["pid"]: p for p in [proc(30, 1, "launch", None), *(proc(31 + k, 30, script, str(k)) for k in range(4))]}
    found = list(pure.values())[1:]
    ns["launcher_ranks"](found, pure, False)
    assert len(found) == 4 and pure[30].get("rank_from") is None
    # --param match=train.py: the launcher matched too and is rank 0 (it was taken for a launcher only)
    everyone = lightning()
    chosen = [everyone[pid] for pid in (10, 11, 12, 13)]
    ns["launcher_ranks"](chosen, everyone, True)
    assert everyone[10]["rank"] == "0" and everyone[10]["rank_from"] == "launcher"


def test_a_rank_without_stacks_is_named_not_guessed():
    sync = [AR, ["sync_gradients", "/job/train.py", 101]]
    denied = {**_rank(3, sync), "samples": [{"error": "Permission Denied"}], "denied": "Permission Denied"}
    found = analyze_stacks([_rank(0, sync), _rank(1, sync), _rank(2, sync), denied])
    assert found["unreadable"] == 1 and found["sampled"] == 3
    assert found["sentences"][0].startswith("rank 3 (pid 1003): no stacks — stacks not readable: Permission Denied")


def _fr(entries: list[tuple[str, int, str, bool]], status: dict[str, int]) -> dict:
    """A Flight Recorder as the stacks probe condenses it: (group, number, op, finished)."""
    return {"source": "hook", "pg_status": {pg: {"last_enqueued_collective": n} for pg, n in status.items()},
            "entries": [{"pg": pg, "pg_name": "default_pg" if pg == "0" else "undefined", "seq": seq, "p2p": False,
                         "op": op, "sizes": [[64]], "state": "scheduled", "retired": done}
                        for pg, seq, op, done in entries]}


def test_the_flight_recorder_names_the_rank_that_has_not_entered_the_collective_and_agrees_with_the_stacks():
    sync = [AR, ["sync_gradients", "/job/train.py", 101]]
    other = [AR, ["log_loss", "/job/train.py", 111]]
    at4 = _fr([("0", 3, "gloo:all_reduce", True), ("0", 4, "gloo:all_reduce", False)], {"0": 4})
    rank2 = _fr([("0", 3, "gloo:all_reduce", True), ("1", 1, "gloo:all_reduce", False)], {"0": 3, "1": 1})
    rank2["entries"][1]["sizes"] = [[1]]  # its loss, on the other group
    recs = [{**_rank(r, sync), "flight_recorder": at4} for r in (0, 1, 3)]
    recs.insert(2, {**_rank(2, other), "flight_recorder": rank2})
    found = analyze_stacks(recs)
    assert (found["flight_recorder"], found["fr_behind"], found["fr_agrees"], found["fr_mismatch"]) == (
        4, ["rank 2"], True, False)
    assert ("flight recorder: ranks 0, 1, 3 are in gloo:all_reduce #4 on group 0 (default_pg), which rank 2 has not "
            "entered (its last there: #3); rank 2 waits in gloo:all_reduce #1 on group 1 1") in found["sentences"]
    assert "the flight recorder agrees: rank 2" in found["sentences"]
    by_label = {r["label"]: r for r in found["per_rank"]}
    assert by_label["rank 2"]["flight_recorder"]["waits_in"] == ["gloo:all_reduce #1 on group 1"]

    # the same number posted as another collective on one rank: a mismatch the stacks cannot see
    gather = _fr([("0", 4, "nccl:all_gather", False)], {"0": 4})
    same = [{**_rank(r, sync), "flight_recorder": gather if r == 1 else at4} for r in range(4)]
    found = analyze_stacks(same)
    assert found["fr_mismatch"] and found["fr_behind"] == []
    assert ("flight recorder: collective #4 on group 0 (default_pg) is not the same on every rank: rank 1 posted "
            "nccl:all_gather 64; ranks 0, 2, 3 posted gloo:all_reduce 64") in found["sentences"]

    # a healthy job read at a moment when one rank is a step behind: not called missing
    step = [["time.sleep", "<built-in>", 0], ["main", "/job/train.py", 77]]
    moving = [{**_rank(r, step, stuck=False), "flight_recorder": rank2 if r == 2 else at4} for r in range(4)]
    found = analyze_stacks(moving)
    assert found["healthy"] and found["fr_behind"] == [] and not any("flight recorder" in t for t in found["sentences"])

    # sleuth's own Flight Recorder thread in a hooked rank is not one of the job's threads
    hooked = _rank(0, sync)
    hooked["samples"] = [t + [{"tid": 7, "name": "sleuth-flight-recorder",
                               "frames": [["_sleuth_flight_recorder_serve", "/c/sleuth/hook/sitecustomize.py", 70]]}]
                         for t in hooked["samples"]]
    assert set(analyze_stacks([hooked])["per_rank"][0]["threads"]) == {"MainThread"}


def test_idle_helper_threads_of_pythons_own_library_are_no_deadlock():
    """A rank stopped outside any collective, with the two queue-feeder threads a DataLoader
    leaves waiting on conditions, is stuck, not deadlocked: only the job's own threads at lock
    or wait lines, its main thread among them, make a deadlock."""
    sync = [AR, ["sync_gradients", "/job/train.py", 101]]
    sleeping = [["sleep", "<built-in>", 0], ["main", "/job/train.py", 88]]
    feeder = [["Condition.wait", "/usr/lib/python3.11/threading.py", 327],
              ["Queue._feed", "/usr/lib/python3.11/multiprocessing/queues.py", 231]]
    code = {"/usr/lib/python3.11/threading.py:327": "waiter.acquire()", "/job/train.py:88": "time.sleep(3600)"}
    rank2 = _rank(2, sleeping, code=code)
    rank2["samples"] = [threads + [{"tid": 9000 + i, "name": f"QueueFeederThread-{i}", "frames": feeder} for i in (1, 2)]
                        for threads in rank2["samples"]]
    found = analyze_stacks([_rank(0, sync), _rank(1, sync), rank2, _rank(3, sync)])
    [odd] = found["odd_ranks"]
    assert (odd["rank"], odd["kind"]) == ("rank 2", "stuck") and found["deadlocks"] == 0
    assert found["verdict"] == "stuck"
    assert found["sentences"][0] == ("rank 2 is stuck in main at train.py:88 `time.sleep(3600)` (no CPU, no wake-up in "
                                     "the window) while ranks 0, 1, 3 wait in sync_gradients at train.py:101 (all_reduce)")


def test_two_jobs_on_one_machine_are_never_compared():
    """A stale job still hung from an earlier attempt beside the new one: the same ranks twice.
    Compared, one job's ranks would make the other's odd; sleuth names both jobs and how to read
    one, and no hang hypothesis gets support from it."""
    sync = [AR, ["sync_gradients", "/job/train.py", 101]]
    other = [AR, ["log_loss", "/job/train.py", 111]]
    old = [{**_rank(r, sync), "job": "1f2e", "pid": 500 + r} for r in range(4)]
    new = [{**_rank(r, other if r == 2 else sync), "job": "9c0d"} for r in range(4)]
    found = analyze_stacks(old + new)
    assert (found["verdict"], found["stuck"], found["odd"], found["mismatch"], found["compared"]) == (
        "several-jobs", 0, 0, False, False)
    assert [j["job"] for j in found["jobs"]] == ["1f2e", "9c0d"]
    assert found["sentences"][-1] == ("2 jobs run here; their ranks are not compared — job 1f2e: ranks 0, 1, 2, 3 "
                                      "(pid 500, 501, 502, 503); job 9c0d: ranks 0, 1, 2, 3 (pid 1000, 1001, 1002, "
                                      "1003). Read one job: --param job=1f2e")
    alone = analyze_stacks(new)
    assert alone["verdict"] == "mismatch" and [r["rank"] for r in alone["odd_ranks"]] == ["rank 2"]


def test_the_ranks_table_shows_each_ranks_flight_recorder_where_it_was_read():
    """The UI's pinned ranks × where-they-wait table: a Flight Recorder column only when some
    rank's recorder was read; the odd rank marked, its collective named from the recorder."""
    from sleuth.app.views import ranks_table

    sync = [AR, ["sync_gradients", "/job/train.py", 101]]
    other = [AR, ["log_loss", "/job/train.py", 111]]
    at4 = _fr([("0", 3, "gloo:all_reduce", True), ("0", 4, "gloo:all_reduce", False)], {"0": 4})
    rank2 = _fr([("0", 3, "gloo:all_reduce", True), ("1", 1, "gloo:all_reduce", False)], {"0": 3, "1": 1})
    recs = [{**_rank(r, other if r == 2 else sync), "flight_recorder": rank2 if r == 2 else at4} for r in range(4)]
    recs[3]["flight_recorder"] = {"source": "hook", "error": "no answer from the hook within 5.0 s"}
    table = ranks_table(analyze_stacks(recs)).plain
    rows = {" ".join(line[2:].split()[:2]): line for line in table.splitlines() if line.startswith(("◆ rank", "  rank"))}
    assert "flight recorder" in table.splitlines()[table.splitlines().index("") + 1], table
    assert rows["rank 2"].startswith("◆ rank 2") and "in all_reduce #1 on group 1" in rows["rank 2"], table
    assert "in all_reduce #4 on group 0 " in rows["rank 0"] and "unread" in rows["rank 3"]
    plain = ranks_table(analyze_stacks([_rank(r, sync) for r in range(4)])).plain
    assert "flight recorder" not in plain


def test_ranks_busy_on_cpu_in_one_place_in_every_sample_are_not_called_healthy():
    """A GPU rank whose host thread waits on the device spins (CUDA's default): CPU busy, the
    stack in one place in every sample — as in a hang behind a stuck collective, and as in one
    long call. Neither healthy nor a straggler is said, and no hang hypothesis is refuted."""
    from sleuth.hypotheses import load_catalog

    item = [["_local_scalar_dense", "/v/lib/python3.11/site-packages/torch/_tensor.py", 40],
            ["train_step", "/job/train.py", 120]]
    result = {"kind": "result", "window_s": 0.84}
    busy = analyze_stacks([_rank(r, item, stuck=False, cpu=0.8, samples=5) for r in range(4)] + [result])
    assert (busy["verdict"], busy["healthy"], busy["compared"], busy["stragglers"]) == ("busy", False, False, 0)
    assert busy["sentences"][0].startswith("ranks 0, 1, 2, 3 are busy in train_step at train.py:120 in every sample, on "
                                           "CPU for most of the 0.84 s window: a thread waiting on the GPU spins")
    catalog = load_catalog()
    for h in ("hang", "collective-mismatch", "deadlock", "straggler"):
        [link] = [p for p in catalog.hypotheses[h].probes if p.probe == "stacks"]
        assert not link.refutes.evaluate(busy) and not link.supports.evaluate(busy), h
    # the same ranks light on CPU (a loop that sleeps and wakes) are a job at work
    light = analyze_stacks([_rank(r, item, stuck=False, samples=5) for r in range(4)] + [result])
    assert light["verdict"] == "healthy"


# ------------------------------------------------------------------ issue 32: readings that failed on code not ours

def _states(rank: dict, **counts: int) -> dict:
    return {**rank, "states": counts}


def test_ranks_that_all_poll_in_one_collective_are_not_healthy():
    """Blocking-wait modes and store-based barriers wake the main thread over and over inside
    one wait: every rank used CPU or woke, and none was ever seen outside the collective."""
    from sleuth.hypotheses import load_catalog

    polling = [AR, ["sync_gradients", "/job/train.py", 101]]
    found = analyze_stacks([_states(_rank(r, polling, stuck=False), S=40) for r in range(4)])
    assert (found["verdict"], found["healthy"], found["compared"]) == ("waiting", False, False), found["sentences"]
    assert found["sentences"][0].startswith("all 4 ranks wait in a collective in every sample, awake")
    catalog = load_catalog()
    for h in ("hang", "collective-mismatch", "deadlock", "straggler"):
        [link] = [p for p in catalog.hypotheses[h].probes if p.probe == "stacks"]
        assert not link.refutes.evaluate(found), h


def test_a_straggler_is_named_by_its_strength_and_not_from_a_few_samples_by_chance():
    step = [["forward", "/job/train.py", 60], ["main", "/job/train.py", 77]]
    sync = [AR, ["sync_gradients", "/job/train.py", 101]]
    # 8 healthy ranks, one of which happened to be outside a collective in all 5 samples while
    # the others were in one 3 times in 5: chance 0.4^5 = 0.01, not strong over 8 ranks (the old cut-off named it)
    recs = []
    for r in range(8):
        rank = _rank(r, step, stuck=False, samples=5)
        if r != 5:
            rank["samples"] = [[{"tid": rank["pid"], "name": "MainThread", "frames": sync if i % 2 == 0 else step}]
                               for i in range(5)]
        recs.append(_states(rank, S=30, R=10))
    found = analyze_stacks(recs)
    assert found["verdict"] == "healthy" and found["stragglers"] == 0, found["sentences"]
    # few state reads and few samples: no straggler can be told, none is ruled out
    few = analyze_stacks([_states(_rank(r, step, stuck=False, samples=1), S=2) for r in range(4)])
    assert few["healthy"] and not few["straggler_tested"]
    assert "not enough samples to tell a straggler" in " ".join(few["sentences"])
    from sleuth.hypotheses import load_catalog

    [link] = [p for p in load_catalog().hypotheses["straggler"].probes if p.probe == "stacks"]
    assert not link.refutes.evaluate(few)
    # a rank that waits in 2 of 60 reads while the others wait in 55 of 60: named, with its chance
    slow = [_states(_rank(r, step, stuck=False), **({"S": 2, "T": 58} if r == 3 else {"S": 55, "R": 5}))
            for r in range(4)]
    found = analyze_stacks(slow)
    [odd] = found["odd_ranks"]
    assert (odd["rank"], odd["kind"]) == ("rank 3", "straggler") and "chance" in odd["strength"]
    assert "stopped and continued from outside" in found["sentences"][0]


def test_an_async_work_wait_beside_a_heartbeat_thread_is_no_deadlock():
    """`work.wait()` is a collective's wait (C++: no Python frame below the line); a heartbeat
    thread sleeping in `", ".join(...)`-free code. Neither is a lock: the rank is stuck, not
    deadlocked. A real lock wait (Event.wait in threading.py, `with lock:`) still is."""
    sync = [AR, ["sync_gradients", "/job/train.py", 101]]
    main = [["step", "/job/train.py", 140]]
    beat = [["heartbeat", "/job/train.py", 30]]
    code = {"/job/train.py:140": "work.wait()", "/job/train.py:30": "status = cache.get(key) or ', '.join(parts)"}
    rank2 = _rank(2, main, loader=beat, code=code)
    found = analyze_stacks([_rank(0, sync), _rank(1, sync), rank2, _rank(3, sync)])
    [odd] = found["odd_ranks"]
    assert odd["kind"] == "stuck" and found["deadlocks"] == 0, found["sentences"]
    lock = {"/job/train.py:140": "done.wait()", "/job/train.py:30": "with state_lock:"}
    waiting = [["Event.wait", "/usr/lib/python3.11/threading.py", 622], ["step", "/job/train.py", 140]]
    rank2 = _rank(2, waiting, loader=beat, code=lock)
    found = analyze_stacks([_rank(0, sync), _rank(1, sync), rank2, _rank(3, sync)])
    assert found["deadlocks"] == 1 and found["odd_ranks"][0]["kind"] == "deadlock", found["sentences"]


def test_a_native_wait_read_after_the_rank_moved_on_is_not_its_wait():
    sleeping = [["load_batch", "/job/train.py", 36], ["main", "/job/train.py", 80]]
    later = [["c10d::Work::wait", "/v/torch/lib/libtorch_cpu.so", 0], ["all_reduce", AR[1], 3252],
             ["sync_gradients", "/job/train.py", 101]]
    rank = _rank(3, sleeping, stuck=False)
    rank["native"] = {"threads": [{"tid": rank["pid"], "name": "MainThread", "frames": later}]}
    view = analyze_stacks([rank])["per_rank"][0]
    assert view["native_wait"] is None and view["native_wait_elsewhere"]["frame"] == "c10d::Work::wait"
    assert view["main"]["collective"] is None


def test_a_stopped_rank_among_the_same_python_frames_is_the_odd_one():
    """The issue's DDP case: every rank in `loss.backward()`; /proc says T for one."""
    backward = [["_engine_run_backward", "/v/lib/python3.11/site-packages/torch/autograd/graph.py", 979],
                ["Trainer._run_batch", "/job/train.py", 50]]
    reducer = [["c10d::Reducer::finalize_backward", "/v/torch/lib/libtorch_cpu.so", 0],
               ["THPEngine_run_backward", "/v/torch/lib/libtorch_python.so", 0]] + backward
    recs = []
    for r in range(4):
        rank = _states(_rank(r, backward), **({"T": 60} if r == 2 else {"S": 60}))
        rank["tasks"][0]["state"] = "T" if r == 2 else "S"
        if r != 2:
            rank["native"] = {"threads": [{"tid": rank["pid"], "name": "MainThread", "frames": reducer}]}
        recs.append(rank)
    found = analyze_stacks(recs)
    assert found["verdict"] == "stopped" and [o["rank"] for o in found["odd_ranks"]] == ["rank 2"]
    assert not any("the same place everywhere" in s for s in found["sentences"]), found["sentences"]
    traced = {**recs[2], "tracer": 4242, "tracer_comm": "gdb"}
    traced["states"] = {"t": 60}
    found = analyze_stacks(recs[:2] + [traced] + recs[3:])
    assert "rank 2 is traced (t) by pid 4242 (gdb)" in found["sentences"][0]


def test_python_dash_m_ranks_have_a_main_thread_in_the_hooks_dump():
    ns = _stacks_namespace()
    dump = ('Current thread 0x00007f00 (most recent call first):\n  File "/job/train.py", line 40 in step\n'
            '  File "/job/train.py", line 90 in <module>\n  File "<frozen runpy>", line 88 in _run_code\n'
            '  File "<frozen runpy>", line 198 in _run_module_as_main\n')
    [t] = ns["parse_faulthandler"](dump)
    assert t["name"] == "MainThread"


def test_a_host_thread_waiting_on_the_gpu_is_read_as_cuda_sync_not_a_collective():
    """The native frames an H100 gave (torch 2.11; docs/measurements/gpu_wait_native_h100_torch211.json):
    a blocking event's synchronize sleeps in cuEventSynchronize; the default schedule spins in
    cuCtxSynchronize. Neither is a collective."""
    event = [["0x7fb742f17bfc", "/usr/lib/libcuda.so.1", 0], ["cuEventSynchronize", "/usr/lib/libcuda.so.1", 0],
             ["<module>", "/job/event.py", 6]]
    rank = _rank(0, [["<module>", "/job/event.py", 6]])
    rank["native"] = {"threads": [{"tid": rank["pid"], "name": "MainThread", "frames": event}]}
    found = analyze_stacks([{**rank, "world_size": "1"}])
    row = found["per_rank"][0]
    assert row["native_wait"] == {"kind": "gpu", "frame": "cuEventSynchronize",
                                  "what": "cuda sync: the host thread waits on the GPU"}
    assert row["main"]["collective"] is None and not found["mismatch"]
    assert "waiting on the GPU, not in a collective" in found["sentences"][0]


def test_a_spawned_rank_is_torchs_own_i_and_no_other_local_is_kept():
    ns = _stacks_namespace()
    user = {"name": "main", "filename": "/job/train.py", "line": 40,
            "locals": [{"name": "rank", "repr": "2"}, {"name": "world_size", "repr": "8"}, {"name": "token", "repr": "'s3cret'"}]}
    wrap = {"name": "_wrap", "filename": "/v/lib/python3.11/site-packages/torch/multiprocessing/spawn.py", "line": 87,
            "locals": [{"name": "fn", "repr": "<function at 0x1>"}, {"name": "i", "repr": "2"}, {"name": "args", "repr": "(8)"}]}
    assert ns["spawn_index"]([{"frames": [user, wrap]}]) == (2, 8)
    assert ns["spawn_index"]([{"frames": [{**user, "locals": user["locals"][:1]}, wrap]}]) == (2, None)
    assert ns["spawn_index"]([{"frames": [user]}]) is None  # a multiprocessing child that is no spawn rank
    # nothing says the world's size: the spawn's process count is taken, and the reading says so
    recs = [{**_rank(r, [AR, ["main", "/job/train.py", 40]], stuck=False), "world_size": "4", "world_from": "nprocs",
             "rank_from": "torch.multiprocessing.spawn"} for r in range(4)]
    found = analyze_stacks(recs)
    assert any(s.startswith("world size taken as the 4 processes torch.multiprocessing.spawn started here")
               for s in found["sentences"]), found["sentences"]



def test_a_spawned_process_whose_rank_read_fails_is_read_again_and_never_said_to_be_elsewhere(tmp_path: Path):
    """CI, torch 2.14.1 on a loaded machine: one of four spawn ranks gave no locals read, and sleuth
    said "1 is elsewhere (another node)" of a process on this machine. A failed read is read again;
    one still unread is kept as the job's own process here, with why. The py-spy here is a stand-in
    script (this layer's unit test; the real py-spy reads the real spawn job below)."""
    ns = _stacks_namespace()
    ns["torch_mapped"] = lambda pid: True
    calls = tmp_path / "calls"
    spy = tmp_path / "py-spy"
    spy.write_text(f"""#!{sys.executable}
import json, sys
pid = int(sys.argv[sys.argv.index("--pid") + 1])
with open({str(calls)!r}, "a") as f:
    f.write(f"{{pid}}\\n")
seen = open({str(calls)!r}).read().split().count(str(pid))
if pid == 103 or pid == 102 and seen == 1:
    print("Error: Failed to copy PyCodeObject", file=sys.stderr)
    sys.exit(1)
frames = [{{"name": "main", "filename": "/job/train.py", "line": 40, "locals": [{{"name": "world_size", "repr": "4"}}]}}]
if pid != 110:
    frames.append({{"name": "_wrap", "filename": "/v/torch/multiprocessing/spawn.py", "line": 87,
                   "locals": [{{"name": "i", "repr": str(pid - 100)}}]}})
print(json.dumps([{{"frames": frames}}]))
""")
    spy.chmod(0o755)
    fork = "python -c from multiprocessing.spawn import spawn_main; spawn_main() --multiprocessing-fork"
    everyone = {99: {"pid": 99, "ppid": 1, "cmd": "python train.py", "env": {}, "rank": None},
                **{pid: {"pid": pid, "ppid": 99, "cmd": fork, "env": {}, "rank": None} for pid in (100, 101, 102, 103)},
                110: {"pid": 110, "ppid": 100, "cmd": fork, "env": {}, "rank": None}}  # a rank's data-loader worker
    ranks = {p["pid"]: p for p in ns["spawned"](str(spy), everyone, set(), 5.0)}
    assert {pid: p["rank"] for pid, p in ranks.items()} == {100: "0", 101: "1", 102: "2", 103: None}
    assert ranks[103]["rank_unread"] == "Error: Failed to copy PyCodeObject" and ranks[103]["world"] == "4"
    assert calls.read_text().split().count("110") == 1  # no spawn frame, no sibling of a rank: not read again
    recs = [{**_rank(int(p["rank"] or 0), [AR, ["main", "/job/train.py", 40]], stuck=False), "pid": pid,
             "rank": p["rank"], "world_size": p["world"], "rank_from": p["rank_from"], "rank_unread": p.get("rank_unread")}
            for pid, p in ranks.items()]
    found = analyze_stacks(recs)
    assert found["missing"] == 0 and not any("elsewhere (another node" in s for s in found["sentences"]), found["sentences"]
    assert any(s.startswith("1 process of the job here (pid 103) could not be told its rank (Error: Failed to copy")
               for s in found["sentences"]), found["sentences"]

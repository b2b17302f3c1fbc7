"""Benchmark: folding 100,000 events, and the circular-retest question with 100,000 runs.

Events are made the way sessions.Investigation writes them (run started / finished with
state keys / evidence by the catalog's real rules / notes / flags), in memory; the 100k
set is also written to a real session file to time a replay from SQLite.

Baselines measured in the same run:
  * fold: decoding the same events' JSON from SQLite, nothing more — the floor that any
    replay from this store pays (on this machine json.loads alone is ~9 µs an event);
  * retest query: the naive answer, a scan over every recorded run.

    python bench/fold.py            # a table
    python bench/fold.py --json     # {"fold_100k_s": ..., "retest_query_ms": ..., ...}
Goals (issue 2): fold 100k events under 1 s; a retest query under 1 ms.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sleuth.hypotheses import (  # noqa: E402
    Event,
    EventKind,
    InvestigationState,
    check_key,
    component_keys,
    judge,
    load_catalog,
    state_key_of_parts,
)
from sleuth.sessions import Redactor, Store  # noqa: E402

PROBES = ["compile-race", "env-fingerprint", "cache-inventory", "dense-fallback", "fx-trace-state"]


def synth(n_events: int | None = None, n_runs: int | None = None) -> Iterator[Event]:
    rng = random.Random(7)
    catalog = load_catalog()
    seq = 0
    ts = 1_800_000_000.0

    def ev(kind: str, data: dict) -> Event:
        nonlocal seq, ts
        seq += 1
        ts += 0.5
        return Event(seq, ts, kind, data)

    yield ev(EventKind.INVESTIGATION_CREATED, {"title": "bench"})
    for hyp in catalog.hypotheses.values():
        yield ev(EventKind.HYPOTHESIS_ADDED, hyp.to_dict())
    runs = 0
    while (n_events is None or seq < n_events) and (n_runs is None or runs < n_runs):
        runs += 1
        probe = rng.choice(PROBES)
        params = {"threads": rng.choice([1, 4])}
        state = {
            "env": {"torch": rng.choice(["2.11.0+cu128", "2.11.0+cu130"]), "python": "3.11.7", "triton": "3.5.0"},
            "code": f"c{rng.randrange(50)}",
            "caches": {"inductor": {"entries": rng.randrange(9)}},
        }
        result = {
            "kind": "result", "threads": params["threads"], "fx_trace_errors": rng.randrange(3), "errors_total": 1,
            "race": "fx-trace", "calls": 100, "cold_cache": True, "has_baseline": True, "drift": rng.randrange(2),
            "cold": False, "keys_match": True, "fallback": False, "flag_set_calls": 0,
        }
        yield ev(EventKind.RUN_STARTED, {"run": runs, "probe": probe, "params": params, "target": "gpu", "kind": "probe",
                                 "check_key": check_key(probe, params, "gpu"), "remedies": [], "retest_of": None})
        parts = component_keys(state)
        yield ev(EventKind.RUN_FINISHED, {"run": runs, "classification": "completed", "reason": "done record received",
                                  "records": [result, {"kind": "done"}], "state": state, "state_parts": parts,
                                  "state_key": state_key_of_parts(parts), "lines": {"stdout": 10, "stderr": 0}})
        for hyp in catalog.hypotheses.values():
            for test in hyp.probes:
                if test.probe == probe:
                    v = judge(test, "completed", result)
                    if v is not None:
                        yield ev(EventKind.EVIDENCE_RECORDED, {"run": runs, "hypothesis": hyp.id, "verdict": v.verdict,
                                                       "rule": v.rule, "fields": v.fields})
        if runs % 40 == 0:
            yield ev(EventKind.NOTE_ADDED, {"text": "checked the logs", "about": None})


def best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=100_000)
    args = ap.parse_args()

    events = list(synth(n_events=args.events))[: args.events]
    t_fold = best(lambda: InvestigationState.fold(events))
    t_graph = best(lambda: InvestigationState.fold(events).graph)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fold.sleuth"
        with Store.create(path, Redactor({})) as store:
            store.conn.execute("BEGIN")
            store.conn.executemany(
                "INSERT INTO events (seq, ts, kind, data) VALUES (?, ?, ?, ?)",
                ((e.seq, e.ts, e.kind, json.dumps(e.data, sort_keys=True, separators=(",", ":"))) for e in events),
            )
            store.conn.execute("COMMIT")
        with Store.open(path, readonly=True) as store:
            rows = lambda: store.conn.execute("SELECT data FROM events ORDER BY seq").fetchall()  # noqa: E731
            t_raw = best(lambda: [json.loads(r[0]) for r in rows()])
            t_replay = best(lambda: InvestigationState.fold(store.events()))

    state = InvestigationState.fold(synth(n_runs=args.runs))
    n_runs = len(state.runs)
    rng = random.Random(3)
    queries = [(rng.choice(PROBES), {"threads": rng.choice([1, 4, 8])}) for _ in range(3000)]
    lat, hits = [], 0
    for probe, params in queries:
        t0 = time.perf_counter()
        check = state.check_before_run(probe, params, "gpu")
        lat.append(time.perf_counter() - t0)
        hits += check.retest_of is not None
    q_ms = statistics.median(lat) * 1000
    q_p99 = sorted(lat)[int(len(lat) * 0.99)] * 1000
    expected = state.expected_state("gpu")

    def naive(probe: str, params: dict) -> object:
        ck = check_key(probe, params, "gpu")
        return [r for r in state.runs.values() if r.check_key == ck and r.state_key == expected]

    naive_lat = []
    for probe, params in queries[:30]:
        t0 = time.perf_counter()
        naive(probe, params)
        naive_lat.append(time.perf_counter() - t0)
    naive_ms = statistics.median(naive_lat) * 1000

    # a hypothesis's status: kept by the fold as evidence arrives, vs the scan over all its
    # evidence that status() did before (the revisit check asks it for every hypothesis a probe tests)
    def scanned_status(h: str) -> str:
        entries = state.evidence.get(h, [])
        decisive = [e for e in entries if e.verdict != "inconclusive"]
        if not decisive:
            return "inconclusive" if entries else "open"
        now = {e.verdict for e in decisive if e.state_key == decisive[-1].state_key}
        if len(now) > 1:
            return "inconclusive"
        return ("confirmed" if state.fixed_by(h) else "supported") if decisive[-1].verdict == "supports" else "refuted"

    hyps = list(state.hypotheses)
    status_lat, scan_lat = [], []
    for _ in range(200):
        for h in hyps:
            t0 = time.perf_counter()
            got = state.status(h)
            status_lat.append(time.perf_counter() - t0)
        for h in hyps[:3]:
            t0 = time.perf_counter()
            assert scanned_status(h) == state.status(h)
            scan_lat.append(time.perf_counter() - t0)
    status_ms = statistics.median(status_lat) * 1000
    scan_ms = statistics.median(scan_lat) * 1000
    evidence_per_hypothesis = max(len(v) for v in state.evidence.values())
    del got

    out = {
        "fold_100k_s": round(t_fold, 4),
        "fold_and_graph_100k_s": round(t_graph, 4),
        "replay_100k_s": round(t_replay, 4),
        "json_decode_100k_s": round(t_raw, 4),
        "fold_vs_json_decode": round(t_fold / t_raw, 3),
        "retest_query_ms": round(q_ms, 4),
        "retest_query_p99_ms": round(q_p99, 4),
        "naive_scan_ms": round(naive_ms, 3),
        "query_vs_naive": round(q_ms / naive_ms, 6),
        "status_ms": round(status_ms, 5),
        "status_scan_ms": round(scan_ms, 4),
        "status_vs_scan": round(status_ms / scan_ms, 6),
        "evidence_per_hypothesis_max": evidence_per_hypothesis,
        "runs_recorded": n_runs,
        "retest_hits": hits,
        "queries": len(queries),
    }
    if args.json:
        print(json.dumps(out))
        return
    print(f"{'measure':<42} {'sleuth':>11}  {'baseline':>11}  ratio")
    print(f"{'fold 100k events (decoded, in memory)':<42} {t_fold:>9.3f} s  {t_raw:>9.3f} s  {t_fold / t_raw:.2f}× json.loads of the same events  (goal < 1 s)")
    print(f"{'fold 100k events + build networkx graph':<42} {t_graph:>9.3f} s  {t_raw:>9.3f} s  {t_graph / t_raw:.2f}×")
    print(f"{'replay 100k events from SQLite':<42} {t_replay:>9.3f} s  {t_raw:>9.3f} s  {t_replay / t_raw:.2f}×")
    print(f"{f'retest query, {n_runs:,} runs (median)':<42} {q_ms:>8.4f} ms  {naive_ms:>8.3f} ms  {q_ms / naive_ms:.6f}× a scan of all runs  (goal < 1 ms)")
    print(f"{'retest query (p99)':<42} {q_p99:>8.4f} ms")
    print(f"{'status of one hypothesis (median)':<42} {status_ms:>8.4f} ms  {scan_ms:>8.3f} ms  {status_ms / scan_ms:.6f}× a scan of its {evidence_per_hypothesis:,} evidence")
    print(f"{hits} of {len(queries)} queries were circular retests")


if __name__ == "__main__":
    main()

"""The postmortem read line by line on a hunt with the shapes that made it contradict itself
(issue 25, 3): a fleet member whose own fingerprint was inconclusive while the comparison
supports drift on it, runs that finished out of order, a supported hypothesis that is not
confirmed, one verification run for a remedy that addresses two hypotheses."""

from __future__ import annotations

from sleuth.hypotheses import compare
from support.postmortem_check import check_postmortem, section
from support.sessions import env_state, record_run


def _fingerprint(torch: str) -> dict:
    return {"has_baseline": False, "drift": 0, "fingerprint": {"torch": torch, "python": "3.11.7", "torch.cuda": None,
                                                               "triton": None, "driver": None}}


def test_the_postmortem_of_a_hunt_with_every_awkward_shape_agrees_with_itself(inv):
    inv.add_symptom("fx-trace-error")
    # a fleet of three: node3 has another torch; its own run is inconclusive (no baseline)
    runs = {m: record_run(inv, "env-fingerprint", _fingerprint(t), env_state(torch=t), target=f"nodes/{m}")
            for m, t in (("node1", "2.11.0+cu128"), ("node2", "2.11.0+cu128"), ("node3", "2.11.0+cu130"))}
    st = inv.state
    inv.record_comparison(compare("nodes", "env-fingerprint", {m: st.runs[r] for m, r in runs.items()}))
    assert {e.verdict for e in inv.state.verdicts_for(runs["node3"]) if e.hypothesis == "version-drift"} == \
        {"inconclusive", "supports"}
    # two runs started together, the later one finishing first
    a = inv.begin_run("cache-inventory", {}, "local").run
    b = inv.begin_run("compile-race", {"trials": 2}, "local", ).run
    race = {"threads": 4, "race": "fx-trace", "cold_cache": True, "calls": 200, "fx_trace_errors": 9,
            "errors_total": 9, "control_fx_trace_errors": 0, "trials": 2, "failed_trials": 2, "control_failed": 0,
            "control_same_failure": 0}
    inv.finish_run(b, "completed", "done", [{"kind": "result", **race}, {"kind": "done"}], env_state(), {"stdout": 1})
    inv.finish_run(a, "completed", "done", [{"kind": "result", "cold": True, "keys_match": False, "entries": 0},
                                            {"kind": "done"}], env_state(), {"stdout": 1})
    # the lock applied for compile-race, and one verification run (it verifies two hypotheses)
    files = [{"path": "/x/model.py", "before": "a\n", "before_sha": "0" * 64, "after_sha": "1" * 64, "diff": ""}]
    inv.record_application("lock", "local", files, hypothesis="compile-race")
    clean = {**race, "fx_trace_errors": 0, "errors_total": 0, "failed_trials": 0, "trials": 60}
    verify = record_run(inv, "compile-race", clean, env_state(), params={"trials": 60})
    st = inv.state
    verifications = [v for app in st.applications.values() for v in app.verifications if v["run"] == verify]
    assert len(verifications) >= 2  # one per hypothesis the lock addresses: said once all the same

    md = inv.to_markdown()
    statuses = {h: st.status(h) for h in st.hypotheses}
    assert statuses["version-drift"] == "supported" and statuses["cache-invalidation"] == "supported"
    check_postmortem(md, statuses, {h: st.hypotheses[h].title for h in st.hypotheses})
    # and in words: node3's run says one thing of version-drift; the lock's verification once
    timeline = section(md, "Timeline")
    row = next(r for r in timeline.splitlines() if f"run #{runs['node3']} " in r)
    assert "supports version-drift" in row and "inconclusive version-drift" not in row, row
    assert timeline.count("✔ verified lock #1") == 1
    env = section(md, "Environment across runs")
    assert "2.11.0+cu130 (#" in env and "none (a CPU build of torch)" not in env  # a cu130 build is not a CPU one

"""What the screens say, as plain functions of the folded state (app/views.py), tested
without running the app: the one suggested next step, the detail of a hypothesis, labels,
and the timeline rows."""

from __future__ import annotations

from sleuth.app.timeline import timeline_rows
from sleuth.app.views import Selection, detail_text, hypothesis_label, next_step, run_label
from sleuth.probes import builtin_probes
from support.sessions import env_state, record_run

RACE_FAIL = {"threads": 4, "race": "fx-trace", "cold_cache": True, "calls": 200, "fx_trace_errors": 37,
             "errors_total": 37, "control_fx_trace_errors": 0,
             "failed_trials": 1, "control_failed": 0, "control_same_failure": 0}
LOCK = [{"path": "/code/model.py", "before_sha": "aa", "after_sha": "bb", "diff": "+ lock"}]


def entry(probe: str) -> dict:
    return {"entry": "train.py"}  # the user's script, set in sleuth.toml


def test_next_step_walks_the_hunt(inv):
    probes = builtin_probes()
    assert next_step(inv.state, None, probes, "local").text == "select a hypothesis"
    first = next_step(inv.state, "compile-race", probes, "local", entry)
    assert first.action == "run" and first.key == "r" and first.probe in ("compile-race", "fx-trace-state")
    race = record_run(inv, "compile-race", RACE_FAIL, env_state())
    step = next_step(inv.state, "compile-race", probes, "local", entry)
    assert (step.action, step.key, step.remedy, step.text) == ("remedy", "f", "lock", "apply lock")
    inv.record_application("lock", "local", LOCK, hypothesis="compile-race")
    step = next_step(inv.state, "compile-race", probes, "local", entry)
    assert step.action == "run" and step.text == f"re-run #{race} compile-race under lock to verify"


def test_next_step_never_points_at_sleuths_own_example_and_skips_a_probe_that_cannot_settle(inv):
    probes = builtin_probes()
    # a user's project with no entry set: the step says what to set, never runs examples/drafter
    step = next_step(inv.state, "compile-race", probes, "local")
    assert (step.action, step.probe) == ("none", None), step
    assert step.text == ("set entry under [probes.compile-race] in sleuth.toml (your script that starts the "
                         "workers) to run compile-race")
    # a compile race the user says races by compiling (race = "compile"): its run gives concurrent
    # FX trace no evidence (the test's `applies` leaves it out), so run again as it is it cannot
    # settle that hypothesis; the step is the one that can (here: set fx-trace-state's entry)
    params = {**probes["compile-race"].params, "entry": "train.py", "race": "compile"}  # as a run records them
    record_run(inv, "compile-race", {**RACE_FAIL, "race": "compile"}, env_state(), params=params)
    assert not [e for e in inv.state.verdicts_for(max(inv.state.runs)) if e.hypothesis == "concurrent-fx-trace"]
    mine = {"compile-race": {"entry": "train.py", "race": "compile"}}
    step = next_step(inv.state, "concurrent-fx-trace", probes, "local", lambda probe: dict(mine.get(probe, {})))
    assert step.text.startswith("set entry under [probes.fx-trace-state]"), step
    # told to race by FX tracing, compile-race can speak to it again
    mine["compile-race"]["race"] = "fx-trace"
    step = next_step(inv.state, "concurrent-fx-trace", probes, "local", lambda probe: dict(mine.get(probe, {})))
    assert (step.action, step.probe) == ("run", "compile-race"), step


def test_next_step_never_suggests_a_circular_retest(inv):
    probes = builtin_probes()
    s = env_state()
    record_run(inv, "compile-cache", {"hits": 3, "misses": 0, "changed": []}, s)
    step = next_step(inv.state, "cache-invalidation", probes, "local")
    assert step.action == "none" and "change something first" in step.text


def test_detail_and_labels_show_status_evidence_and_retests(inv):
    s = env_state()
    race = record_run(inv, "compile-race", RACE_FAIL, s)
    again = record_run(inv, "compile-race", RACE_FAIL, s)
    text = detail_text(inv.state, Selection("hypothesis", "compile-race", hypothesis="compile-race")).plain
    assert "SUPPORTED ●" in text
    assert f"#{race} compile-race" in text and "supports" in text
    assert "remedies: lock · precompile" in text
    assert str(hypothesis_label(inv.state, "compile-race")).startswith("● compile race")
    assert "2▲" in str(hypothesis_label(inv.state, "compile-race"))
    assert f"⟲#{race}" in str(run_label(inv.state, again))


def test_timeline_rows_are_in_time_order_with_flags_marked(inv):
    s = env_state()
    record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, s)
    inv.add_note("reinstalled torch 2.11.0+cu128", about="version-drift")
    record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, s)
    rows = timeline_rows(inv.state)
    times = [ts for ts, _line, _run, _flag in rows]
    assert times == sorted(times)
    said = [(run, flag, line.plain.split(" ", 1)[1]) for _ts, line, run, flag in rows]
    assert [(run, flag, text.split("  ")[0]) for run, flag, text in said] == [
        (1, False, "#1 env-fingerprint"),
        (None, False, "✎ reinstalled torch 2.11.0+cu128"),
        (2, True, "⚑ circular-retest"),  # the flag comes before the run it flagged
        (2, False, "#2 env-fingerprint"),
    ]


def test_a_run_that_verified_a_remedy_is_marked_in_the_tree_and_the_timeline():
    from sleuth.app.timeline import timeline_rows
    from sleuth.app.views import run_label
    from sleuth.hypotheses import Event, InvestigationState

    events = [
        Event(1, 0.0, "investigation.created", {"title": "t"}),
        Event(2, 1.0, "run.started", {"run": 1, "probe": "compile-race", "params": {}, "target": "local", "kind": "probe", "check_key": "a"}),
        Event(3, 2.0, "run.finished", {"run": 1, "classification": "completed", "reason": "", "result": {}, "records": []}),
        Event(4, 3.0, "remedy.applied", {"application": 1, "remedy": "lock", "hypothesis": "compile-race", "target": "local", "files": []}),
        Event(5, 4.0, "run.started", {"run": 2, "probe": "compile-race", "params": {}, "target": "local", "kind": "probe", "check_key": "a"}),
        Event(6, 5.0, "run.finished", {"run": 2, "classification": "completed", "reason": "", "result": {}, "records": []}),
        Event(7, 5.0, "application.verified", {"application": 1, "run": 2, "hypothesis": "compile-race", "outcome": "fixed", "strength": "strong"}),
    ]
    st = InvestigationState.fold(events)
    assert "✔ verified lock #1 for compile-race: fixed (strong)" in str(run_label(st, 2))
    assert "verified" not in str(run_label(st, 1))
    rows = [str(line) for _ts, line, run, _flag in timeline_rows(st) if run == 2]
    assert rows and "✔ verified lock #1 for compile-race: fixed (strong)" in rows[0]


def test_a_fingerprint_says_its_drift_in_the_run_summary_where_the_eye_lands(inv):
    """Issue 25 (friction): the drift against the baseline is in the run's first line, not
    below the fold of the pinned records."""
    from sleuth.app.views import run_summary

    base = record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0}, env_state())
    same = record_run(inv, "env-fingerprint", {"has_baseline": True, "drift": 0, "changes": []}, env_state(),
                      params={"baseline_run": base})
    moved = record_run(inv, "env-fingerprint", {"has_baseline": True, "drift": 1, "changes": [
        {"name": "torch", "before": "2.11.0+cu128", "after": "2.11.0+cu130"}]}, env_state(torch="2.11.0+cu130"),
        params={"baseline_run": base})
    st = inv.state
    assert "baseline" not in str(run_summary(st, base, 5, 100))
    assert f"= the baseline #{base}: no drift" in str(run_summary(st, same, 5, 100))
    said = str(run_summary(st, moved, 5, 100))
    assert f"⇄ 1 change since the baseline #{base}: torch 2.11.0+cu128 → 2.11.0+cu130" in said

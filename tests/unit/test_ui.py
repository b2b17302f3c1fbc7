"""The terminal UI through Textual's Pilot, against real session files: search in a
100,000-line run, folded noise, a remedy's diff and its apply, replay at event k. A probe run
from the UI on the local target (its output, the retest question) is
tests/integration/test_ui_runs.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from sleuth.app.tui import OutputView, SleuthApp
from sleuth.app.tui.dialogs import ConfirmDialog, RemedyDialog
from sleuth.sessions import Investigation
from support.pilot import SIZE, node_for, record_notifications, select, settle, text_of
from support.ui_sessions import make_workspace, recorded_hunt
from textual.widgets import Input, OptionList, Static


@pytest.mark.slow
async def test_search_finds_a_line_in_a_100000_line_run(ws):
    with ws.open() as inv:
        start = inv.begin_run("compile-race", {"n": 1}, "local")
        cap = inv.capture(start.run)
        for i in range(100_000):
            cap.write("stdout" if i % 7 else "stderr", f"line {i:06d} {'needle' if i == 98_765 else 'hay'}\n".encode())
        cap.close()
        inv.finish_run(start.run, "completed", "ok", [{"kind": "done"}], None, cap.lines)
    app = SleuthApp.live(ws)
    async with app.run_test(size=SIZE) as pilot:
        view = app.screen.query_one(OutputView)
        assert view.total == 100_000
        view.focus()
        await pilot.press("slash")
        await pilot.pause()
        box = app.screen.query_one("#search-input", Input)
        assert box.has_focus
        await pilot.press(*"needle", "enter")
        await settle(pilot)
        await pilot.pause()
        number, _ = view.outline.at_row(view.cursor)
        assert number == 98_765
        assert any("line 098765 needle" in line for line in view.visible_text()), view.visible_text()
        # n wraps to the same, only hit; N goes back to it too
        await pilot.press("n")
        await settle(pilot)
        await pilot.pause()
        assert view.outline.at_row(view.cursor)[0] == 98_765
        # the stderr filter renumbers: line 98,765 is stderr (every 7th) — its stderr index
        await pilot.press("s")  # stdout only
        await pilot.pause()
        assert view.stream == "stdout" and view.total == 100_000 - 100_000 // 7 - 1


async def test_folded_noise_opens_on_enter(tmp_path: Path):
    ws = make_workspace(tmp_path / "proj")
    path = recorded_hunt(ws.dir / "hunt.sleuth")
    app = SleuthApp.live(ws, path)
    async with app.run_test(size=SIZE) as pilot:
        app.screen.show_output(1)
        await settle(pilot)
        await pilot.pause()
        view = app.screen.query_one(OutputView)
        shown = view.visible_text()
        assert "▸ [+] 19 lines of JSON/config: LlamaConfig {   ⏎ open" in shown
        warn = [line for line in shown if "×50" in line]
        assert warn and "UserWarning: flex_attention called without torch.compile() (+1 line)  ×50" in warn[0]
        assert view.rows == view.total - 18 - 99
        assert "folded" in text_of(app, "#run-header")
        view.focus()
        view.cursor = shown.index("▸ [+] 19 lines of JSON/config: LlamaConfig {   ⏎ open")
        await pilot.press("enter")
        await pilot.pause()
        assert '  "hidden_size": 4096,' in view.visible_text()
        assert view.rows == view.total - 99


@pytest.mark.slow
async def test_remedy_preview_shows_the_diff_and_apply_changes_file_and_graph(ws):
    model = ws.root / "drafter" / "model.py"
    before = model.read_bytes()
    app = SleuthApp.live(ws)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, "remedy", "lock", "compile-race")
        await pilot.press("f")
        await pilot.pause()
        assert isinstance(app.screen, RemedyDialog)
        diff = app.screen.diff
        assert "+compiled_flex = _sleuth_serialized(torch.compile(flex_attention, dynamic=False))" in diff
        assert "drafter/model.py" in str(app.screen.query_one("#dialog-title").render())
        await pilot.press("a")
        await pilot.pause()
        assert model.read_bytes() != before and b"_sleuth_serialized" in model.read_bytes()
        [application] = app.inv.state.applications.values()
        assert application.remedy == "lock" and application.hypothesis == "compile-race" and application.active
        assert "applied #1" in str(node_for(app, "remedy", "lock", "compile-race").label)
        assert any("remedy lock #1 applied" in str(o.prompt) for o in app.screen.query_one("#timeline", OptionList).options), app.screen.query_one("#timeline", OptionList).options
        # and back: f on the applied remedy offers revert
        await select(pilot, "remedy", "lock", "compile-race")
        await pilot.press("f")
        await pilot.pause()
        assert isinstance(app.screen, RemedyDialog) and app.screen.can_revert
        await pilot.press("v")
        await pilot.pause()
        assert model.read_bytes() == before
        assert not app.inv.state.applications[1].active


async def test_apply_offers_to_rerun_the_supporting_probe(tmp_path: Path):
    ws = make_workspace(tmp_path / "proj")
    path = recorded_hunt(ws.dir / "hunt.sleuth")
    app = SleuthApp.live(ws, path)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, "hypothesis", "compile-race")
        assert "next:     apply lock  [f]" in text_of(app, "#detail")
        await pilot.press("f")
        await pilot.pause()
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog)
        assert "Re-run #1 compile-race to verify the lock?" in str(app.screen.query_one("#dialog-body", Static).render())
        await pilot.press("n")
        await pilot.pause()
        assert "re-run #1 compile-race under lock to verify" in text_of(app, "#detail")


async def test_replay_at_event_k_shows_the_graph_of_the_first_k_events(tmp_path: Path):
    ws = make_workspace(tmp_path / "proj")
    path = recorded_hunt(ws.dir / "hunt.sleuth")
    with Investigation.replay(path) as full:
        total = full.store.event_count()
        flags = [e.seq for e in full.store.events() if e.kind == "flag.raised"]
    k = flags[0] - 1  # just before the circular retest was flagged
    app = SleuthApp.replay(path, at=k, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        with Investigation.replay(path, k) as then:
            assert screen.state.snapshot() == then.state.snapshot()
            assert "version drift" in str(node_for(app, "hypothesis", "version-drift").label)
            label = str(node_for(app, "hypothesis", "version-drift").label)
            assert ("✗" in label) == (then.state.status("version-drift") == "refuted")
        assert f"event {k} of {total}" in text_of(app, "#scrubber")
        assert not any(f.kind == "circular-retest" for f in screen.state.flags), screen.state.flags
        await pilot.press("]")
        await pilot.pause()
        assert screen.at == flags[0] and "⚑" in text_of(app, "#scrubber")
        assert [f.kind for f in screen.state.flags] == ["circular-retest"]
        await pilot.press("left", "left")
        await pilot.pause()
        assert screen.at == flags[0] - 2
        with Investigation.replay(path, flags[0] - 2) as then:
            assert screen.state.snapshot() == then.state.snapshot()
        # output views show only runs that existed then
        await pilot.press("home")
        await pilot.pause()
        assert screen.at == 0 and screen.shown_run is None
        await pilot.press("end")
        await pilot.pause()
        assert screen.at == total and screen.shown_run == max(screen.state.runs)
        # read-only: no run, remedy or add keys; r does nothing to the file
        keys = set(screen.active_bindings)
        assert not keys & {"r", "x", "f", "a", "t", "b"} and {"left", "right", "left_square_bracket"} <= keys
        await pilot.press("r")
        with Investigation.replay(path) as after:
            assert after.store.event_count() == total


async def test_export_writes_the_postmortem_off_the_ui_loop(tmp_path: Path, monkeypatch):
    import threading

    from sleuth.app.tui.screens import browse

    ws = make_workspace(tmp_path / "proj")
    path = recorded_hunt(ws.dir / "hunt.sleuth")
    threads: list[str] = []
    real = browse.write_postmortem

    def spy(inv, out):
        threads.append(threading.current_thread().name)
        return real(inv, out)

    monkeypatch.setattr(browse, "write_postmortem", spy)
    app = SleuthApp.live(ws, path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        md = (ws.root / "postmortem.md").read_text()
        assert "## Timeline" in md and (ws.root / "postmortem-output" / "run-1.txt").is_file()
        assert threads and threads[0] != threading.main_thread().name


async def test_replay_speaks_of_event_k_not_of_now(tmp_path: Path):
    ws = make_workspace(tmp_path / "proj")
    path = recorded_hunt(ws.dir / "hunt.sleuth")
    app = SleuthApp.replay(path, at=0, workspace=ws, clock=lambda: 4_000_000_000.0)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        header = text_of(app, "#run-header")
        assert "no run yet at this event" in header and "press r" not in header
        assert "REPLAY" in text_of(app, "#title") and "00:00:00" in text_of(app, "#title")
        await pilot.press("end")
        await pilot.pause()
        with Investigation.replay(path) as full:
            events = list(full.store.events())
        elapsed = int(events[-1].ts - events[0].ts)
        assert f"{elapsed // 3600:02d}:{elapsed % 3600 // 60:02d}:{elapsed % 60:02d}" in text_of(app, "#title")


async def test_q_during_a_running_probe_asks_and_says_what_is_cancelled(tmp_path: Path):
    import asyncio
    import time

    ws = make_workspace(tmp_path / "proj")
    path = recorded_hunt(ws.dir / "hunt.sleuth")
    app = SleuthApp.live(ws, path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        # a run in flight, as the run worker leaves it while the far end works
        screen.live_run, screen.live_started, screen._cancel = 1, time.monotonic() - 42, asyncio.Event()
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog)
        body = str(app.screen.query_one("#dialog-body", Static).render())
        assert "Run #1 compile-race on local has been running for 42 s" in body and "cancels it" in body
        await pilot.press("n")  # no: nothing is cancelled, the app stays
        await pilot.pause()
        assert app.is_running and not screen._cancel.is_set() and app.screen is screen
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert screen._cancel.is_set()
    assert app.return_code == 0


def _tree_with_lock_applied(ws) -> tuple[dict[Path, bytes], int]:
    """The drafter split across modules (model.py, features.py), the lock applied to the whole
    tree as one application (as `sleuth remedy apply lock` does); every file's bytes before."""
    from sleuth.sessions import apply_tree, plan_tree
    from support.drafter_split import split

    drafter = ws.root / "drafter"
    split(drafter)
    before = {p: p.read_bytes() for p in sorted(drafter.glob("*.py"))}
    with ws.open() as inv:
        app = apply_tree(inv, plan_tree(inv, "lock", drafter))
    assert app is not None
    changed = [p.name for p, b in before.items() if p.read_bytes() != b]
    assert len(changed) >= 2, changed  # a tree application: more than one module holds the lock
    return before, app


async def _revert_in_the_ui(ws) -> tuple[bool, list[str]]:
    """f on the applied lock, then v: (is the application still active, what was notified)."""
    app = SleuthApp.live(ws)
    said = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, "remedy", "lock", "compile-race")
        await pilot.press("f")
        await settle(pilot)
        assert isinstance(app.screen, RemedyDialog) and app.screen.can_revert
        await pilot.press("v")
        await settle(pilot)
        [application] = app.inv.state.applications.values()
        return application.active, said


async def test_revert_from_the_ui_puts_back_every_file_of_a_tree_application(ws):
    before, application = _tree_with_lock_applied(ws)
    active, said = await _revert_in_the_ui(ws)
    assert {p.name: p.read_bytes() for p in before} == {p.name: b for p, b in before.items()}  # byte-exact, all
    assert not active
    assert any(f"reverted application #{application}: " in m and "files" in m and "features.py" in m for m in said), said


async def test_revert_from_the_ui_touches_nothing_when_a_file_was_edited_since(ws):
    before, application = _tree_with_lock_applied(ws)
    features = ws.root / "drafter" / "features.py"
    features.write_bytes(features.read_bytes() + b"\n# tuned by hand\n")
    locked = {p: p.read_bytes() for p in before}
    active, said = await _revert_in_the_ui(ws)
    assert {p: p.read_bytes() for p in before} == locked  # nothing touched, the other module too
    assert active  # and the session does not say reverted
    assert any("features.py changed since lock was applied" in m and "nothing reverted" in m for m in said), said


async def test_a_known_upstream_issue_shows_in_the_hypothesis_the_run_and_the_timeline(ws):
    """The run that showed the seed's error in a torch the thread-safety entry covers: the
    hypothesis's detail names pytorch#126024 (versions, open, the run, the source), the tree
    marks it, the run's detail and the timeline say the match; the status stays as the
    experiments left it."""
    from sleuth.hypotheses.known import SignatureWatch

    with ws.open() as inv:
        watch = SignatureWatch(inv.known)
        watch.feed("stderr", b"Traceback ...\nRuntimeError: Detected that you are using FX to symbolically trace a "
                             b"dynamo-optimized function. This is not supported at the moment.\n")
        start = inv.begin_run("script:job.py", {}, "local", kind="script")
        state = {"env": {"python": "3.11.7", "distributions": {"torch": "2.11.0+cu128"}}, "code": "c0", "caches": {}}
        inv.finish_run(start.run, "completed", "done", [{"kind": "done"}], state, {"stdout": 0, "stderr": 2},
                       seen=watch.seen)
    app = SleuthApp.live(ws)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, "hypothesis", "compile-race")
        detail = text_of(app, "#detail")
        assert "OPEN" in detail
        assert ("known:    pytorch#126024 torch 2.11.0+cu128 in <2.14,>=2.0 · fixed in 2.14.0 · matched by #1 on "
                "local (its signature in the output)") in detail
        assert "https://github.com/pytorch/pytorch/issues/126024" in detail
        assert "ⓚ pytorch#126024" in str(node_for(app, "hypothesis", "compile-race").label)
        timeline = [str(o.prompt) for o in app.screen.query_one("#timeline", OptionList).options]
        assert any("ⓚ #1 pytorch#126024 torch 2.11.0+cu128 in <2.14,>=2.0: torch.compile is not thread-safe" in t
                   for t in timeline), timeline

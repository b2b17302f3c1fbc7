"""The keys a careful user presses, through Textual's Pilot on real session files: the add
dialog keeps what was typed when it is refused, replay output follows the scrubber,
horizontal scroll resets, ? shows every key, dialogs show theirs and take arrows, the legend,
an applied remedy offers Revert, r does what "next:" says, search counts its hits, wrap,
the demo's guide at 120×35 (re-running a shell run: tests/integration/test_ui_runs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sleuth.app.tui import OutputView, SleuthApp
from sleuth.app.tui.dialogs import AddDialog, ConfirmDialog, RemedyDialog
from sleuth.app.tui.keys import KeysSheet
from sleuth.app.tui.widgets import HintBar
from sleuth.sessions import Investigation
from support.pilot import SIZE, node_for, select, settle, text_of
from support.ui_sessions import _run, make_workspace, recorded_hunt
from textual.widgets import Button, Input, Static


@pytest.mark.slow
async def test_add_dialog_stays_open_with_the_error_beside_the_field(tmp_path: Path):
    ws = make_workspace(tmp_path / "proj")
    path = recorded_hunt(ws.dir / "hunt.sleuth")
    app = SleuthApp.live(ws, path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        before = app.inv.store.event_count()
        await pilot.press("a")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, AddDialog)
        # a note about something that does not exist: refused, beside the "about" field
        dialog.query_one("#add-a", Input).value = "compile looked slow"
        dialog.query_one("#add-b", Input).value = "no-such-hypothesis"
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is dialog, "the dialog closed on a refused entry"
        error = dialog.query_one("#add-b-error", Static)
        assert not error.has_class("-hidden") and "'no-such-hypothesis' is neither" in str(error.render())
        assert dialog.query_one("#add-c-error", Static).has_class("-hidden")
        assert dialog.query_one("#add-a", Input).value == "compile looked slow"  # nothing typed is lost
        assert dialog.focused is dialog.query_one("#add-b", Input)
        assert app.inv.store.event_count() == before
        # corrected: it is added and the dialog closes
        dialog.query_one("#add-b", Input).value = "version-drift"
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is not dialog
        assert app.inv.state.notes[-1].text == "compile looked slow" and app.inv.state.notes[-1].about == "version-drift"
        # an empty note: the error is beside the text field
        await pilot.press("a")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, AddDialog) and "a note needs text" in str(app.screen.query_one("#add-a-error", Static).render())
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, AddDialog)


@pytest.mark.slow
async def test_replay_output_follows_the_scrubber_after_a_flag_jump_and_end(tmp_path: Path):
    ws = make_workspace(tmp_path / "proj")
    path = recorded_hunt(ws.dir / "hunt.sleuth")
    app = SleuthApp.replay(path, at=0, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        await pilot.press("]")  # the circular-retest flag, raised just before run #4 began: it names #3
        await pilot.pause()
        assert screen.shown_run == 3 and "RUN #3 env-fingerprint" in text_of(app, "#run-header")
        scrub = text_of(app, "#scrubber")
        assert "⚑ circular-retest: this repeats #3" in scrub and "flag.raised" not in scrub
        await pilot.press("right", "right")  # the revisit flag, then run #4 starts
        await pilot.pause()
        assert screen.shown_run == 4 and "RUN #4 env-fingerprint" in text_of(app, "#run-header")
        assert "run #4 env-fingerprint started on local" in text_of(app, "#scrubber")
        await pilot.press("end")
        await pilot.pause()
        newest = max(screen.state.runs)
        assert screen.shown_run == newest and f"RUN #{newest} cache-inventory" in text_of(app, "#run-header")
        assert "note: the fingerprint matches the baseline" in text_of(app, "#scrubber")
        # every step speaks in words, not event kinds
        for _ in range(screen.at):
            await pilot.press("left")
            scrub = text_of(app, "#scrubber")
            assert not any(kind in scrub for kind in ("application.verified", "run.finished", "evidence.recorded")), scrub
        assert screen.at == 0 and screen.shown_run is None


@pytest.mark.slow
async def test_horizontal_scroll_resets_with_another_run_and_on_home(tmp_path: Path):
    ws = make_workspace(tmp_path / "proj")
    path = ws.dir / "wide.sleuth"
    ws.dir.mkdir(exist_ok=True)
    inv = Investigation.create(path, "wide", ws.catalog())
    wide = ["x" * 40 + f" column {i} " + "y" * 400 for i in range(30)]
    _run(inv, "compile-race", wide, [{"kind": "result"}], None)
    _run(inv, "cache-inventory", wide, [{"kind": "result"}], None)
    inv.close()
    app = SleuthApp.live(ws, path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        view = screen.query_one(OutputView)
        screen.show_output(1)
        view.focus()
        await pilot.pause()
        await pilot.press("right", "right", "right", "right", "right", "right")
        await pilot.pause()
        assert view.scroll_offset.x >= 40
        await pilot.press("end")
        await pilot.pause()
        await pilot.press("home")
        await pilot.pause()
        assert view.scroll_offset.x == 0 and view.cursor == 0
        await pilot.press("right", "right", "right")
        await pilot.pause()
        assert view.scroll_offset.x > 0
        screen.show_output(2)  # another run: from its top-left
        await pilot.pause()
        assert view.scroll_offset.x == 0 and view.scroll_offset.y == 0
        # wrap: long lines take several screen lines, nothing scrolls sideways
        await pilot.press("w")
        await pilot.pause()
        assert view.wrap and "wrapped" in text_of(app, "#run-header")
        shown = [str(view.render_line(y).text) for y in range(4)]
        assert shown[0].strip().startswith("x" * 40) and shown[1].strip().startswith("y")  # line 1 goes on below
        await pilot.press("w")
        await pilot.pause()
        assert not view.wrap


def sheet_text(app) -> str:
    """What the key sheet (?) shows, as text; asserts it is the screen on top."""
    from rich.console import Console

    assert isinstance(app.screen, KeysSheet), app.screen
    console = Console(width=app.size.width, record=True, file=open("/dev/null", "w"))
    console.print(app.screen.content)
    return console.export_text()


async def test_question_mark_shows_every_key_and_esc_closes_it(tmp_path: Path):
    ws = make_workspace(tmp_path / "proj")
    path = recorded_hunt(ws.dir / "hunt.sleuth")
    app = SleuthApp.live(ws, path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        shown = sheet_text(app)
        # every key of the screen, those the footer leaves out too
        for words in ("run", "remedy", "baseline", "zoom", "wrap lines", "hint", "quit"):
            assert words in shown, f"{words!r} is not in the keys panel"
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, KeysSheet)
        # the legend says what the glyphs mean, and refuted is never a tick
        legend = text_of(app, "#legend")
        # in the detail pane's words: ? is what an inconclusive hypothesis shows, never "mixed"
        for mark in ("○open", "●supported", "★confirmed", "✗refuted", "?inconclusive", "▲supports", "▼refutes"):
            assert mark in legend, (mark, legend)
        assert "mixed" not in legend
        refuted = str(node_for(app, "hypothesis", "version-drift").label)
        assert refuted.startswith("✗") and "✓" not in refuted


async def test_the_legend_fits_whole_at_80_by_24(tmp_path: Path):
    """A laptop's terminal: the tree column is narrow, so the legend takes the lines it needs and
    no mark is cut off (issue 46: one line of it ended in an ellipsis)."""
    ws = make_workspace(tmp_path / "proj")
    path = recorded_hunt(ws.dir / "hunt.sleuth")
    app = SleuthApp.live(ws, path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        legend = app.screen.query_one("#legend", Static)
        lines = text_of(app, "#legend").splitlines()
        assert 1 < len(lines) <= 3 and legend.size.height == len(lines), lines
        assert all(len(line) <= legend.content_size.width for line in lines), (lines, legend.content_size)
        assert "?inconclusive" in "\n".join(lines) and "…" not in "".join(lines)


async def test_dialogs_show_their_keys_and_arrows_move_between_buttons(tmp_path: Path):
    ws = make_workspace(tmp_path / "proj")
    path = recorded_hunt(ws.dir / "hunt.sleuth")
    app = SleuthApp.live(ws, path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        answers: list[bool] = []
        app.push_screen(ConfirmDialog("Sure?", "a question", default=False), answers.append)
        await pilot.pause()
        dialog = app.screen
        labels = [str(b.label) for b in dialog.query(Button)]
        assert labels == ["Yes [y]", "No [n]"]
        assert dialog.focused.id == "no"
        await pilot.press("left")
        await pilot.pause()
        assert dialog.focused.id == "yes"
        await pilot.press("right")
        await pilot.pause()
        assert dialog.focused.id == "no"
        await pilot.press("left", "enter")
        await pilot.pause()
        assert answers == [True]


@pytest.mark.slow
async def test_an_applied_remedy_offers_revert_not_a_dead_apply(tmp_path: Path):
    ws = make_workspace(tmp_path / "proj")
    inv = ws.create("remedy")
    inv.add_symptom("fx-trace-error")
    inv.close()
    model = ws.root / "drafter" / "model.py"
    original = model.read_bytes()
    app = SleuthApp.live(ws)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, "remedy", "lock", "compile-race")
        await pilot.press("f")
        await settle(pilot)
        assert isinstance(app.screen, RemedyDialog)
        await pilot.press("a")
        await settle(pilot)
        if isinstance(app.screen, ConfirmDialog):  # the verify question: not now
            await pilot.press("n")
            await pilot.pause()
        assert model.read_bytes() != original
        await select(pilot, "remedy", "lock", "compile-race")
        await pilot.press("f")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, RemedyDialog)
        ids = [b.id for b in dialog.query(Button)]
        assert "apply" not in ids and "revert" in ids and dialog.focused.id == "revert"
        assert "It is applied" in str(dialog.query_one("#diff-text", Static).render())
        assert [str(b.label) for b in dialog.query(Button)] == ["Revert [v]", "Cancel [esc]"]
        await pilot.press("v")
        await settle(pilot)
        assert model.read_bytes() == original
        # and revert is in the command palette while it is applied
        names = [name for name, _help, _cb in app.screen.selection_commands()]
        assert any(n.startswith("Preview remedy lock") for n in names), names


async def test_r_does_what_the_next_step_says(tmp_path: Path):
    from sleuth.probes import load_config

    ws = make_workspace(tmp_path / "proj")
    definition = load_config(ws.config_path).target("local").definition()  # as the UI's runs record it
    path = recorded_hunt(ws.dir / "hunt.sleuth", definition=definition)
    app = SleuthApp.live(ws, path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        for kind, ident, hyp in (("probe", "fx-trace-state", "compile-race"), ("probe", "cache-inventory", "cache-invalidation"),
                                 ("run", "5", "cache-invalidation"), ("hypothesis", "compile-race", "compile-race")):
            await select(pilot, kind, ident, hyp)
            detail = text_of(app, "#detail")
            step = screen.step()
            assert f"next:     {step.text}" in detail.replace("\n", " ") or step.text in detail
            if kind == "probe":
                assert step.probe == ident and step.text.startswith(f"run {ident}")
            if kind == "run":
                assert step.text.startswith("re-run #5 cache-inventory")
        # on a probe whose last run is in this state, the detail says sleuth will ask
        node = node_for(app, "run", "4", "version-drift")
        up = node.parent
        while up is not None:
            up.expand()
            up = up.parent
        await pilot.pause()
        app.screen.query_one("#tree").move_cursor(node_for(app, "run", "4", "version-drift"))
        await pilot.pause()
        assert "a retest of #4: sleuth will ask" in text_of(app, "#detail")


@pytest.mark.slow
async def test_search_counts_its_hits_and_says_the_line(tmp_path: Path):
    ws = make_workspace(tmp_path / "proj")
    path = recorded_hunt(ws.dir / "hunt.sleuth")
    app = SleuthApp.live(ws, path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        screen.show_output(1)
        await settle(pilot)
        await pilot.press("slash")
        await pilot.press(*"step")
        await pilot.press("enter")
        await settle(pilot)
        header = text_of(app, "#run-header")
        assert "'step' 1/12" in header and " line " in header
        await pilot.press("n")
        await settle(pilot)
        assert "'step' 2/12" in text_of(app, "#run-header")
        # the folded count follows a fold opened
        view = screen.query_one(OutputView)
        folded = view.total - view.rows
        assert f"{folded:,} folded" in text_of(app, "#run-header")
        view.cursor = 1
        await pilot.press("o", "home", "down", "enter")
        await pilot.pause()
        if view.total - view.rows != folded:
            assert f"{view.total - view.rows:,} folded" in text_of(app, "#run-header") or view.total == view.rows


async def test_the_demo_guide_advances_and_h_hides_it_at_120_by_35(tmp_path: Path):
    from sleuth.app.demo import _guide

    ws = make_workspace(tmp_path / "proj")
    path = recorded_hunt(ws.dir / "hunt.sleuth")
    app = SleuthApp.live(ws, path, hint=_guide())
    async with app.run_test(size=(120, 35)) as pilot:
        await settle(pilot)
        bar = app.screen.query_one(HintBar)
        said = str(bar.render())
        # reproduced, fingerprinted against a baseline and retested already: step 4 is next
        assert "✓ ✓ ✓ · · ·" in said and "step 4 of 6" in said and "✚ lock" in said
        tree = app.screen.query_one("#tree")
        assert bar.region.height <= 2 and tree.region.height >= 8
        await pilot.press("h")
        await pilot.pause()
        assert bar.has_class("-hidden") and bar.region.height == 0
        taller = app.screen.query_one("#tree").region.height
        assert taller >= tree.region.height
        await pilot.press("h")
        await pilot.pause()
        assert not bar.has_class("-hidden")


@pytest.mark.slow
async def test_panes_zoom_and_the_tree_resizes(tmp_path: Path):
    ws = make_workspace(tmp_path / "proj")
    path = recorded_hunt(ws.dir / "hunt.sleuth")
    app = SleuthApp.live(ws, path)
    async with app.run_test(size=(120, 35)) as pilot:
        await settle(pilot)
        screen = app.screen
        column = screen.query_one("#tree-column")
        width = column.region.width
        await pilot.press("greater_than_sign", "greater_than_sign")
        await pilot.pause()
        assert column.region.width == width + 10
        await pilot.press("less_than_sign")
        await pilot.pause()
        assert column.region.width == width + 5
        await pilot.press("z")  # the tree (with its legend) takes the screen
        await pilot.pause()
        assert screen.maximized is column and column.region.height > 25
        await pilot.press("escape")
        await pilot.pause()
        assert screen.maximized is None
        await pilot.press("o", "z")  # the output, zoomed
        await pilot.pause()
        assert screen.maximized is screen.query_one(OutputView)
        await pilot.press("z")
        await pilot.pause()
        assert screen.maximized is None


async def test_the_remedy_diff_scrolls_by_keyboard_and_question_mark_works_in_every_dialog(tmp_path: Path):
    """Issue 25 (2): focus sits on Apply, and ↓ PgDn End Home still move the diff; the dialog
    says its keys; ? opens the key panel in a dialog as on a screen."""
    from sleuth.app.tui.dialogs import TargetDialog
    from textual.containers import VerticalScroll
    from textual.widgets import Button

    ws = make_workspace(tmp_path / "proj")
    ws.create("keys").close()
    app = SleuthApp.live(ws)
    async with app.run_test(size=(80, 24)) as pilot:
        await select(pilot, "remedy", "lock", "compile-race")
        await pilot.press("f")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, RemedyDialog) and isinstance(dialog.focused, Button) and dialog.focused.id == "apply"
        diff = dialog.query_one("#diff", VerticalScroll)
        assert diff.max_scroll_y > 0  # at 80×24 the lock's diff is longer than the dialog
        assert "PgDn" in str(dialog.query_one("#dialog-hint").render())
        await pilot.press("down")
        assert diff.scroll_y == 1
        await pilot.press("pagedown")
        assert diff.scroll_y > 1
        await pilot.press("end")
        assert diff.scroll_y == diff.max_scroll_y
        await pilot.press("home")
        assert diff.scroll_y == 0 and dialog.focused is not None and dialog.focused.id == "apply"
        await pilot.press("question_mark")
        await pilot.pause()
        shown = sheet_text(app)  # ? shows the dialog's own keys
        assert "this dialog" in shown and "diff down a page" in shown and "apply" in shown
        await pilot.press("question_mark")
        await pilot.pause()
        assert app.screen is dialog
        await pilot.press("escape")
        await pilot.pause()
        # and in another dialog: the target picker
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, TargetDialog)
        await pilot.press("question_mark")
        await pilot.pause()
        assert "this dialog" in sheet_text(app)


async def test_notifications_never_cover_the_timeline_and_the_keys_fit_at_80_by_24(tmp_path: Path):
    """Issue 25 (7): a toast stands above the timeline, not on it, and goes within 4 s; the
    ? panel fits the screen at 120×35 and at 80×24."""
    ws = make_workspace(tmp_path / "proj")
    path = recorded_hunt(ws.dir / "hunt.sleuth")
    for size in ((120, 35), (80, 24)):
        app = SleuthApp.live(ws, path)
        async with app.run_test(size=size, notifications=True) as pilot:
            app.notify("a two-line notification that says what happened\nand then one more line")
            app.notify("and another", severity="warning")
            await pilot.pause(0.3)
            timeline = app.screen.query_one("#timeline").region
            toasts = list(app.screen.query("Toast"))  # Textual's toast widget, by its type name
            assert toasts, "the notifications are shown"
            for toast in toasts:
                assert not toast.region.overlaps(timeline), (size, toast.region, timeline)
            assert app.NOTIFICATION_TIMEOUT <= 4
            for pane in ("#tree", "#output"):  # the sheet for each pane's keys fits without scrolling
                app.screen.query_one(pane).focus()
                await pilot.pause()
                await pilot.press("question_mark")
                await pilot.pause()
                shown = sheet_text(app)
                sheet = app.screen.query_one("#keys-sheet", Static)
                box = app.screen.query_one("#dialog").region
                assert app.screen.region.contains_region(box), (size, pane, box)
                assert sheet.region.height >= len(shown.rstrip("\n").splitlines()), (size, pane, shown)
                for words in ("run", "remedy", "quit", "hint"):
                    assert words in shown, (size, pane, words)
                await pilot.press("escape")
                await pilot.pause()

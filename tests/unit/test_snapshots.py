"""Snapshots of each screen (pytest-textual-snapshot): the investigation screen, the output
view with folded noise, the circular-retest modal, the remedy diff, and the replay screen.

Every session here has fixed timestamps and the app a fixed clock, so the screens are the
same on each run; `pytest --snapshot-update` rewrites them after an intended change."""

from __future__ import annotations

from pathlib import Path

import pytest
from sleuth.app.tui import OutputView, SleuthApp
from sleuth.hypotheses import InvestigationState
from sleuth.probes import MockTransport, load_config, probe_reply
from support.pilot import select, settle
from support.sessions import env_state
from support.ui_sessions import T0, make_workspace, recorded_hunt
from textual.widgets import Tree

SIZE = (130, 44)


@pytest.fixture
def hunt(tmp_path: Path):
    ws = make_workspace(tmp_path / "proj", python="python3")
    definition = load_config(ws.config_path).target("local").definition()
    return ws, recorded_hunt(ws.dir / "hunt.sleuth", definition)


def same_world(chain, stdin):
    """The far end, faked for a fixed screen: its state now is the one the hunt recorded."""
    return probe_reply(stdin, [], state=env_state())


def live(hunt) -> SleuthApp:
    ws, path = hunt
    return SleuthApp.live(ws, path, clock=lambda: T0 + 1800, transport=MockTransport(same_world))


def test_investigation_screen(snap_compare, hunt):
    async def ready(pilot):
        await settle(pilot)
        await select(pilot, "hypothesis", "compile-race")

    assert snap_compare(live(hunt), terminal_size=SIZE, run_before=ready)


def test_output_view_with_folded_noise(snap_compare, hunt):
    async def ready(pilot):
        pilot.app.screen.show_output(1)
        await settle(pilot)
        pilot.app.screen.query_one(OutputView).focus()
        await pilot.pause()

    assert snap_compare(live(hunt), terminal_size=SIZE, run_before=ready)


def test_retest_modal(snap_compare, hunt):
    async def ready(pilot):
        await settle(pilot)
        await select(pilot, "probe", "env-fingerprint", "version-drift")
        await pilot.press("r")
        await pilot.pause()

    assert snap_compare(live(hunt), terminal_size=SIZE, run_before=ready)


def test_remedy_diff(snap_compare, hunt):
    async def ready(pilot):
        await settle(pilot)
        await select(pilot, "remedy", "lock", "compile-race")
        await pilot.press("f")
        await pilot.pause()

    assert snap_compare(live(hunt), terminal_size=SIZE, run_before=ready)


def test_replay_screen(snap_compare, hunt):
    ws, path = hunt

    async def ready(pilot):
        await settle(pilot)
        await pilot.press("]")  # to the circular retest
        await settle(pilot)
        assert isinstance(pilot.app.screen.state, InvestigationState)
        pilot.app.screen.query_one(Tree).focus()

    app = SleuthApp.replay(path, at=3, workspace=ws, clock=lambda: T0 + 1800)
    assert snap_compare(app, terminal_size=SIZE, run_before=ready)

"""`sleuth demo` in a real terminal (tmux) at 120×35: the whole hunt driven with the keys the
screen shows (the guide, the footer, the dialogs' buttons) — reproduce, check against the
known-good baseline, the retest prompt, the lock, its verification, the export — read back
from the screen, the session file and the postmortem."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from support.known import seed_race_shows_here
from support.tmux import BIN, Tmux


@pytest.fixture(autouse=True)
def _needs_tmux():
    assert shutil.which("tmux"), "tmux is not installed: apt-get install -y tmux (.ci/run does)"


@pytest.mark.slow
def test_demo_in_a_real_terminal(tmp_path: Path):
    term = Tmux(tmp_path)
    try:
        term.start("sleuth demo hunt")
        # the known-good baseline (#1) was fingerprinted before the UI opened
        term.wait_for("Guided demo", "FX-trace RuntimeError", "compile race", "target local", "RUN #1 env-fingerprint",
                      "r run", timeout=90)
        term.keys("Down")
        term.wait_for("next:", "run fx-trace-state  [r]")  # the cheapest probe that can still tell
        # down to the cache invalidation hypothesis; r runs its probe (cache-inventory)
        term.keys(*["Down"] * 9)
        term.wait_for("The inductor / triton caches were wiped")
        term.keys("r")
        screen = term.wait_for("RUN #2 cache-inventory on local · completed", timeout=120)
        assert "#2 cache-inventory" in screen  # in the timeline too
        # a note, through the add dialog
        term.keys("a")
        term.wait_for("Add", "text of the note")
        term.keys("-l", "caches are warm here")
        term.keys("Enter")
        term.wait_for("✎ caches are warm here")
        term.keys("q")
        term.wait_for("SLEUTH-EXIT=0", timeout=30)
    finally:
        term.kill()
    events = json.loads(
        subprocess.run([BIN / "sleuth", "events", "--json"], cwd=tmp_path / "hunt", capture_output=True, text=True, check=True).stdout
    )
    kinds = [e["kind"] for e in events]
    assert "run.finished" in kinds
    assert any(e["kind"] == "note.added" and e["data"]["text"] == "caches are warm here" for e in events), events


@pytest.mark.slow
def test_the_demo_hunt_to_the_end_at_120_by_35_with_the_keys_on_screen(tmp_path: Path):
    term = Tmux(tmp_path)
    races = seed_race_shows_here()

    def down_until(text: str, key: str = "Down", most: int = 20) -> None:
        for _ in range(most):
            if text in term.screen():
                return
            term.keys(key)
            time.sleep(0.3)
        term.wait_for(text, timeout=5)

    try:
        term.start("sleuth demo hunt", size=(120, 35))
        # the known-good baseline was recorded before the UI opened; the guide says what to do
        screen = term.wait_for("Guided demo", "step 1 of 6", "↑/↓", "r run", "? keys", timeout=120)
        assert "#1 env-fingerprint" in screen
        down_until("probe ▷ compile-race")
        term.keys("r")
        term.wait_for("step 2 of 6", timeout=400)  # the race reproduced (on a torch that has it)
        down_until("probe ▷ env-fingerprint")
        term.keys("r")
        term.wait_for("step 3 of 6", timeout=120)
        term.keys("r")  # nothing changed: sleuth asks, the buttons name their keys
        screen = term.wait_for("Circular retest", "Run anyway [y]", "Don't run [n]", timeout=60)
        assert "• the same code" in screen
        term.keys("n")
        term.wait_for("step 4 of 6", timeout=30)
        if races:
            down_until("remedy ✚ lock", key="Up")
        else:  # the race was refuted, its node folded: select it and open it as a user would
            down_until("compile race   REFUTED", key="Up")
            if "remedy ✚ lock" not in term.screen():
                term.keys("Space")
            down_until("remedy ✚ lock")
        term.keys("f")
        term.wait_for("Remedy lock", "Apply [a]", timeout=60)
        term.keys("a")
        if races:
            screen = term.wait_for("Verify", "Yes [y]", timeout=60)
            assert "trials" in screen
            term.keys("y")
        else:  # nothing reproduced, so nothing to verify: the guide says so, and how to run it anyway
            term.wait_for("step 5 of 6", "sleuth offers no verification", timeout=60)
            assert "Verify" not in term.screen()
            down_until("probe ▷ compile-race", key="Up")
            term.keys("r")
        term.wait_for("step 6 of 6", timeout=600)  # verified under the lock
        term.keys("e")
        term.wait_for("all done", timeout=60)
        term.keys("q")
        term.wait_for("SLEUTH-EXIT=0", timeout=30)
    finally:
        term.kill()
    hunt = tmp_path / "hunt"
    hyps = json.loads(subprocess.run([BIN / "sleuth", "hypotheses", "--json"], cwd=hunt, capture_output=True, text=True,
                                     check=True).stdout)
    status = {h["id"]: h["status"] for h in hyps}
    md = (hunt / "postmortem.md").read_text()
    assert status["version-drift"] == "refuted" and "lock" in md and "circular-retest" in md
    if races:
        assert status["compile-race"] == "confirmed" and "Fix: the **lock**" in md
    else:  # torch 2.14+: the race never reproduced, so the lock fixed nothing (issue 33)
        assert status["compile-race"] == "refuted" and "Fix: the **lock**" not in md
        assert "nothing to verify: the failure was not seen before" in md

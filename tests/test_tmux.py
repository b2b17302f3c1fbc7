"""`sleuth demo` in a real terminal (tmux): the guided hint, keys, a probe run on the local
target, a note, quit — read back from the screen and from the session file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True)
def _needs_tmux():
    assert shutil.which("tmux"), "tmux is not installed: apt-get install -y tmux (.ci/run does)"


class Tmux:
    def __init__(self, cwd: Path) -> None:
        self.socket = f"sleuth-test-{uuid.uuid4().hex[:8]}"
        self.cwd = cwd

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True, timeout=30).stdout

    def start(self, command: str) -> None:
        env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "TERM": "xterm-256color"}
        subprocess.run(
            ["tmux", "-L", self.socket, "new-session", "-d", "-s", "t", "-x", "140", "-y", "45", "-c", str(self.cwd),
             f"{command}; echo SLEUTH-EXIT=$?; sleep 600"],
            env=env, check=True, timeout=30,
        )

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "t")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "t", *keys)

    def wait_for(self, *texts: str, timeout: float = 60.0) -> str:
        end = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if all(t in screen for t in texts):
                return screen
            if time.monotonic() > end:
                raise AssertionError(f"never saw {texts!r} on the screen:\n{screen}")
            time.sleep(0.2)

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


def test_demo_in_a_real_terminal(tmp_path: Path):
    term = Tmux(tmp_path)
    try:
        term.start("sleuth demo hunt")
        term.wait_for("Guided demo", "FX-trace RuntimeError", "compile race", "target local", "no run yet", "r run", timeout=90)
        term.keys("Down")
        term.wait_for("next:", "run fx-trace-state  [r]")  # the cheapest probe that can still tell
        # down to the cache invalidation hypothesis; r runs its probe (cache-inventory)
        term.keys(*["Down"] * 9)
        term.wait_for("The inductor / triton caches were wiped")
        term.keys("r")
        screen = term.wait_for("RUN #1 cache-inventory on local", "completed", timeout=120)
        assert "#1 cache-inventory" in screen  # in the timeline too
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
    assert any(e["kind"] == "note.added" and e["data"]["text"] == "caches are warm here" for e in events)

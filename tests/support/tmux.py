"""A real terminal: tmux on a socket of its own, its screen read back as text."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

BIN = Path(shutil.which("sleuth") or Path(sys.executable).with_name("sleuth")).parent  # the installed sleuth (or conftest's)


class Tmux:
    def __init__(self, cwd: Path) -> None:
        self.socket = f"sleuth-test-{uuid.uuid4().hex[:8]}"
        self.cwd = cwd

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True, timeout=30).stdout

    def start(self, command: str, size: tuple[int, int] = (140, 45)) -> None:
        # the terminal's size is tmux's: a COLUMNS/LINES from the caller (pytest-xdist's workers set
        # 80×24) would win over it in the app
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env.update(PATH=f"{BIN}:{os.environ.get('PATH', '')}", TERM="xterm-256color")
        subprocess.run(
            ["tmux", "-L", self.socket, "new-session", "-d", "-s", "t", "-x", str(size[0]), "-y", str(size[1]), "-c", str(self.cwd),
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

"""The `sleuth` command as a user runs it: a real process, its exit status checked."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

SLEUTH = shutil.which("sleuth") or str(Path(sys.executable).with_name("sleuth"))


def verdicts(data: dict) -> list[dict]:
    """A run's evidence as hypothesis and verdict, each checked to say why (the rule and its figures)."""
    for e in data["evidence"]:
        assert "why" not in e or e["why"], e  # every verdict says why (a fleet's comparison has its own keys)
    return [{k: v for k, v in e.items() if k != "why"} for e in data["evidence"]]


def sleuth(cwd: Path, *args: str, check: bool | int = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the installed `sleuth`; check=True wants exit 0, check=N (an int) wants exit N."""
    proc = subprocess.run([SLEUTH, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if type(check) is int and proc.returncode != check:
        raise AssertionError(f"sleuth {' '.join(args)} exited {proc.returncode}, not {check}\n{proc.stdout}\n{proc.stderr}")
    if check is True and proc.returncode != 0:
        raise AssertionError(f"sleuth {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


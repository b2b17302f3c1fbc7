"""What the session commands share: the session file and the investigation their arguments
name, a run number as given (7 or #7), JSON on stdout, and whether a terminal is there for
the UI."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..probes import load_config
from ..sessions import Investigation, Workspace
from .errors import UsageError

__all__ = ["open_investigation", "print_json", "run_id", "session_path", "ui_available"]


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False) + "\n")


def open_investigation(args: argparse.Namespace, create: bool = False) -> Investigation:
    ws = Workspace.find()
    load_config(ws.config_path)  # a broken sleuth.toml is reported before anything is written
    return ws.open(args.session, create=create)


def run_id(text: str) -> int:
    digits = text.lstrip("#")
    if not digits.isdigit():
        raise UsageError(f"{text!r} is not a run number (#N)")
    return int(digits)


def session_path(explicit: str | None) -> Path:
    """The session file *explicit* names (a file, or a directory: its newest investigation),
    else the current one."""
    return Workspace.find().resolve(explicit)


def ui_available() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()

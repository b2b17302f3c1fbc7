"""A directory sleuth works in, made as a user makes one (what the ``make_project`` fixture in
tests/conftest.py writes)."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.cli import sleuth
from support.ui_sessions import EXAMPLE, make_workspace


def new_project(d: Path, *, toml: str = "", drafter: bool = False, workspace: bool = False,
                session: str | None = None) -> Path:
    """`sleuth init` in *d* (made if missing), then *toml* appended to the sleuth.toml it wrote.

    drafter: the example drafter copied into d/drafter first. workspace: instead of `sleuth
    init`, the UI tests' sleuth.toml (the local target, the example drafter as its code).
    session: then `sleuth new SESSION`."""
    if workspace:
        make_workspace(d)
    else:
        d.mkdir(parents=True, exist_ok=True)
        if drafter:
            shutil.copytree(EXAMPLE, d / "drafter", ignore=shutil.ignore_patterns("__pycache__"))
        sleuth(d, "init")
    if toml:
        (d / "sleuth.toml").write_text((d / "sleuth.toml").read_text() + "\n" + toml)
    if session is not None:
        sleuth(d, "new", session)
    return d

"""sleuth's front ends: the command line and the Textual UI (app/tui/). Nothing imports app/."""

from __future__ import annotations

from .cli import build_parser, main

__all__ = ["build_parser", "main"]

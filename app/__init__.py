"""sleuth's front ends: the command line and (later) the Textual UI. Nothing imports app/."""

from __future__ import annotations

from .cli import build_parser, main

__all__ = ["build_parser", "main"]

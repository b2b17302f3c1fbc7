"""The postmortem's small words: a time since the first event, a duration, a Mermaid node id,
a table cell's text."""

from __future__ import annotations

import re

__all__ = ["cell", "duration", "node_id", "since"]


def since(ts: float, t0: float) -> str:
    """*ts* as hh:mm:ss after *t0*."""
    s = int(ts - t0)
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"


def node_id(ident: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", ident)


def cell(text: str) -> str:
    """*text* as one markdown table cell: its pipes escaped, its lines joined."""
    return text.replace("|", "\\|").replace("\n", " ")

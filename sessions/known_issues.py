"""The known upstream issues as this session sees them: the catalog's entries that apply to
the versions a target has now, each with what this session measured of its fix there. One
source for `sleuth known --json`'s rows and the MCP tool `known`'s."""

from __future__ import annotations

from typing import Any

from ..hypotheses.known import applying, version_of
from .overlay import describe_contents
from .workspace import Workspace

__all__ = ["known_rows"]


def known_rows(ws: Workspace, entries: dict[str, Any], target: str, versions: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries that apply to *versions* (measured on *target* now), each with what this
    session measured of its fix there (`sleuth known --json`'s rows; the MCP tool's too)."""
    rows = [{**e.to_dict(), "target": target, "measured": version_of(versions, e.package)}
            for e in applying(entries, versions)]
    measured_here = _measured_here(ws, target)
    for r in rows:
        r["measured_here"] = measured_here.get(r["id"], [])
    return rows


def _measured_here(ws: Workspace, target: str) -> dict[str, list[str]]:
    """What the current session measured of each entry's fix on *target*: "fixed here by
    upgrade #2 (torch 2.14.1+cu130 imported), run #7: weak: 5 clean trials would make it strong"."""
    path = ws.current_path()
    if path is None or not path.exists():
        return {}
    out: dict[str, list[str]] = {}
    with ws.open(path) as inv:
        for app in inv.state.applications.values():
            ov = app.upgrade
            if ov is None or app.target != target:
                continue
            grouped: dict[tuple[str, str], list[str]] = {}  # one line per run and finding, hypotheses together
            for v in app.verified:
                imported = v.imported or ov.version
                how = v.strength or ("strong" if v.strong else "weak")
                if v.outcome == "fixed":
                    word = "fixed here" if v.strong else "fixed here, weak"
                elif v.outcome == "not_fixed":
                    word = "not fixed here"
                else:
                    word = "nothing verified here"
                held = describe_contents(ov, short=True)
                head = (f"{word} by upgrade #{app.id} ({ov.package} {imported} imported"
                        f"{'; the overlay: ' + held if held else ''}"
                        f"{'' if app.active else ', reverted since'}), run #{v.run}")
                names = grouped.setdefault((head, how), [])
                if v.hypothesis and v.hypothesis not in names:
                    names.append(v.hypothesis)
            for (head, how), names in grouped.items():
                out.setdefault(ov.issue, []).append(f"{head}{' for ' + ', '.join(names) if names else ''}: {how}")
    return out

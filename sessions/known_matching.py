"""The known upstream issues a finished run matches, decided without writing anything: the
entries whose versions it measured in range (and whose signature its output showed, where the
entry has one), and those an earlier run on its target matched that no longer apply."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..hypotheses import EventKind, InvestigationState, RunInfo
from ..hypotheses.known import KnownIssue, leaving, match_run
from .new_event import NewEvent

__all__ = ["known_matched", "run_versions"]


def run_versions(state: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The package versions a run's own state read measured; None where it measured none."""
    versions = ((state or {}).get("env") or {}).get("distributions") if state else None
    return versions if isinstance(versions, dict) and versions else None


def known_matched(st: InvestigationState, known: Mapping[str, KnownIssue], info: RunInfo,
                  state: Mapping[str, Any] | None, seen: Mapping[str, str],
                  read_before: Mapping[str, Any] | None = None) -> NewEvent | None:
    """The known upstream issues run *info* matches (*known*: the catalog; *state*: what the run
    measured; *seen*: entry id -> the output line that showed its signature), and the ones an
    earlier run on this target matched that no longer apply (the versions left the range): like
    drift, a match belongs to the state it was seen in. None where there is nothing to say. A run
    that reports no state of its own (a shell command) is matched against *read_before*, the state
    read just before it, and the match says so."""
    if state is None and read_before is not None and seen:
        # a shell command reports no state: its signatures are matched against the versions
        # read just before it (a command that changed them says so in its own output)
        before = (read_before.get("env") or {}).get("distributions")
        matches = [{**m, "versions_from": "the state read just before the run"}
                   for m in match_run(known, before if isinstance(before, dict) else None, seen)
                   if m.get("seen")]
        if not matches:
            return None
        return NewEvent(EventKind.KNOWN_MATCHED, {"run": info.id, "target": info.target, "matches": matches,
                                                  "left": []})
    versions = run_versions(state)
    if versions is None:
        return None  # nothing measured: no match and no leaving, never a guess
    run = st.runs[info.id]
    matches = match_run(known, versions, seen, run.probe if run.classification == "completed" else None,
                        run.result)
    matched = {m["id"] for m in matches}
    left = []
    earlier = {m.id: m for m in st.known_matches if m.target == info.target}
    for ident, m in earlier.items():
        if ident in matched or st.known_live(info.target, ident) is False:
            continue
        why = leaving(m.to_dict(), versions)
        if why is not None:
            left.append({k: m.stored(k) for k in ("id", "title", "package", "affected", "fixed_in", "source",
                                                   "checked", "explains")} | {"why": why})
    if not (matches or left):
        return None
    return NewEvent(EventKind.KNOWN_MATCHED, {"run": info.id, "target": info.target, "matches": matches,
                                              "left": left})

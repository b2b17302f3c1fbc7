"""The hang reading's entry points: the stacks read (verdicts.py), the Flight Recorder's
reading after it (flight_recorder.py) and whether the two name the same ranks, merged into
the run's ``result`` record for the rules."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from .flight_recorder import read_flight_recorder
from .rank import _view
from .verdicts import _analyze


def analyze_stacks(records: Iterable[Mapping[str, Any]], member_of: Mapping[int, str] | None = None,
                   window: float | None = None) -> dict[str, Any]:
    """What :func:`_analyze` reads from the stacks, with the Flight Recorder's reading after it
    (``flight_recorder``, ``fr_behind``, ``fr_mismatch``, ``fr_agrees``; its sentences follow the
    stacks' own, and whether it names the same ranks). *window* is the sampling window's length
    where the records carry no result (a fleet's members)."""
    records_list = list(records)
    recs = [r for r in records_list if r.get("kind") == "rank"]
    views = [_view(r, (member_of or {}).get(i)) for i, r in enumerate(recs)]
    if window is None:
        window = max((float(r.get("window_s") or 0) for r in records_list if r.get("kind") == "result"), default=0.0)
    result = next((r for r in records_list if r.get("kind") == "result"), {})
    out = _analyze(recs, views, window, (str(result.get("looked_for") or ""), result.get("chosen")), member_of)
    helpers = [h for r in records_list if r.get("kind") == "result" for h in (r.get("helpers") or [])]
    if helpers:
        kinds = Counter(str(h.get("comm") or "?") for h in helpers)
        out["sentences"].append(
            f"{len(helpers)} child process{'es' if len(helpers) != 1 else ''} of the ranks ("
            + ", ".join(f"{c} ×{n}" for c, n in kinds.most_common()) + "), started with their rank's environment, "
            "are the ranks' helpers (data-loader "
            "workers and the like), not ranks: left out of the comparison")
    fr = read_flight_recorder(recs, views, healthy=bool(out["healthy"]))
    out.update({k: fr[k] for k in ("flight_recorder", "fr_behind", "fr_mismatch")})
    for row in out["per_rank"]:
        if row["label"] in fr["fr_per_rank"]:
            row["flight_recorder"] = fr["fr_per_rank"][row["label"]]
    out["sentences"].extend(fr["fr_sentences"])
    odd = {r["rank"] for r in out["odd_ranks"]}
    if fr["fr_behind"] and odd:
        out["fr_agrees"] = set(fr["fr_behind"]) == odd
        out["sentences"].append(
            f"the flight recorder agrees: {', '.join(sorted(odd, key=str))}" if out["fr_agrees"] else
            f"the flight recorder names {', '.join(fr['fr_behind'])}, the stacks {', '.join(sorted(odd, key=str))}: "
            "read both before acting")
    else:
        out["fr_agrees"] = None
    if fr["fr_behind"] or fr["fr_mismatch"]:
        out["agreed"] = False
    return out


def with_hang_analysis(records: list[dict[str, Any]], member_of: Mapping[int, str] | None = None) -> list[dict[str, Any]]:
    """The run's records with the analysis merged into its ``result`` record (what rules read)."""
    found = analyze_stacks(records, member_of)
    out = []
    for rec in records:
        if rec.get("kind") == "result":
            rec = {**rec, **found}
        out.append(rec)
    return out

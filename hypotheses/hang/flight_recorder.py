"""torch's Flight Recorder read across ranks: per process group, the last collective each rank
entered, the rank behind the others, and the same collective number posted as different
collectives (a mismatch)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .rank import RankView, _ranks_text


def _group_text(pg: str, names: Mapping[str, str]) -> str:
    name = names.get(pg) or ""
    return f"group {pg}" + (f" ({name})" if name and name not in ("undefined", pg) else "")


def _sizes(sizes: Any) -> str:
    return "" if not sizes else " " + "x".join(str(n) for n in sizes[0]) if isinstance(sizes, list) and sizes and \
        isinstance(sizes[0], list) else f" {sizes}"


def read_flight_recorder(recs: list[Mapping[str, Any]], views: list[RankView], healthy: bool) -> dict[str, Any]:
    """torch's Flight Recorder of each rank (the stacks probe asks the hook, or reads a dump the
    watchdog left), compared across ranks: per process group, the last collective each rank
    entered; a rank behind the others has not entered the collective they wait in (the missing
    rank), and the same collective number posted as different collectives is a mismatch."""
    per: dict[str, dict[str, Any]] = {}
    out: dict[str, Any] = {"flight_recorder": 0, "fr_behind": [], "fr_mismatch": False, "fr_agrees": None,
                           "fr_sentences": [], "fr_per_rank": {}}
    for rec, v in zip(recs, views):
        fr = rec.get("flight_recorder")
        if not isinstance(fr, dict):
            continue
        if fr.get("error"):
            out["fr_per_rank"][v.label] = {"source": fr.get("source"), "error": fr["error"]}
            continue
        per[v.label] = fr
    out["flight_recorder"] = len(per)
    names: dict[str, str] = {}
    entered: dict[str, dict[str, int]] = {}
    pending: dict[str, list[dict[str, Any]]] = {}
    by_seq: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for label, fr in per.items():
        mine: dict[str, int] = {}
        for e in fr.get("entries") or []:
            if e.get("p2p") or e.get("seq") is None:
                continue
            pg = str(e.get("pg"))
            if e.get("pg_name"):
                names.setdefault(pg, str(e["pg_name"]))
            mine[pg] = max(mine.get(pg, 0), int(e["seq"]))
            by_seq.setdefault((pg, int(e["seq"])), {})[label] = e
            if e.get("retired") is False and e.get("state") != "completed":
                pending.setdefault(label, []).append(e)
        for pg, st in (fr.get("pg_status") or {}).items():
            if "last_enqueued_collective" in st:
                mine[str(pg)] = max(mine.get(str(pg), 0), int(st["last_enqueued_collective"]))
        entered[label] = mine
        waits = pending.get(label, [])
        out["fr_per_rank"][label] = {"source": fr.get("source"), "entered": mine,
                                     "waits_in": [f"{e.get('op')} #{e.get('seq')} on {_group_text(str(e.get('pg')), names)}"
                                                  for e in waits]}
    said: list[str] = out["fr_sentences"]
    if len(per) < 2:
        return out

    def waits_text(label: str) -> str:
        waits = pending.get(label) or []
        if not waits:
            return f"{label} waits in no collective"
        e = waits[-1]
        return f"{label} waits in {e.get('op')} #{e.get('seq')} on {_group_text(str(e.get('pg')), names)}{_sizes(e.get('sizes'))}"

    order = {v.label: i for i, v in enumerate(views)}

    def rank_order(label: str) -> int:
        return order.get(label, len(order))

    for pg in sorted({pg for m in entered.values() for pg in m}, key=lambda g: (len(g), g)):
        have = {label: m[pg] for label, m in entered.items() if pg in m}
        if len(have) < 2:
            continue
        top = max(have.values())
        ahead = sorted((lbl for lbl, n in have.items() if n == top), key=rank_order)
        behind = sorted((lbl for lbl, n in have.items() if n < top), key=rank_order)
        if not behind or healthy:
            continue
        posted = next((by_seq[(pg, top)][lbl] for lbl in ahead if lbl in by_seq.get((pg, top), {})), None)
        what = f"{posted.get('op')} #{top}" if posted else f"collective #{top}"
        ahead_views = [v for v in views if v.label in ahead]
        for label in behind:
            out["fr_behind"].append(label)
            said.append(f"flight recorder: {_ranks_text(ahead_views)} {'are' if len(ahead) > 1 else 'is'} in {what} on "
                        f"{_group_text(pg, names)}, which {label} has not entered (its last there: #{have[label]}); "
                        f"{waits_text(label)}")
    for (pg, seq), posted in sorted(by_seq.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if len(posted) < 2:
            continue
        kinds: dict[tuple[str, str], list[str]] = {}
        for label, e in posted.items():
            kinds.setdefault((str(e.get("op")), _sizes(e.get("sizes"))), []).append(label)
        if len(kinds) > 1:
            out["fr_mismatch"] = True
            parts = sorted(kinds.items(), key=lambda kv: (len(kv[1]), kv[0]))
            said.append(f"flight recorder: collective #{seq} on {_group_text(pg, names)} is not the same on every rank: "
                        + "; ".join(f"{_ranks_text([v for v in views if v.label in labels])} posted {op}{sz}"
                                    for (op, sz), labels in parts))
    return out

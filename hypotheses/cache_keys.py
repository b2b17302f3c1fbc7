"""What changed in a compile's cache key, from inductor's own key parts (the compile-cache probe).

A compile-cache run reports inductor's counters and, per compile, the key inductor computed and
its named parts with their hashes (FxGraphHashDetails / AOTAutogradCacheDetails, the lines
inductor logs at debug level). A miss is explained by comparing those parts with the same graph's
parts in the last run of the same entry that hit in the same cache folder (on the same machine,
whichever target or environment wrote it): a part whose hash differs is what
changed. No earlier hit: a cold first look, nothing to compare (``cold``). The same key as the
hit and still a miss: the entry is gone (``wiped``: the cache folder was emptied or pruned).

Parts are grouped as a user names them: "torch" (torch_version: its version and a hash of its
sources; both builds named), "system" split into "triton", "cuda", "device" where the runs' own
readings differ, "inductor config" (which options), "inputs", "graph", "compile options".
Where torch itself changed, a part only one of the two torches has (an option added or removed
by the new release) is the torch change, not a change of its own, and is not named.
"""

from __future__ import annotations

from typing import Any

from .model import InvestigationState

__all__ = ["PROBE_ID", "said", "with_cache_changes"]

PROBE_ID = "compile-cache"


def _group(part: str) -> str:
    if part == "torch_version":
        return "torch"
    if part.startswith("system_info"):
        return "system"
    if part.startswith("inductor_config"):  # inductor_config[...] and inductor_config_comms[...]
        return "inductor config"
    if part.startswith(("example_inputs", "inputs_to_check")) or part == "fx_kwargs[static_input_idxs]":
        return "inputs"
    if part == "gm":
        return "graph"
    return "compile options"


def _option(part: str) -> str:
    """inductor_config[max_autotune] -> max_autotune."""
    return part.split("[", 1)[1].rstrip("]") if "[" in part else part


def _compiles(result: dict[str, Any]) -> list[dict[str, Any]]:
    """This run's compiles of one kind: AOTAutograd's keys where the autograd cache computed
    them (every compile, hit or miss), else the FX graph's."""
    got = [c for c in result.get("compiles") or () if isinstance(c, dict) and c.get("parts")]
    autograd = [c for c in got if c.get("kind") == "autograd"]
    return autograd or [c for c in got if c.get("kind") == "fxgraph"]


def _graph(compile_: dict[str, Any]) -> str | None:
    gm = (compile_.get("parts") or {}).get("gm")
    return gm[0] if isinstance(gm, list) and gm else None


def _same_folder(run: Any, target: str, result: dict[str, Any]) -> bool:
    """Whether *run* compiled against the cache folder *result* did: the same folder on the same
    machine, whichever target or environment wrote it (two venvs on one box share a folder);
    a run that did not say its machine and folder counts only on the same target."""
    host, folder = result.get("host"), result.get("cache_dir")
    if host and folder and run.result.get("host") and run.result.get("cache_dir"):
        return run.result.get("host") == host and run.result.get("cache_dir") == folder
    return run.target == target


def _earlier_hit(st: InvestigationState, target: str, entry: Any, result: dict[str, Any]) -> Any:
    hits = [r for r in st.runs.values()
            if r.probe == PROBE_ID and r.classification == "completed" and _same_folder(r, target, result)
            and (r.params or {}).get("entry") == entry and int(r.result.get("hits") or 0) > 0
            and _compiles(r.result)]
    return hits[-1] if hits else None


def _describe(group: str, parts: list[tuple[str, Any, Any]], before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    if group == "torch":
        b, a = before.get("torch") or {}, after.get("torch") or {}
        if b.get("version") != a.get("version"):
            text = f"torch {b.get('version')} → {a.get('version')}"
        elif b.get("git") != a.get("git"):
            text = f"torch {a.get('version')}, another build (commit {str(b.get('git'))[:12]} → {str(a.get('git'))[:12]})"
        else:
            text = f"torch {a.get('version')}: its sources changed (same version and commit)"
        return {"part": "torch", "before": b.get("version"), "after": a.get("version"),
                "before_git": b.get("git"), "after_git": a.get("git"), "text": text}
    if group == "inductor config":
        options = sorted({_option(p) for p, _b, _a in parts})
        shown = [f"{_option(p)} {vb!r} → {va!r}" for p, vb, va in parts][:6]
        return {"part": "inductor config", "options": options, "text": "inductor config: " + "; ".join(shown)}
    if group == "compile options":
        names = sorted({p for p, _b, _a in parts})
        return {"part": "compile options", "options": names, "text": "compile options: " + ", ".join(names[:6])}
    return {"part": group, "text": group}


def _system(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    b, a = before.get("system") or {}, after.get("system") or {}
    out = [{"part": name, "before": b.get(name), "after": a.get(name), "text": f"{name} {b.get(name)} → {a.get(name)}"}
           for name in ("triton", "cuda", "hip", "device") if b.get(name) != a.get(name)]
    return out or [{"part": "system", "text": "the system's key (device, CUDA, triton) changed"}]


def compare(before_result: dict[str, Any], after_result: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    """The changes between the hit run's compiles and these, and whether a compile kept the
    hit's very key (its entry is gone if this run still missed)."""
    earlier = _compiles(before_result)
    changes: dict[str, dict[str, Any]] = {}
    same_key = False
    for i, now in enumerate(_compiles(after_result)):
        graph = _graph(now)
        match = next((c for c in earlier if c.get("kind") == now.get("kind") and _graph(c) == graph), None)
        if match is None and i < len(earlier):
            match = earlier[i]  # the same position in the same entry: its graph itself changed
        if match is None:
            continue
        if match.get("key") == now.get("key"):
            same_key = True
            continue
        differs: dict[str, list[tuple[str, Any, Any]]] = {}
        pb, pa = match.get("parts") or {}, now.get("parts") or {}
        torch_changed = (pb.get("torch_version") or [None])[0] != (pa.get("torch_version") or [None])[0]
        for part in sorted(set(pb) | set(pa)):
            hb, ha = (pb.get(part) or [None, None]), (pa.get(part) or [None, None])
            if hb[0] == ha[0]:
                continue
            if torch_changed and (part not in pb or part not in pa):
                continue  # an option one torch has and the other has not: it came with the torch change
            differs.setdefault(_group(part), []).append((part, hb[1], ha[1]))
        for group, parts in differs.items():
            if group == "system":
                for said in _system(before_result, after_result):
                    changes.setdefault(said["part"], said)
            elif group not in changes:
                changes[group] = _describe(group, parts, before_result, after_result)
            elif "options" in changes[group]:
                merged = _describe(group, parts, before_result, after_result)
                changes[group]["options"] = sorted(set(changes[group]["options"]) | set(merged["options"]))
    if "torch" in changes:  # the other torch's defaults are not known here: say so, never claim the user set them
        for group in ("inductor config", "compile options"):
            if group in changes:
                changes[group]["text"] += " (torch changed too: these may be the new torch's defaults)"
                changes[group]["with_torch"] = True
    return list(changes.values()), same_key


def with_cache_changes(st: InvestigationState, target: str, params: dict[str, Any],
                       records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The result record with ``changed`` (the parts' names), ``changes`` (each with both
    sides, in words), ``wiped``, ``cold`` and ``compared_with`` (the earlier run that hit)."""
    out = []
    for rec in records:
        if rec.get("kind") == "result" and "misses" in rec and "compiles" in rec:
            misses = int(rec.get("misses") or 0)
            hit = _earlier_hit(st, target, params.get("entry"), rec)
            changes: list[dict[str, Any]] = []
            wiped = False
            if misses and hit is not None:
                changes, same_key = compare(hit.result, rec)
                wiped = same_key and not changes
            rec = {**rec, "changed": [c["part"] for c in changes], "changes": changes, "wiped": wiped,
                   "cold": bool(misses) and hit is None and not int(rec.get("hits") or 0),
                   "compared_with": hit.id if hit is not None and misses else None,
                   # the hit another target wrote into this folder (another venv on the same box)
                   "compared_target": hit.target if hit is not None and misses and hit.target != target else None}
            rec["said"] = said(rec)
        out.append(rec)
    return out


def said(res: dict[str, Any]) -> str:
    """What a compile-cache run found, in one sentence: what changed since the run that hit, the
    entry gone, a cold first look, every compile a hit, or inductor's reason for bypassing."""
    parts = []
    on = f" on target {res['compared_target']}, in the same cache folder" if res.get("compared_target") else ""
    if res.get("changes"):
        parts.append("; ".join(str(c.get("text") or c.get("part")) for c in res["changes"])
                     + f" (since #{res.get('compared_with')}, which hit{on})")
    elif res.get("wiped"):
        parts.append(f"the same key as #{res.get('compared_with')}, which hit{on}: the entry is gone (wiped or pruned)")
    elif res.get("cold"):
        parts.append("a cold first look: no earlier hit to compare with")
    elif int(res.get("misses") or 0) == 0 and int(res.get("hits") or 0) > 0:
        parts.append("nothing: every compile hit")
    elif int(res.get("misses") or 0):
        parts.append("a miss with no key parts read to compare")
    if int(res.get("bypasses") or 0):
        reasons = "; ".join(dict.fromkeys(str(r) for r in res.get("bypass_reasons") or ())) or "no reason logged"
        parts.append(f"{res['bypasses']} compile{'s' if int(res['bypasses']) > 1 else ''} bypassed the cache "
                     f"(inductor: {reasons}): never cached, so no entry of {'them' if int(res['bypasses']) > 1 else 'it'}"
                     " can have been wiped or re-keyed")
    if not parts:
        parts.append("nothing compiled" + (f": {res['failed']}" if res.get("failed") else ""))
    return "; ".join(parts)

"""The world the ranks belong to: how many ranks it has, which were not found here and whether
something shows them on another node (or only not here), and several jobs' ranks told apart
so that they are never compared."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .rank import RankView, _ranks_text


def _numbers_text(nums: list[int]) -> str:
    """Rank numbers in words, runs of three or more as a range: "rank 0", "ranks 4–7, 9"."""
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(f"{nums[i]}–{nums[j]}" if j - i >= 2 else ", ".join(map(str, nums[i:j + 1])))
        i = j + 1
    return ("rank " if len(nums) == 1 else "ranks ") + ", ".join(parts)


# how a rank's local world (what its launcher started on its machine) was known, in words
_LOCAL_WORLD_FROM = {"LOCAL_WORLD_SIZE": "LOCAL_WORLD_SIZE", "launcher": "rank 0 and the local ranks it started",
                     "torch.multiprocessing.spawn": "the processes torch.multiprocessing.spawn started"}


def _other_node(recs: list[Mapping[str, Any]], world: int,
                member_of: Mapping[int, str] | None) -> tuple[list[str], list[str]]:
    """What shows a node besides the ones read, and what shows none: a node rank above 0
    (NODE_RANK, torchrun's GROUP_RANK), a MASTER_ADDR that is not this machine, a world larger
    than the processes every launcher found started here (LOCAL_WORLD_SIZE, Lightning's
    launcher and its children, torch.multiprocessing.spawn's). (another node, this machine)."""
    other: list[str] = []
    here: list[str] = []
    nodes = sorted({(key, str(r.get(field))) for r in recs for key, field in (("NODE_RANK", "node_rank"),
                                                                             ("GROUP_RANK", "group_rank"))
                    if str(r.get(field) or "").isdigit()}, key=lambda kv: (kv[0], int(kv[1])))
    above = [f"{key} {n}" for key, n in nodes if n != "0"]
    if above:
        other.append(f"the ranks here have {', '.join(above)}")
    elif nodes:
        here.append(" and ".join(sorted({key for key, _n in nodes})) + " 0")
    masters = {str(r.get("master_addr")): r.get("master_here") for r in recs if r.get("master_addr")}
    away = sorted(a for a, at in masters.items() if at is False)
    if away:
        other.append(f"MASTER_ADDR {', '.join(away)} is not this machine")
    elif masters and all(at is True for at in masters.values()):
        here.append(f"MASTER_ADDR {', '.join(sorted(masters))} is this machine")
    launchers: dict[tuple[str, str], int] = {}
    how: set[str] = set()
    for i, r in enumerate(recs):
        if not str(r.get("local_world") or "").isdigit():
            launchers = {}
            break
        key = ((member_of or {}).get(i, ""), str(r.get("launcher")))
        launchers[key] = max(launchers.get(key, 0), int(r["local_world"]))
        how.add(str(r.get("local_world_from")))
    if launchers:
        started = sum(launchers.values())
        what = "the launcher found accounts" if len(launchers) == 1 else f"the {len(launchers)} launchers found account"
        by = "; ".join(_LOCAL_WORLD_FROM.get(h, h) for h in sorted(how))
        if started < world:
            other.append(f"{what} for {started} of the world's {world} ({by})")
        else:
            here.append(f"{what} for all {world} ({by})")
    return other, here


def _missing(recs: list[Mapping[str, Any]], out: dict[str, Any], looked_for: tuple[str, str | None] = ("", None),
             member_of: Mapping[int, str] | None = None) -> None:
    """The world's ranks not found here: elsewhere (another node) only where something shows
    another node; otherwise not found here, with what was looked for (*looked_for*: the words,
    and the parameter that chose the processes, pid or match, if one did) and what shows none."""
    world = max((int(r["world_size"]) for r in recs if str(r.get("world_size") or "").isdigit()), default=0)
    found = {str(r.get("rank")) for r in recs if r.get("rank") not in (None, "")}
    unread = [r for r in recs if r.get("rank") in (None, "") and r.get("rank_unread")]
    missing = max(0, world - len(found) - len(unread)) if world else 0
    out["missing"] = missing
    if unread:  # a process of the job here whose rank could not be read: never counted as elsewhere
        out["sentences"].append(
            f"{len(unread)} process{'es' if len(unread) > 1 else ''} of the job here (pid "
            + ", ".join(str(r.get("pid")) for r in unread) + f") could not be told {'their ranks' if len(unread) > 1 else 'its rank'}"
            f" ({unread[0]['rank_unread']}); {'they are' if len(unread) > 1 else 'it is'} read with the others, "
            "not counted as elsewhere")
    assumed = sorted({str(r.get("world_size")) for r in recs if r.get("world_from") == "nprocs"})
    if assumed:  # nothing of the job said the world's size: said, so that no one reads it as checked
        out["sentences"].append(
            f"world size taken as the {' or '.join(assumed)} processes torch.multiprocessing.spawn started here (no "
            "WORLD_SIZE in their environment, no world_size argument to read): a rank on another node would not be seen")
    if not missing:
        return
    absent = [n for n in range(world) if str(n) not in found]
    which = _numbers_text(absent) if not unread and len(absent) == missing else f"{missing} rank{'s' if missing > 1 else ''}"
    other, here = _other_node(recs, world, member_of)
    out["elsewhere"] = bool(other)
    where = "here" if not member_of else f"on {', '.join(sorted(set(member_of.values())))}"
    head = f"world size {world}, {len(found)} rank{'s' if len(found) != 1 else ''} found {where}: "
    if other:  # "N is/are elsewhere": the count first, as before, then which
        out["sentences"].append(
            head + f"{missing} {'is' if missing == 1 else 'are'} elsewhere ({which}), on another node — "
            + "; ".join(other) + (": run stacks on the fleet" if not member_of else ": a node outside this fleet"))
        return
    words, chosen = looked_for
    tail = {"pid": "name its pid too, or read without --param pid",
            "match": "widen the pattern, or read without --param match"}.get(str(chosen), (
        f"{'it' if missing == 1 else 'they'} may have exited, or run as another user or without a launcher's "
        "environment (--param pid= names the processes to read)"))
    out["sentences"].append(
        head + f"{which} {'is' if missing == 1 else 'are'} not found {where}, and nothing shows another node"
        + (f" ({'; '.join(here)})" if here else "") + (f"; looked for {words}" if words else "") + f" — {tail}")


def _several_jobs(recs: list[Mapping[str, Any]], views: list[RankView], out: dict[str, Any]) -> bool:
    jobs: dict[str, list[RankView]] = {}
    for r, v in zip(recs, views):
        if r.get("job"):
            jobs.setdefault(str(r["job"]), []).append(v)
    if len(jobs) < 2:
        return False
    out.update(verdict="several-jobs", stuck=0, missing=0, elsewhere=False, compared=False,
               jobs=[{"job": key, "ranks": [v.label for v in members], "pids": [v.pid for v in members]}
                     for key, members in jobs.items()])
    out["sentences"].append(f"{len(jobs)} jobs run here; their ranks are not compared — "
                            + "; ".join(f"job {key}: {_ranks_text(members)} (pid "
                                        + ", ".join(str(v.pid) for v in members) + ")" for key, members in jobs.items())
                            + f". Read one job: --param job={next(iter(jobs))}")
    return True

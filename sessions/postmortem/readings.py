"""The postmortem's sections for what particular probes read: the compile cache's counters,
the ranks of a hang (each stacks run, each fleet's ranks read together), and fleets compared
member by member. Each is empty where no run read it."""

from __future__ import annotations

from ...hypotheses import Comparison, InvestigationState, RunInfo
from ...hypotheses.cache_keys import said as cache_said
from ...hypotheses.hang import state_word
from ...hypotheses.results import CacheResult, HangReading, RankRow
from .text import cell

__all__ = ["cache_section", "fleet_section", "hang_section"]

_RANK_ROWS = 64  # a hang's table shows this many ranks, then how many more there were


def cache_section(st: InvestigationState) -> list[str]:
    """The compile-cache runs: inductor's counters per run and what changed in the key since the
    run that hit (hypotheses/cache_keys.py); nothing when no run measured the cache."""
    runs = [r for r in st.runs.values() if r.probe == "compile-cache" and r.classification == "completed"
            and "misses" in r.result]
    if not runs:
        return []
    out = ["## Compile cache, measured", "",
           "| run | target | FX graph cache hits / misses / bypasses | AOTAutograd hits / misses | cache folder | what changed |",
           "|---|---|---|---|---|---|"]
    for r in runs:
        res = CacheResult.from_dict(r.result)
        said = res.said or cache_said(r.result)  # sessions written before "said" was kept
        out.append(f"| #{r.id} | {r.target} | {res.hits} / {res.misses} / {res.bypasses} | "
                   f"{res.autograd_hits} / {res.autograd_misses} | `{cell(str(res.cache_dir))}` | {cell(said)} |")
    return out + ["", "Counted by inductor itself (torch._dynamo.utils.counters) in a fresh process; what changed is "
                      "read from inductor's own key parts, compared with the last run on the target that hit.", ""]


def hang_section(st: InvestigationState) -> list[str]:
    """Each fleet's ranks read together, then each stacks run: what it read (the odd ranks with
    file:line, stuck or slow) and its ranks, where their main threads were."""
    runs = [r for r in st.runs.values() if isinstance(r.result.get("per_rank"), list)]
    if not runs:
        return []
    out = ["## Hang", ""]
    for f in st.fleet_hangs:
        reading = HangReading.from_dict(f.reading or {})
        members = ", ".join(f"{m} (#{r})" for m, r in (f.runs or {}).items())
        out += [f"### fleet {f.fleet}: {reading.verdict} — every member's ranks read together ({members})", ""]
        out += _sentences(reading)
    for run in runs:
        out += _stacks_run(run)
    return out


def _sentences(reading: HangReading) -> list[str]:
    return [f"- {cell(str(s))}" for s in reading.sentences or []] + [""]


def _stacks_run(run: RunInfo) -> list[str]:
    reading = HangReading.from_dict(run.result)
    out = [f"### #{run.id} stacks on {run.target}: {reading.verdict} ({reading.sampled} of {reading.ranks} "
           f"processes sampled, {reading.samples} samples in {reading.window_s} s)", "", *_sentences(reading)]
    total = len(reading.per_rank or [])
    if not total:
        return out
    out += ["| rank | state | main thread | native wait | framework |", "|---|---|---|---|---|"]
    out += [_rank_line(row, reading.odd_kinds) for row in reading.rows(_RANK_ROWS)]
    if total > _RANK_ROWS:
        out.append(f"| … {total - _RANK_ROWS} more | | | | |")
    return out + [""]


def _rank_line(row: RankRow, odd: dict[object, str | None]) -> str:
    """One rank: its label (bold, with how, where it is odd), state, main thread, native wait, framework."""
    main, wait, fw = row.place, row.wait, row.in_framework
    where = f"{main.function} at {main.file_name}:{main.line}" if main else f"no stacks: {row.error or '?'}"
    native = f"{wait.frame} ({wait.what})" if wait else ("none seen" if row.native_read else "not read")
    framework = f"{fw.package}: {fw.function}" if fw else "—"
    label = f"**{row.label}** ({odd[row.label]})" if row.label in odd else str(row.label)
    return (f"| {cell(label)} | {cell(state_word(row.to_dict()))} | {cell(where)} | {cell(native)} | "
            f"{cell(framework)} |")


def fleet_section(st: InvestigationState) -> list[str]:
    """Each fleet comparison: who the members were, a member × field matrix of what differs
    (the odd values bold), who could not be reached; nothing where no fleet was compared."""
    if not st.comparisons:
        return []
    out = ["## Fleets", ""]
    for d in st.comparisons:
        out += _comparison(st, Comparison.from_dict(d))
    return out


def _comparison(st: InvestigationState, c: Comparison) -> list[str]:
    members = list(c.runs) + list(c.unreachable)
    expanded = st.fleets.get(c.fleet)
    how = expanded.how if expanded is not None and expanded.has("how") else "as recorded"
    out = [f"### {c.fleet} · {c.probe}", "", f"Members ({how}): "
           + ", ".join(f"{m} (#{c.runs[m]})" if m in c.runs else f"{m} (not reached)" for m in members) + ".", "",
           f"{cell(c.headline())}.", ""]
    if c.spreads:
        out += _spreads(c)
    for m, why in c.unreachable.items():
        out.append(f"- {cell(m)}: not reached — {cell(why)} (no evidence)")
    if c.unreachable:
        out.append("")
    return out


def _spreads(c: Comparison) -> list[str]:
    """The member × field matrix of the fields that differ (the first 40)."""
    shown = c.spreads[:40]
    out = ["| field | " + " | ".join(cell(m) for m in c.runs) + " |", "|---|" + "---|" * len(c.runs)]
    for spread in shown:
        cells = []
        for m in c.runs:
            value = spread.odd[m] if m in spread.odd else spread.majority
            text = "absent" if value is None else ("another" if spread.name.startswith("state: ") and m in spread.odd
                                                   else "same" if spread.name.startswith("state: ") else str(value))
            cells.append(f"**{cell(text)}**" if m in spread.odd else cell(text))
        out.append(f"| {cell(spread.name)}{' ⚠' if spread.drift else ''} | " + " | ".join(cells) + " |")
    if len(c.spreads) > len(shown):
        out.append(f"\n… and {len(c.spreads) - len(shown)} more fields (the session has them all).")
    return out + ["", f"Bold: not the majority's value; ⚠ a version, build or environment field. "
                      f"{c.agreeing} other fields are the same on every member.", ""]

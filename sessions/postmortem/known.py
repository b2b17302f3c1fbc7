"""The postmortem's known upstream issues: each issue a run matched, per target, with the
versions measured, the fix (or that none is known), whether it still applies in that target's
latest state, and the source. Evidence of its own kind: no status rests on it."""

from __future__ import annotations

from ...hypotheses import InvestigationState
from ...hypotheses.stored import KnownSeen
from .text import cell

__all__ = ["known_section"]

_SHOWN_RUNS = 6  # the runs that matched an issue, named before "and N more"


def known_section(st: InvestigationState) -> list[str]:
    if not st.known_matches:
        return []
    latest: dict[tuple[str, str], KnownSeen] = {}  # (target, issue) -> its latest match
    runs: dict[tuple[str, str], list[int]] = {}  # (target, issue) -> the runs that matched it, in order
    for m in st.known_matches:
        latest[(m.target, m.id)] = m
        runs.setdefault((m.target, m.id), []).append(m.run)
    left = {(m.target, m.id): m for m in st.known_left}
    out = ["## Known upstream issues", "",
           "A match means a run on that target measured a version in the issue's affected range and, where the issue "
           "has a signature, its output showed it. It is what upstream already knows, not an experiment: no status "
           "above rests on it.", "",
           "| issue | target | measured | affected | fix | matched by | applies now | explains |",
           "|---|---|---|---|---|---|---|---|"]
    for key, m in latest.items():
        out.append(_row(m, sorted(set(runs[key])), left.get(key)))
    out.append("")
    said: set[str] = set()
    for m in latest.values():
        if m.id not in said:
            said.add(m.id)
            out += _source(m, runs[(m.target, m.id)][0])
    out.append("")
    return out


def _row(m: KnownSeen, runs: list[int], gone: KnownSeen | None) -> str:
    """The issue on one target: measured, affected, the fix, the runs that matched it, whether it still applies."""
    shown = ", ".join(f"#{r}" for r in runs[:_SHOWN_RUNS]) + (
        f" and {len(runs) - _SHOWN_RUNS} more" if len(runs) > _SHOWN_RUNS else "")
    now = f"no: {gone.why} (#{gone.run})" if gone is not None and gone.seq > m.seq else "yes"
    fix = f"fixed in {m.fixed_in}" if m.fixed_in else f"none known (checked {m.checked})"
    return (f"| [{m.id}]({m.source}) | {m.target} | {m.package} {m.measured} | {cell(str(m.affected))} | {fix} | "
            f"{shown} | {cell(now)} | {', '.join(m.explains)} |")


def _source(m: KnownSeen, first_run: int) -> list[str]:
    """The issue once: its title and source, where its signature showed, the workarounds sleuth ships."""
    out = [f"- **{m.id}**: {cell(m.title)}. Source: {m.source} (checked {m.checked})"]
    if m.seen:
        out.append(f"  - seen in the output of #{first_run}: `{m.seen.replace('`', chr(39))}`")
    if m.workarounds:
        out.append(f"  - workarounds sleuth ships: {', '.join(m.workarounds)}")
    return out

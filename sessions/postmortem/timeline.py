"""The postmortem's timeline: every run, remedy, flag, note, fleet comparison, known-issue
match and outside change, one table row each, in the order they happened."""

from __future__ import annotations

from ...hypotheses import Comparison, InvestigationState
from .environment import observed_change
from .text import cell, since

__all__ = ["timeline_section"]

_Row = tuple[tuple[float, int], str]  # ((time, event seq), the row)


def timeline_section(st: InvestigationState, outputs: dict[int, str], t0: float) -> list[str]:
    """The rows sorted by when they happened, then by event order; a run links its full output
    where *outputs* has it."""
    return ["## Timeline", "", "| time | event | by | target | outcome |", "|---|---|---|---|---|",
            *(row for _when, row in sorted(_rows(st, outputs, t0), key=lambda r: r[0])), ""]


def _rows(st: InvestigationState, outputs: dict[int, str], t0: float) -> list[_Row]:
    rows: list[_Row] = []

    def by(seq: int) -> str:  # who wrote the event (the UI, the CLI, an MCP client by its name)
        return cell(st.author(seq))
    for run in st.runs.values():
        verdicts = "; ".join(str(e) for e in st.verdict_per_hypothesis(run.id))
        link = f" ([output]({outputs[run.id]}))" if run.id in outputs else ""
        retest = f" ⟲ retest of #{run.retest_of}" if run.retest_of else ""
        verified = "".join(f"; ✔ {cell(v)}" for v in st.verified_by(run.id))
        rows.append(((run.started_ts, run.started_seq),
                     f"| {since(run.started_ts, t0)} | run #{run.id} {run.probe}{retest}{link} | {by(run.started_seq)} | "
                     f"{run.target} | {run.classification or 'running'}{': ' + cell(verdicts) if verdicts else ''}{verified} |"))
    for app in st.applications.values():
        rows.append(((app.applied_ts, 0), f"| {since(app.applied_ts, t0)} | remedy {app.remedy} applied (#{app.id}) | "
                                          f"{by(app.applied_seq)} | {app.target} | {'active' if app.active else 'reverted'} |"))
    for f in st.flags:
        rows.append(((f.ts, f.seq), f"| {since(f.ts, t0)} | ⚑ {f.kind} | {by(f.seq)} | {f.target} | {cell(f.message)} |"))
    for n in st.notes:
        about = f" (about {n.about})" if n.about else ""
        rows.append(((n.ts, n.seq), f"| {since(n.ts, t0)} | note{about} | {by(n.seq)} | | {cell(n.text)} |"))
    for d in st.comparisons:
        rows.append(((d["ts"], d["seq"]), f"| {since(d['ts'], t0)} | fleet {d['fleet']} compared ({d.get('probe')}) | "
                                          f"{by(d['seq'])} | {len(d.get('runs', {}))} members | "
                                          f"{cell(Comparison.from_dict(d).headline())} |"))
    for m in st.known_matches:
        rows.append(((m.ts, m.seq), f"| {since(m.ts, t0)} | known upstream issue {m.id} matched by #{m.run} | {by(m.seq)} | "
                                    f"{m.target} | {cell(m.package + ' ' + str(m.measured))} in {cell(str(m.affected))} |"))
    for m in st.known_left:
        rows.append(((m.ts, m.seq), f"| {since(m.ts, t0)} | known upstream issue {m.id} no longer applies "
                                    f"(#{m.run}) | {by(m.seq)} | {m.target} | {cell(str(m.why))} |"))
    for seen in st.observations:
        change = observed_change(seen)
        if change is not None:
            how, said = change
            rows.append(((seen.ts, seen.seq), f"| {since(seen.ts, t0)} | state read: {cell(how)} | "
                                              f"{by(seen.seq)} | {seen.read.target} | {cell(said)} |"))
    return rows

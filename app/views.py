"""What the screens say, as plain functions of the folded state: tree labels, the detail of a
selection, the suggested next step, a run's summary. No Textual here (Rich text only), so
the wording is tested without running the app. The timeline, the event log and the retest
questions in words are app/timeline.py's; a stacks run's ranks table is app/hang_view.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text

from ..hypotheses import (
    STATUS_GLYPHS,
    Change,
    Evidence,
    InvestigationState,
)
from ..hypotheses.known import describe_left, describe_match, fix_words
from ..hypotheses.verification import outcome_words
from ..sessions.steps import NextStep, investigation_next_step, next_step
from .hang_view import ranks_table

__all__ = [
    "GLYPHS",
    "NextStep",
    "Selection",
    "detail_text",
    "hypothesis_label",
    "investigation_next_step",
    "next_step",
    "run_label",
    "clock",
    "short_fields",
    "verified_by",
    "run_summary",
    "drift_line",
    "ranks_table",
]

GLYPHS = STATUS_GLYPHS
VERDICT_STYLE = {"supports": "green", "refutes": "red", "inconclusive": "yellow"}
STATUS_STYLE = {
    "open": "",
    "supported": "bold yellow",
    "refuted": "dim strike",
    "confirmed": "bold green",
    "inconclusive": "magenta",
}
CLASS_STYLE = {
    "completed": "green",
    "failed": "red",
    "killed": "red",
    "timed_out": "red",
    "no_result": "yellow",
    "transport": "magenta",
    "declined": "dim",
}


@dataclass(frozen=True)
class Selection:
    """What the tree's cursor is on."""

    kind: str  # "symptom" | "hypothesis" | "probe" | "remedy" | "run" | "none"
    id: str = ""
    hypothesis: str | None = None
    run: int | None = None


def clock(seconds: float) -> str:
    s = max(int(seconds), 0)
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def hypothesis_label(st: InvestigationState, h: str) -> Text:
    status = st.status(h)
    ev = st.evidence_counts(h)
    hyp = st.hypotheses[h]
    text = Text()
    text.append(GLYPHS[status] + " ", style=STATUS_STYLE[status])
    text.append(hyp.title, style=STATUS_STYLE[status])
    if ev["supports"] or ev["refutes"]:
        text.append(f"  {ev['supports']}▲ {ev['refutes']}▼", style="dim")
    for kind, other in hyp.links:
        if kind != "refines":
            text.append(f"  {kind} {st.hypotheses[other].title if other in st.hypotheses else other}", style="italic cyan")
    for src, dst, kind in st.user_links:
        if src == f"hyp:{h}":
            text.append(f"  {kind} {dst.split(':', 1)[1]}", style="italic cyan")
    if st.fixed_by(h):
        text.append("  fixed", style="bold green")
    live = sorted({k.match.id for k in st.known_for(h) if k.applies_now})
    if live:
        text.append(f"  ⓚ {', '.join(live)}", style="blue")
    return text


def run_label(st: InvestigationState, run_id: int) -> Text:
    run = st.runs[run_id]
    cls = run.classification or "running"
    text = Text(f"#{run.id} ", style="bold")
    text.append(cls, style=CLASS_STYLE.get(cls, "yellow"))
    verdicts = [e.verdict for e in st.verdict_per_hypothesis(run_id)]
    if verdicts:
        text.append(" " + ", ".join(sorted(set(verdicts))), style="dim")
    if run.retest_of:
        text.append(f" ⟲#{run.retest_of}", style="bold yellow")
    for said in verified_by(st, run_id):
        text.append(f" ✔ {said}", style="bold green" if ": fixed" in said else "bold red")
    return text


def detail_text(st: InvestigationState, sel: Selection, step: NextStep | None = None) -> Text:
    """The detail pane for the selection: a symptom, a run, or a hypothesis (with the probe or
    remedy selected under it), each said by the section functions below, top to bottom."""
    if sel.kind == "symptom" and sel.id in st.symptoms:
        return _symptom_text(st, sel.id)
    h = sel.hypothesis or (sel.id if sel.kind == "hypothesis" else None)
    if h is None or h not in st.hypotheses:
        if sel.kind == "run" and sel.run in st.runs:
            return _run_text(st, sel.run, step)
        text = Text()
        text.append("Select a symptom or a hypothesis on the left.", style="dim")
        return text
    text = _selected_text(st, sel, h)
    for section in (_hypothesis_text(st, h, sel), _evidence_text(st, h), _known_text(st, h), _remedies_text(st, h)):
        text.append_text(section)
    for f in st.flags:
        if f.hypothesis == h:
            text.append(f"⚑ {f.kind}: {f.message}\n", style="yellow")
    if step is not None:
        text.append_text(_next_text(step))
    return text


def _symptom_text(st: InvestigationState, symptom: str) -> Text:
    sym = st.symptoms[symptom]
    text = Text()
    text.append(f"symptom · {sym.title}\n", style="bold")
    if sym.text:
        text.append(sym.text + "\n", style="red")
    explained = [h for h, hyp in st.hypotheses.items() if symptom in hyp.explains]
    text.append("\nexplained by: ", style="dim")
    text.append(", ".join(f"{st.hypotheses[h].title} ({st.status(h)})" for h in explained) or "nothing yet")
    return text


def _run_text(st: InvestigationState, run_id: int, step: NextStep | None) -> Text:
    run = st.runs[run_id]
    text = Text()
    text.append(f"run #{run.id} · {run.probe} on {run.target}\n", style="bold")
    text.append(f"{run.classification or 'running'}: {run.reason}\n")
    if isinstance(run.result.get("per_rank"), list):
        text.append_text(ranks_table(run.result))
    known = st.known_for_run(run.id)
    for m in known["matches"]:
        text.append("ⓚ " + describe_match(m.to_dict()) + "\n", style="blue")
    for m in known["left"]:
        text.append("ⓚ " + describe_left(m.to_dict()) + "\n", style="blue")
    if step is not None and step.action != "none":
        text.append("next:     ", style="bold dim")
        text.append(step.text, style="bold")
        text.append(f"  [{step.key}]\n", style="bold cyan")
    return text


def _next_text(step: NextStep) -> Text:
    text = Text()
    text.append("next:     ", style="bold dim")
    text.append(step.text, style="bold")
    if step.key:
        text.append(f"  [{step.key}]", style="bold cyan")
    text.append("\n")
    return text


def _selected_text(st: InvestigationState, sel: Selection, h: str) -> Text:
    """What is selected under the hypothesis: a probe (and the hypothesis it tests) or a remedy."""
    text = Text()
    title = st.hypotheses[h].title
    if sel.kind == "probe":
        runs = [r.id for r in st.runs.values() if r.probe == sel.id]
        text.append(f"probe ▷ {sel.id}", style="bold cyan")
        text.append(f" · tests {title}" + (f" · runs {', '.join(f'#{r}' for r in runs[-5:])}" if runs else " · not run yet")
                    + "\n", style="dim")
    elif sel.kind == "remedy":
        applied = [a for a in st.applications.values() if a.remedy == sel.id and a.active]
        text.append(f"remedy ✚ {sel.id}", style="bold cyan")
        text.append(f" · addresses {title}" + (f" · applied (#{applied[-1].id})" if applied else " · not applied") + "\n",
                    style="dim")
    return text


def _hypothesis_text(st: InvestigationState, h: str, sel: Selection) -> Text:
    """The hypothesis: its parent, title and status, its claim, where it came from, what its probes predict."""
    hyp, status, parent = st.hypotheses[h], st.status(h), st.parent(h)
    text = Text()
    text.append(f"{st.hypotheses[parent].title} · " if parent else "", style="dim")
    text.append(hyp.title, style="bold")
    text.append(f"   {status.upper()} {GLYPHS[status]}\n", style=STATUS_STYLE[status] or "bold")
    if hyp.claim:
        text.append(" ".join(hyp.claim.split()) + "\n")
    if hyp.source != "builtin":
        text.append(f"({hyp.source} hypothesis{', ' + hyp.origin if hyp.origin else ''})\n", style="dim")
    for test in hyp.probes:
        if sel.kind == "probe" and test.probe != sel.id:
            continue
        text.append("predicts: ", style="bold dim")
        text.append(f"{test.probe}: {test.predicts or '—'}\n")
    return text


def _evidence_text(st: InvestigationState, h: str) -> Text:
    """The evidence, grouped by the state it was seen in (newest first), with what changed since
    a baseline, then the history when the verdicts changed with the world."""
    text = Text()
    text.append("evidence: ", style="bold dim")
    if not st.evidence.get(h, []):
        text.append("none yet\n", style="dim")
    groups = evidence_by_state(st, h)
    for g, (first, group) in enumerate(groups):
        if len(groups) > 1:  # evidence belongs to the state it was seen in: newest state first
            if g:
                text.append("          ")
            text.append(f"in the state of #{first}{' (latest)' if g == 0 else ''}\n", style="italic dim")
        for e in group:
            run = st.runs[e.run]
            fields = ", ".join(f"{k}={v}" for k, v in sorted(e.fields.items()))[:70]
            text.append("          " if (g or e is not group[0] or len(groups) > 1) else "")
            text.append(f"#{run.id} {run.probe}  ", style="bold")
            text.append(f"{fields}  ")
            text.append(e.verdict + "\n", style=VERDICT_STYLE[e.verdict])
            drift = run.result.get("changes") if run.result.get("has_baseline") else None
            if isinstance(drift, list) and drift:  # what changed since the baseline, as sentences
                text.append(f"            ⇄ {changes_text(drift, most=5)}\n", style="magenta")
    said = history_text(st, h)
    if said:
        text.append("history:  ", style="bold dim")
        text.append(said + "\n", style="italic")
    return text


def _known_text(st: InvestigationState, h: str) -> Text:
    """The known upstream issues matched for the hypothesis: applying now, or no longer."""
    text = Text()
    for i, k in enumerate(st.known_for(h)):
        m = k.match
        text.append("known:    " if i == 0 else "          ", style="bold dim")
        text.append(f"{m.id} ", style="bold blue")
        where = f"matched by #{m.run} on {m.target}" + (" (its signature in the output)" if m.seen else "")
        fix = fix_words(m.to_dict())
        if k.applies_now:
            text.append(f"{m.package} {m.measured} in {m.affected} · {fix} · {where}\n", style="blue")
        else:
            text.append(f"no longer applies on {m.target} ({where}, then the versions left {m.affected}) · {fix}\n",
                        style="dim")
        text.append(f"          {m.title} — {m.source}\n", style="dim")
    return text


def _remedies_text(st: InvestigationState, h: str) -> Text:
    """The hypothesis's remedies (which are applied), and the upgrades made for its known issues."""
    text = Text()
    hyp = st.hypotheses[h]
    if hyp.remedies:
        text.append("remedies: ", style="bold dim")
        applied = {a.remedy: a for a in st.applications.values() if a.active}
        text.append(" · ".join(f"{r} (applied #{applied[r].id})" if r in applied else r for r in hyp.remedies) + "\n")
    for app in st.applications.values():
        if app.upgrade is not None and h in app.upgrade.explains:
            ov = app.upgrade
            text.append("upgrade:  ", style="bold dim")
            said = [outcome_words(v.outcome) for v in app.verified if v.hypothesis == h]
            text.append(f"#{app.id} {ov.package}=={ov.version} in an overlay on {app.target} for {ov.issue}"
                        f"{' (reverted)' if not app.active else ''}"
                        f"{' · verified: ' + said[-1] if said else ' · not verified yet'}\n",
                        style="cyan" if app.active else "dim")
    return text


def evidence_by_state(st: InvestigationState, h: str) -> list[tuple[int, list[Evidence]]]:
    """(first run of the state, its evidence) per state the evidence was seen in, newest first."""
    groups: dict[str | None, list[Evidence]] = {}
    for e in st.evidence.get(h, []):
        groups.setdefault(e.state_key, []).append(e)
    ordered = sorted(groups.values(), key=lambda group: group[-1].seq, reverse=True)
    return [(group[0].run, group) for group in ordered]


def history_text(st: InvestigationState, h: str) -> str:
    """When the evidence changed with the world: "supports at #2; then refutes at #5, in
    another state: the world changed, nothing contradicts"; empty otherwise."""
    history = st.history(h)
    if len(history) < 2 or len({group[0].verdict for _key, group in history}) < 2:
        return ""
    steps = [f"{group[0].verdict} at {', '.join('#' + str(e.run) for e in group)}" for _key, group in history]
    return "; then ".join(steps) + " — each in another state: the world changed, nothing contradicts"


def changes_text(changes: list[dict[str, Any]], most: int = 3) -> str:
    said = [str(Change(c["name"], c.get("before"), c.get("after"))) for c in changes[:most]]
    return "; ".join(said) + (f" and {len(changes) - most} more" if len(changes) > most else "")


def verified_by(st: InvestigationState, run_id: int) -> list[str]:
    """What run *run_id* verified: "verified lock #1 for compile-race: fixed (strong)"."""
    return st.verified_by(run_id)


def short_fields(result: dict[str, Any], most: int = 6) -> str:
    """A run's result in a few words: "drift=0 · has_baseline=yes · fingerprint: torch
    2.11.0+cu128" — scalars first, one level of a nested mapping, no Python reprs."""
    def word(v: Any) -> str:
        return "yes" if v is True else "no" if v is False else "—" if v is None else str(v)

    flat = [f"{k}={word(v)}" for k, v in sorted(result.items()) if not isinstance(v, (dict, list))]
    for k, v in sorted(result.items()):
        if isinstance(v, dict) and v:
            inner = [f"{ik} {word(iv)}" for ik, iv in sorted(v.items()) if not isinstance(iv, (dict, list))][:3]
            flat.append(f"{k}: {', '.join(inner)}" if inner else f"{k}: {len(v)} entries")
        elif isinstance(v, list):
            flat.append(f"{k}: {len(v)} item{'s' * (len(v) != 1)}")
    return " · ".join(flat[:most]) + (f" · {len(flat) - most} more" if len(flat) > most else "")


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n} B"


def drift_line(run: Any) -> Text | None:
    """A fingerprint's verdict against its baseline, said where the eye lands (the run's
    header): what changed, or that nothing did; None for a run without a baseline."""
    if not run.result.get("has_baseline"):
        return None
    base = run.params.get("baseline_run")
    against = f"the baseline #{base}" if base else "the baseline"
    changes = run.result.get("changes")
    if isinstance(changes, list) and changes:
        return Text(f"⇄ {len(changes)} change{'s' * (len(changes) != 1)} since {against}: {changes_text(changes)}",
                    style="bold magenta")
    return Text(f"= {against}: no drift", style="bold green")


def run_summary(st: InvestigationState, run_id: int, lines: int, size: int, running_for: float | None = None) -> Text:
    """What a person needs first about a run: "completed in 36 s · 37 lines · 5.1 KB" (the
    protocol's detail is said after it, by the caller)."""
    run = st.runs[run_id]
    text = Text()
    if run.classification is None:
        took = f" {running_for:.1f} s" if running_for is not None else " at this event"
        text.append(f"running{took}", style="bold yellow")
    else:
        text.append(run.classification.replace("_", " "), style=CLASS_STYLE.get(run.classification, "yellow"))
        if run.duration is not None:
            text.append(f" in {run.duration:.1f} s" if run.duration < 10 else f" in {run.duration:.0f} s")
    text.append(f" · {lines:,} line{'s' * (lines != 1)} · {_size(size)}")
    drift = drift_line(run)
    if drift is not None:  # right after how it ended: a fingerprint is read for this
        text.append(" · ")
        text.append_text(drift)
    return text

"""The postmortem's sections about the hunt itself: the summary (symptom, root cause, the fix
and the run that verified it, time to fix), the hypothesis graph as a Mermaid flowchart, the
evidence per hypothesis, the flags with the time they cost, and each remedy as a diff."""

from __future__ import annotations

from ...hypotheses import InvestigationState, RemedyApplication
from .text import cell, duration, node_id

__all__ = ["evidence_section", "flags_section", "graph_section", "remedies_section", "summary_section"]

_CLASS_DEFS = [  # each status's look in the flowchart (the class a node has is its status)
    "    classDef open fill:#eeeeee,stroke:#999999",
    "    classDef supported fill:#fff3b0,stroke:#c9a000",
    "    classDef refuted fill:#dddddd,stroke:#777777,color:#777777",
    "    classDef confirmed fill:#b7e4c7,stroke:#2d6a4f",
    "    classDef inconclusive fill:#ffe0cc,stroke:#cc6600",
]


def summary_section(st: InvestigationState, t0: float) -> list[str]:
    symptoms = ", ".join(f"**{s.title}** (`{s.text}`)" if s.text else f"**{s.title}**"
                         for s in st.symptoms.values()) or "none recorded"
    confirmed = [h for h in st.hypotheses if st.status(h) == "confirmed"]
    out = ["## Summary", "", f"- Symptom: {symptoms}"]
    out += _fixed(st, confirmed, t0) if confirmed else _not_fixed(st)
    return out + [f"- Runs: {len(st.runs)}; flags: {len(st.flags)}", ""]


def _fixed(st: InvestigationState, confirmed: list[str], t0: float) -> list[str]:
    """Each confirmed root cause, the fix and the run that verified it. A confirmed refinement says
    more than its confirmed parent: the parent is named once, with it."""
    out = []
    for h in [h for h in confirmed if st.parent(h) not in confirmed]:
        app = st.fixed_by(h)
        if app is None:  # confirmed means fixed by an application; never without one
            continue
        verified = next(v for v in app.verified if v.hypothesis == h and v.outcome == "fixed" and v.strong)
        run = st.runs[verified.run]
        specific = [c for c in confirmed if st.parent(c) == h]
        detail = f" (in particular: {', '.join(st.hypotheses[c].title for c in specific)})" if specific else ""
        out.append(f"- Root cause: **{st.hypotheses[h].title}** — confirmed{detail}")
        out.append(f"- Fix: the **{app.remedy}** remedy (application #{app.id}), verified by run #{run.id} "
                   f"({run.probe}: {run.classification})")
        if verified.strength:
            out.append(f"- How strong: {verified.strength}")
        if run.finished_ts:
            out.append(f"- Time from the first event to the verified fix: {duration(run.finished_ts - t0)}")
    return out


def _not_fixed(st: InvestigationState) -> list[str]:
    """No root cause confirmed: what is supported, what is still open, a fix applied but weakly verified."""
    supported = [h for h in st.hypotheses if st.status(h) == "supported"]
    open_ = [h for h in st.hypotheses if st.status(h) in ("open", "inconclusive")]
    out = ["- Root cause: not confirmed (a remedy for it has not been verified)"]
    if supported:
        out.append("- Supported, not yet confirmed: " + ", ".join(supported))
    out.append("- Still open: " + (", ".join(f"{h} ({st.status(h)})" for h in open_) or "nothing"))
    for app in st.applications.values():
        weak = [v for v in app.verified if v.outcome == "fixed" and not v.strong]
        if app.active and weak:
            out.append(f"- The **{app.remedy}** remedy is applied, but its verification is too weak to call it a fix: "
                       f"{weak[-1].strength}")
    return out


def graph_section(st: InvestigationState) -> list[str]:
    """Symptoms, hypotheses (with their status and evidence counts), the links between them and
    the remedies applied, as a Mermaid flowchart."""
    out = ["## Hypotheses", "", "```mermaid", "flowchart LR"]
    for sym in st.symptoms.values():
        out.append(f'    S_{node_id(sym.id)}(["{sym.title}"])')
    for h, hyp in st.hypotheses.items():
        ev = st.evidence_counts(h)
        out.append(f'    H_{node_id(h)}["{hyp.title}<br/>{st.status(h)} {ev["supports"]}▲ {ev["refutes"]}▼"]:::'
                   f'{st.status(h)}')
    for h, hyp in st.hypotheses.items():
        for sym in hyp.explains:
            if sym in st.symptoms:
                out.append(f"    H_{node_id(h)} -->|explains| S_{node_id(sym)}")
        for kind, other in hyp.links:
            if other in st.hypotheses:
                out.append(f"    H_{node_id(h)} -.->|{kind}| H_{node_id(other)}")
    for app in st.applications.values():
        out.append(f'    A{app.id}{{{{"{app.remedy} #{app.id}"}}}}')
        if app.hypothesis in st.hypotheses:
            out.append(f"    A{app.id} -->|addresses| H_{node_id(app.hypothesis)}")
    return out + _CLASS_DEFS + ["```", ""]


def evidence_section(st: InvestigationState) -> list[str]:
    """Each hypothesis: its claim, then each run that tested it once, in run order, with its one verdict."""
    out = ["## Evidence by hypothesis", ""]
    for h, hyp in st.hypotheses.items():
        out += [f"### {hyp.title} — {st.status(h)}", ""]
        if hyp.claim:
            out += [f"> {hyp.claim}", ""]
        entries = st.evidence.get(h, [])
        if not entries:
            out += ["No run has tested it.", ""]
            continue
        out += ["| run | probe | classification | key fields | verdict |", "|---|---|---|---|---|"]
        said = {e.run: e for r in sorted({e.run for e in entries}) for e in st.verdict_per_hypothesis(r)
                if e.hypothesis == h}
        for _rid, e in sorted(said.items()):
            run = st.runs[e.run]
            fields = ", ".join(f"{k}={v}" for k, v in sorted(e.fields.items()))
            out.append(f"| #{run.id} | {run.probe} | {run.classification} | {cell(fields)} | **{e.verdict}** |")
        out.append("")
    return out


def flags_section(st: InvestigationState) -> list[str]:
    """Each flag (a circular retest, an oscillation, a revisit) with the time its run cost."""
    if not st.flags:
        return ["## Flags", "", "None: no check was repeated with nothing changed.", ""]
    out = ["## Flags", "", "| flag | run | earlier | what | time it cost |", "|---|---|---|---|---|"]
    for f in st.flags:
        cost = st.runs[f.run].duration if f.run in st.runs else None
        out.append(f"| {f.kind} | {'#' + str(f.run) if f.run else 'not run'} | {'#' + str(f.earlier) if f.earlier else '—'} | "
                   f"{cell(f.message)} | {duration(cost)} |")
    total = sum((st.runs[f.run].duration or 0) for f in st.flags if f.run in st.runs and f.kind == "circular-retest")
    return out + ["", f"Circular retests cost {duration(total)} in all.", ""]


def remedies_section(st: InvestigationState) -> list[str]:
    out = ["## Remedies", ""]
    if not st.applications:
        out += ["None applied.", ""]
    for app in st.applications.values():
        out += _remedy(app)
    return out


def _remedy(app: RemedyApplication) -> list[str]:
    """One application: active or reverted, an upgrade's overlay in words, each file's diff."""
    out = [f"### {app.remedy} (#{app.id}, {'active' if app.active else 'reverted'})", ""]
    if app.upgrade is not None:
        ov = app.upgrade
        made_by = ov.install_run if ov.has("install_run") else "?"
        out += [f"`{ov.package}=={ov.version}` in an overlay at {ov.path} on {app.target} (made by run "
                f"#{made_by}), to try the fix of {ov.issue}; the environment kept "
                f"{ov.package} {ov.installed_before or '(not installed)'} and was never written. "
                + ("Removing the overlay reverted it." if not app.active else
                   f"Revert: `sleuth upgrade --revert {ov.issue} --target {app.target}`."), ""]
    for f in app.files:
        out += [f"`{f['path']}` — sha256 {f['before_sha'][:12]} → {f['after_sha'][:12]}", "", "```diff",
                f.get("diff", "").rstrip("\n"), "```", ""]
    return out

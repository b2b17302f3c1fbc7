"""The markdown postmortem of an investigation: pure code over the folded state and store.

GitHub-flavoured markdown: summary (symptom, root cause, fix and the run that verified it,
time to fix), the hypothesis graph as a Mermaid flowchart, the timeline, evidence per
hypothesis, flagged circular retests / oscillations / revisits with the time they cost,
the environment across runs, each remedy as a diff, and links to every run's full output
(written beside the markdown by :func:`write_postmortem`).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from ..hypotheses import Change, Comparison, InvestigationState, state_changes
from ..hypotheses.cache_keys import said as cache_said
from ..hypotheses.hang import state_word

__all__ = ["postmortem_markdown", "write_postmortem"]

_CLASS = {"open": "open", "supported": "supported", "refuted": "refuted", "confirmed": "confirmed", "inconclusive": "inconclusive"}


def _t(ts: float, t0: float) -> str:
    s = int(ts - t0)
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _dur(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"


def _node(ident: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", ident)


def _esc(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


_ENV_FIELDS = {"torch": "torch", "cuda": "CUDA", "triton": "triton", "driver": "driver", "python": "Python"}


def _measured(run: Any) -> dict[str, str]:
    """What *run* measured of the environment, field by field; a field it did not measure is
    absent (never a guess). Absence that was measured is said: "not installed", "none found"."""
    read = run.read  # the run's state, typed (hypotheses/payloads.py: StateRead)
    env = (read.env if read is not None else None) or {}
    fp = run.result.get("fingerprint")
    fp = fp if isinstance(fp, dict) else {}
    dists = read.distributions if read is not None and read.measured_distributions else None
    version = fp.get("torch") or (read.torch_reported if read is not None else None)
    cuda = read.torch_cuda if read is not None else None
    out: dict[str, str] = {}
    if version:
        out["torch"] = str(version)
    elif dists is not None:
        out["torch"] = "not installed"
    if fp.get("torch.cuda") or cuda or env.get("cuda"):
        out["cuda"] = str(fp.get("torch.cuda") or cuda or env.get("cuda"))
    elif "torch.cuda" in fp or (version and str(version).endswith("+cpu")):
        out["cuda"] = "none (a CPU build of torch)"
    if fp.get("triton") or (dists or {}).get("triton"):
        out["triton"] = str(fp.get("triton") or (dists or {}).get("triton"))
    elif "triton" in fp or dists is not None:
        out["triton"] = "not installed"
    if "driver" in fp or "driver" in env:
        driver = fp.get("driver") or env.get("driver")
        out["driver"] = str(driver) if driver else "none found"
    if fp.get("python") or env.get("python"):
        out["python"] = str(fp.get("python") or env.get("python"))
    return out


def _environment(st: Any) -> list[str]:
    """One row per state a target was measured in (in the order first seen), each value with
    the run that measured it; "—" only for what no run in that state measured."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for run in st.runs.values():
        if run.state is None and not isinstance(run.result.get("fingerprint"), dict):
            continue
        group = groups.setdefault((run.target, run.state_key or f"run {run.id}"), {"runs": [], "values": {}})
        group["runs"].append(run.id)
        for name, value in _measured(run).items():
            # a fingerprint says more than a state read: it names CUDA, triton, the driver
            if name not in group["values"] or group["values"][name][0] in ("not installed", "none found"):
                group["values"].setdefault(name, (value, run.id))
    out = ["| target | runs in this state | " + " | ".join(_ENV_FIELDS.values()) + " |",
           "|---|---|" + "---|" * len(_ENV_FIELDS)]
    previous: dict[str, dict[str, tuple[str, int]]] = {}
    for (target, _key), group in groups.items():
        values, before = group["values"], previous.get(target)
        cells = []
        for name in _ENV_FIELDS:
            if name not in values:
                cells.append("—")
                continue
            value, rid = values[name]
            changed = before is not None and name in before and before[name][0] != value
            cells.append(f"{'**' + _esc(value) + '**' if changed else _esc(value)} (#{rid})")
        previous[target] = values
        out.append(f"| {target} | " + ", ".join(f"#{r}" for r in group["runs"]) + " | " + " | ".join(cells) + " |")
    return out


def postmortem_markdown(st: InvestigationState, outputs: dict[int, str] | None = None) -> str:
    outputs = outputs or {}
    t0 = st.created_ts or 0.0
    lines: list[str] = [f"# Postmortem: {st.title or 'investigation'}", ""]
    symptoms = ", ".join(f"**{s.title}** (`{s.text}`)" if s.text else f"**{s.title}**" for s in st.symptoms.values()) or "none recorded"
    confirmed = [h for h in st.hypotheses if st.status(h) == "confirmed"]
    # A confirmed refinement says more than its confirmed parent: name the parent once, with it.
    roots = [h for h in confirmed if st.parent(h) not in confirmed]
    lines += ["## Summary", "", f"- Symptom: {symptoms}"]
    if confirmed:
        for h in roots:
            app = st.fixed_by(h)
            if app is None:  # confirmed means fixed by an application; never without one
                continue
            verified = next(v for v in app.verified if v.hypothesis == h and v.outcome == "fixed" and v.strong)
            run = st.runs[verified.run]
            specific = [c for c in confirmed if st.parent(c) == h]
            detail = f" (in particular: {', '.join(st.hypotheses[c].title for c in specific)})" if specific else ""
            lines.append(f"- Root cause: **{st.hypotheses[h].title}** — confirmed{detail}")
            lines.append(f"- Fix: the **{app.remedy}** remedy (application #{app.id}), verified by run #{run.id} ({run.probe}: {run.classification})")
            if verified.strength:
                lines.append(f"- How strong: {verified.strength}")
            if run.finished_ts:
                lines.append(f"- Time from the first event to the verified fix: {_dur(run.finished_ts - t0)}")
    else:
        supported = [h for h in st.hypotheses if st.status(h) == "supported"]
        open_ = [h for h in st.hypotheses if st.status(h) in ("open", "inconclusive")]
        lines.append("- Root cause: not confirmed (a remedy for it has not been verified)")
        if supported:
            lines.append("- Supported, not yet confirmed: " + ", ".join(supported))
        lines.append("- Still open: " + (", ".join(f"{h} ({st.status(h)})" for h in open_) or "nothing"))
        for app in st.applications.values():
            weak = [v for v in app.verified if v.outcome == "fixed" and not v.strong]
            if app.active and weak:
                lines.append(f"- The **{app.remedy}** remedy is applied, but its verification is too weak to call it a fix: "
                             f"{weak[-1].strength}")
    lines += [f"- Runs: {len(st.runs)}; flags: {len(st.flags)}", ""]

    lines += ["## Hypotheses", "", "```mermaid", "flowchart LR"]
    for sym in st.symptoms.values():
        lines.append(f'    S_{_node(sym.id)}(["{sym.title}"])')
    for h, hyp in st.hypotheses.items():
        ev = st.evidence_counts(h)
        lines.append(f'    H_{_node(h)}["{hyp.title}<br/>{st.status(h)} {ev["supports"]}▲ {ev["refutes"]}▼"]:::{_CLASS[st.status(h)]}')
    for h, hyp in st.hypotheses.items():
        for sym in hyp.explains:
            if sym in st.symptoms:
                lines.append(f"    H_{_node(h)} -->|explains| S_{_node(sym)}")
        for kind, other in hyp.links:
            if other in st.hypotheses:
                lines.append(f"    H_{_node(h)} -.->|{kind}| H_{_node(other)}")
    for app in st.applications.values():
        lines.append(f'    A{app.id}{{{{"{app.remedy} #{app.id}"}}}}')
        if app.hypothesis in st.hypotheses:
            lines.append(f"    A{app.id} -->|addresses| H_{_node(app.hypothesis)}")
    lines += [
        "    classDef open fill:#eeeeee,stroke:#999999",
        "    classDef supported fill:#fff3b0,stroke:#c9a000",
        "    classDef refuted fill:#dddddd,stroke:#777777,color:#777777",
        "    classDef confirmed fill:#b7e4c7,stroke:#2d6a4f",
        "    classDef inconclusive fill:#ffe0cc,stroke:#cc6600",
        "```",
        "",
    ]

    lines += ["## Timeline", "", "| time | event | by | target | outcome |", "|---|---|---|---|---|"]
    lines += [row for _when, row in sorted(_timeline(st, outputs, t0), key=lambda r: r[0])]
    lines.append("")

    lines += ["## Evidence by hypothesis", ""]
    for h, hyp in st.hypotheses.items():
        lines.append(f"### {hyp.title} — {st.status(h)}")
        lines.append("")
        if hyp.claim:
            lines.append(f"> {hyp.claim}")
            lines.append("")
        entries = st.evidence.get(h, [])
        if not entries:
            lines += ["No run has tested it.", ""]
            continue
        lines += ["| run | probe | classification | key fields | verdict |", "|---|---|---|---|---|"]
        # each run once, in run order, with its one verdict on this hypothesis
        said = {e.run: e for r in sorted({e.run for e in entries}) for e in st.verdict_per_hypothesis(r) if e.hypothesis == h}
        for _rid, e in sorted(said.items()):
            run = st.runs[e.run]
            fields = ", ".join(f"{k}={v}" for k, v in sorted(e.fields.items()))
            lines.append(f"| #{run.id} | {run.probe} | {run.classification} | {_esc(fields)} | **{e.verdict}** |")
        lines.append("")

    lines += _known_section(st)
    lines += _hang_section(st)

    lines += ["## Flags", ""]
    if not st.flags:
        lines += ["None: no check was repeated with nothing changed.", ""]
    else:
        lines += ["| flag | run | earlier | what | time it cost |", "|---|---|---|---|---|"]
        for f in st.flags:
            cost = st.runs[f.run].duration if f.run in st.runs else None
            lines.append(
                f"| {f.kind} | {'#' + str(f.run) if f.run else 'not run'} | {'#' + str(f.earlier) if f.earlier else '—'} | "
                f"{_esc(f.message)} | {_dur(cost)} |"
            )
        total = sum((st.runs[f.run].duration or 0) for f in st.flags if f.run in st.runs and f.kind == "circular-retest")
        lines += ["", f"Circular retests cost {_dur(total)} in all.", ""]

    lines += ["## Environment across runs", ""] + _environment(st)
    lines += ["", "One row per state each target was measured in; (#N): the run that measured the value; "
              "bold: changed since the previous state of that target; —: no run in that state measured it.", ""]
    changed = _changes(st)
    if changed:
        lines += ["What changed, package by package:", ""] + [f"- {_esc(c)}" for c in changed] + [""]

    lines += _cache_section(st)
    if st.comparisons:
        lines += _fleet_section(st)

    lines += ["## Remedies", ""]
    if not st.applications:
        lines += ["None applied.", ""]
    for app in st.applications.values():
        state = "active" if app.active else "reverted"
        lines.append(f"### {app.remedy} (#{app.id}, {state})")
        lines.append("")
        if app.upgrade is not None:
            ov = app.upgrade
            made_by = ov.install_run if ov.has("install_run") else "?"
            lines += [f"`{ov.package}=={ov.version}` in an overlay at {ov.path} on {app.target} (made by run "
                      f"#{made_by}), to try the fix of {ov.issue}; the environment kept "
                      f"{ov.package} {ov.installed_before or '(not installed)'} and was never written. "
                      + ("Removing the overlay reverted it." if not app.active else
                         f"Revert: `sleuth upgrade --revert {ov.issue} --target {app.target}`."), ""]
        for f in app.files:
            lines += [f"`{f['path']}` — sha256 {f['before_sha'][:12]} → {f['after_sha'][:12]}", "", "```diff", f.get("diff", "").rstrip("\n"), "```", ""]
    lines.append(f"_Written by sleuth on {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC from {st.last_seq} events._")
    return "\n".join(lines) + "\n"


def _cache_section(st: Any) -> list[str]:
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
        res = r.result
        said = res.get("said") or cache_said(res)  # sessions written before "said" was kept
        out.append(f"| #{r.id} | {r.target} | {res.get('hits')} / {res.get('misses')} / {res.get('bypasses')} | "
                   f"{res.get('autograd_hits')} / {res.get('autograd_misses')} | `{_esc(str(res.get('cache_dir')))}` | "
                   f"{_esc(said)} |")
    return out + ["", "Counted by inductor itself (torch._dynamo.utils.counters) in a fresh process; what changed is "
                      "read from inductor's own key parts, compared with the last run on the target that hit.", ""]


def _hang_section(st: Any) -> list[str]:
    """Each stacks run: what it read (the odd ranks with file:line, stuck or slow) and the
    ranks grouped by where their main threads were."""
    runs = [r for r in st.runs.values() if isinstance(r.result.get("per_rank"), list)]
    if not runs:
        return []
    out = ["## Hang", ""]
    for f in st.fleet_hangs:
        res = f.reading or {}
        members = ", ".join(f"{m} (#{r})" for m, r in (f.runs or {}).items())
        out += [f"### fleet {f.fleet}: {res.get('verdict')} — every member's ranks read together ({members})", ""]
        out += [f"- {_esc(str(s))}" for s in res.get("sentences") or []] + [""]
    for run in runs:
        res = run.result
        out += [f"### #{run.id} stacks on {run.target}: {res.get('verdict')} ({res.get('sampled')} of {res.get('ranks')} "
                f"processes sampled, {res.get('samples')} samples in {res.get('window_s')} s)", ""]
        out += [f"- {_esc(str(s))}" for s in res.get("sentences") or []] + [""]
        rows = res.get("per_rank") or []
        if rows:
            odd = {r.get("rank"): r.get("kind") for r in res.get("odd_ranks") or []}
            out += ["| rank | state | main thread | native wait | framework |", "|---|---|---|---|---|"]
            for r in rows[:64]:
                main = r.get("main") or {}
                where = (f"{main.get('function')} at {str(main.get('file') or '').rsplit('/', 1)[-1]}:{main.get('line')}"
                         if main else f"no stacks: {r.get('error') or '?'}")
                wait = r.get("native_wait") or {}
                native = f"{wait.get('frame')} ({wait.get('what')})" if wait else ("none seen" if r.get("native_read")
                                                                                   else "not read")
                fw = r.get("framework") or {}
                framework = f"{fw.get('package')}: {fw.get('function')}" if fw else "—"
                label = f"**{r.get('label')}** ({odd[r.get('label')]})" if r.get("label") in odd else str(r.get("label"))
                out.append(f"| {_esc(label)} | {_esc(state_word(r))} | {_esc(where)} | {_esc(native)} | {_esc(framework)} |")
            if len(rows) > 64:
                out.append(f"| … {len(rows) - 64} more | | | | |")
            out.append("")
    return out


def _known_section(st: Any) -> list[str]:
    """What upstream already knows: each known issue a run matched, per target, with the
    versions measured, the fix (or that none is known), whether it still applies in that
    target's latest state, and the source. Evidence of its own kind: no status rests on it."""
    if not st.known_matches:
        return []
    out = ["## Known upstream issues", "",
           "A match means a run on that target measured a version in the issue's affected range and, where the issue "
           "has a signature, its output showed it. It is what upstream already knows, not an experiment: no status "
           "above rests on it.", "",
           "| issue | target | measured | affected | fix | matched by | applies now | explains |",
           "|---|---|---|---|---|---|---|---|"]
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    first: dict[tuple[str, str], int] = {}
    for m in st.known_matches:
        latest[(m["target"], m["id"])] = m
        first.setdefault((m["target"], m["id"]), m["run"])
    left = {(m["target"], m["id"]): m for m in st.known_left}
    for key, m in latest.items():
        runs = sorted({x["run"] for x in st.known_matches if (x["target"], x["id"]) == key})
        shown = ", ".join(f"#{r}" for r in runs[:6]) + (f" and {len(runs) - 6} more" if len(runs) > 6 else "")
        gone = left.get(key)
        now = (f"no: {gone['why']} (#{gone['run']})" if gone is not None and gone["seq"] > m["seq"] else "yes")
        fix = f"fixed in {m['fixed_in']}" if m.get("fixed_in") else f"none known (checked {m.get('checked')})"
        out.append(f"| [{m['id']}]({m['source']}) | {m['target']} | {m['package']} {m.get('measured')} | "
                   f"{_esc(str(m['affected']))} | {fix} | {shown} | {_esc(now)} | {', '.join(m.get('explains', []))} |")
    out.append("")
    said: set[str] = set()
    for m in latest.values():
        if m["id"] in said:
            continue
        said.add(m["id"])
        out.append(f"- **{m['id']}**: {_esc(m['title'])}. Source: {m['source']} (checked {m.get('checked')})")
        if m.get("seen"):
            out.append(f"  - seen in the output of #{first[(m['target'], m['id'])]}: `{m['seen'].replace('`', chr(39))}`")
        if m.get("workarounds"):
            out.append(f"  - workarounds sleuth ships: {', '.join(m['workarounds'])}")
    out.append("")
    return out


def _fleet_section(st: Any) -> list[str]:
    """Each fleet comparison: who the members were, a member × field matrix of what differs
    (the odd values bold), who could not be reached."""
    out = ["## Fleets", ""]
    for d in st.comparisons:
        c = Comparison.from_dict(d)
        members = list(c.runs) + list(c.unreachable)
        expanded = st.fleets.get(c.fleet, {})
        out += [f"### {c.fleet} · {c.probe}", "", f"Members ({expanded.get('how', 'as recorded')}): "
                + ", ".join(f"{m} (#{c.runs[m]})" if m in c.runs else f"{m} (not reached)" for m in members) + ".", "",
                f"{_esc(c.headline())}.", ""]
        if c.spreads:
            shown = c.spreads[:40]
            out += ["| field | " + " | ".join(_esc(m) for m in c.runs) + " |", "|---|" + "---|" * len(c.runs)]
            for spread in shown:
                cells = []
                for m in c.runs:
                    value = spread.odd[m] if m in spread.odd else spread.majority
                    text = "absent" if value is None else ("another" if spread.name.startswith("state: ") and m in spread.odd
                                                           else "same" if spread.name.startswith("state: ") else str(value))
                    cells.append(f"**{_esc(text)}**" if m in spread.odd else _esc(text))
                out.append(f"| {_esc(spread.name)}{' ⚠' if spread.drift else ''} | " + " | ".join(cells) + " |")
            if len(c.spreads) > len(shown):
                out.append(f"\n… and {len(c.spreads) - len(shown)} more fields (the session has them all).")
            out += ["", f"Bold: not the majority's value; ⚠ a version, build or environment field. "
                        f"{c.agreeing} other fields are the same on every member.", ""]
        for m, why in c.unreachable.items():
            out.append(f"- {_esc(m)}: not reached — {_esc(why)} (no evidence)")
        if c.unreachable:
            out.append("")
    return out


def _timeline(st: Any, outputs: dict[int, str], t0: float) -> list[tuple[tuple[float, int], str]]:
    """((time, event seq), row) for every run, remedy, flag, note and outside change: one
    chronological timeline (the rows are sorted by when they happened, then by event order)."""
    rows: list[tuple[tuple[float, int], str]] = []

    def by(seq: int) -> str:  # who wrote the event (the UI, the CLI, an MCP client by its name)
        return _esc(st.author(seq))
    for run in st.runs.values():
        verdicts = "; ".join(str(e) for e in st.verdict_per_hypothesis(run.id))
        link = f" ([output]({outputs[run.id]}))" if run.id in outputs else ""
        retest = f" ⟲ retest of #{run.retest_of}" if run.retest_of else ""
        verified = "".join(f"; ✔ {_esc(v)}" for v in st.verified_by(run.id))
        rows.append(((run.started_ts, run.started_seq),
                     f"| {_t(run.started_ts, t0)} | run #{run.id} {run.probe}{retest}{link} | {by(run.started_seq)} | {run.target} | "
                     f"{run.classification or 'running'}{': ' + _esc(verdicts) if verdicts else ''}{verified} |"))
    for app in st.applications.values():
        rows.append(((app.applied_ts, 0), f"| {_t(app.applied_ts, t0)} | remedy {app.remedy} applied (#{app.id}) | "
                                          f"{by(app.applied_seq)} | {app.target} | {'active' if app.active else 'reverted'} |"))
    for f in st.flags:
        rows.append(((f.ts, f.seq), f"| {_t(f.ts, t0)} | ⚑ {f.kind} | {by(f.seq)} | {f.target} | {_esc(f.message)} |"))
    for n in st.notes:
        about = f" (about {n['about']})" if n.get("about") else ""
        rows.append(((n["ts"], n["seq"]), f"| {_t(n['ts'], t0)} | note{about} | {by(n['seq'])} | | {_esc(n['text'])} |"))
    for d in st.comparisons:
        rows.append(((d["ts"], d["seq"]), f"| {_t(d['ts'], t0)} | fleet {d['fleet']} compared ({d.get('probe')}) | {by(d['seq'])} | "
                                          f"{len(d.get('runs', {}))} members | {_esc(Comparison.from_dict(d).headline())} |"))
    for m in st.known_matches:
        rows.append(((m["ts"], m["seq"]), f"| {_t(m['ts'], t0)} | known upstream issue {m['id']} matched by #{m['run']} | {by(m['seq'])} | "
                                          f"{m['target']} | {_esc(m['package'] + ' ' + str(m.get('measured')))} in "
                                          f"{_esc(str(m['affected']))} |"))
    for m in st.known_left:
        rows.append(((m["ts"], m["seq"]), f"| {_t(m['ts'], t0)} | known upstream issue {m['id']} no longer applies "
                                          f"(#{m['run']}) | {by(m['seq'])} | {m['target']} | {_esc(m['why'])} |"))
    for seen in st.observations:
        read = seen.read
        if read.changes:
            said = "; ".join(str(Change(c["name"], c.get("before"), c.get("after"))) for c in read.changes)
            how = f"changed by {read.by}" if read.by else "changed outside sleuth"
            rows.append(((seen.ts, seen.seq), f"| {_t(seen.ts, t0)} | state read: {_esc(how)} | "
                                              f"{by(seen.seq)} | {read.target} | {_esc(said)} |"))
    return rows


def _changes(st: Any) -> list[str]:
    """Sentences: each run's environment against the previous run on its target, each
    fingerprint against its baseline, and changes seen by a state read before a run."""
    out: list[tuple[int, str]] = []
    previous: dict[str, Any] = {}
    for run in st.runs.values():
        if run.state is None:
            continue
        before = previous.get(run.target)
        if before is not None:
            found = state_changes(before.state, run.state)
            if found:
                out.append((run.started_seq, f"#{run.id} on {run.target}, since #{before.id}: " + "; ".join(map(str, found))))
        previous[run.target] = run
        drift = run.result.get("changes")
        if run.result.get("has_baseline") and isinstance(drift, list) and drift:
            said = "; ".join(str(Change(c["name"], c.get("before"), c.get("after"))) for c in drift)
            out.append((run.finished_seq or run.started_seq, f"#{run.id} {run.probe} against the baseline #{run.params.get('baseline_run', '?')}: {said}"))
    for seen in st.observations:
        read = seen.read
        if read.changes:
            said = "; ".join(str(Change(c["name"], c.get("before"), c.get("after"))) for c in read.changes)
            how = f"changed by {read.by}" if read.by else "changed outside sleuth"
            out.append((seen.seq, f"read before a run on {read.target}, {how}: {said}"))
    return [text for _seq, text in sorted(out)]


def write_postmortem(inv: Any, path: Path | str) -> Path:
    """Write the markdown to *path* and every run's full output beside it."""
    path = Path(path)
    outdir = path.with_name(path.stem + "-output")
    outdir.mkdir(exist_ok=True)  # beside the file, in a folder that exists (no folder the user did not name)
    links: dict[int, str] = {}
    for run in inv.state.runs:
        target = outdir / f"run-{run}.txt"
        with open(target, "wb") as fh:  # chunk by chunk: a run's output may not fit in memory
            for _stream, _ts, data in inv.store.output_chunks(run):
                fh.write(data)
        links[run] = f"{outdir.name}/{target.name}"
    tmp = path.with_name(f".{path.name}.sleuth-tmp")  # whole or not at all
    try:
        tmp.write_text(postmortem_markdown(inv.state, links), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path

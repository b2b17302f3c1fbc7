"""The investigation over time, in words: the timeline's rows, each event as a sentence
(`sleuth events`, the replay scrubber), and the questions asked before a circular retest
(the UI's dialog and the CLI's prompt). Plain functions of the folded state, Rich text only."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from rich.text import Text

from ..hypotheses import (
    Comparison,
    Event,
    EventKind,
    InvestigationState,
    PreRunCheck,
    ago,
    describe_revisit,
    payloads,
    what_differed,
)
from ..hypotheses.known import describe_left, describe_match, fix_words
from ..hypotheses.records import Observation
from ..hypotheses.verification import describe_verifications
from .views import CLASS_STYLE, changes_text, clock, short_fields, verified_by

__all__ = ["event_sentence", "fleet_retest_prompt", "narrated", "observation_sentence", "retest_prompt", "run_changes", "run_findings",
           "timeline_rows"]


def timeline_rows(st: InvestigationState) -> list[tuple[float, Text, int | None, bool]]:
    """(time, line, run or None, flagged) for runs, flags, remedies and notes, in time order."""
    t0 = st.created_ts or 0.0
    rows: list[tuple[float, int, Text, int | None, bool]] = []

    def by(line: Text, seq: int) -> Text:
        """Who wrote it, where that was not this screen's own kind (the CLI in another
        terminal, an agent through sleuth mcp)."""
        who = st.author(seq)
        if who and who != "ui":
            line.append(f"  · by {who}", style="dim italic")
        return line

    for run in st.runs.values():
        verdicts = "; ".join(str(e) for e in st.verdict_per_hypothesis(run.id))
        line = Text(f"{clock(run.started_ts - t0)} #{run.id} {run.probe:<16} ", style="")
        cls = run.classification or "running"
        line.append(cls, style=CLASS_STYLE.get(cls, "yellow"))
        if verdicts:
            line.append(f"  {verdicts}", style="dim")
        for said in verified_by(st, run.id):
            line.append(f"  ✔ {said}", style="bold green" if ": fixed" in said else "bold red")
        drift = run.result.get("changes") if run.result.get("has_baseline") else None
        if isinstance(drift, list) and drift:
            line.append("  ⇄ " + changes_text(drift), style="magenta")
        sentences = run.result.get("sentences")
        if run.result.get("verdict") and isinstance(sentences, list) and sentences:  # a stacks run's reading
            line.append(f"  ⧗ {run.result['verdict']}: {sentences[0]}",
                        style="green" if run.result.get("healthy") else "bold yellow")
        rows.append((run.started_ts, run.started_seq, by(line, run.started_seq), run.id, False))
    for m in st.known_matches:
        line = Text(f"{clock(m.ts - t0)} ⓚ #{m.run} {m.id} ", style="bold blue")
        line.append(f"{m.package} {m.measured} in {m.affected}: {m.title}", style="blue")
        rows.append((m.ts, m.seq, line, m.run, False))
    for m in st.known_left:
        rows.append((m.ts, m.seq, Text(f"{clock(m.ts - t0)} ⓚ #{m.run} " + describe_left(m.to_dict()), style="blue"),
                     m.run, False))
    for seen in st.observations:
        said = observation_sentence(seen.read)
        if said:
            line = Text(f"{clock(seen.ts - t0)} ◉ {seen.read.target} read: {said}", style="magenta")
            rows.append((seen.ts, seen.seq, line, None, False))
    for f in st.flags:
        line = Text(f"{clock(f.ts - t0)} ⚑ {f.kind}", style="bold yellow")
        line.append(f"  {f.message}", style="yellow")
        rows.append((f.ts, f.seq, by(line, f.seq), f.run, True))
    for app in st.applications.values():
        line = Text(f"{clock(app.applied_ts - t0)} ✚ remedy {app.remedy} #{app.id} applied on {app.target}", style="cyan")
        if not app.active:
            line.append(" (reverted)", style="dim")
        rows.append((app.applied_ts, app.applied_seq, by(line, app.applied_seq), None, False))
    for n in st.notes:
        rows.append((n.ts, n.seq, by(Text(f"{clock(n.ts - t0)} ✎ {n.text}", style="italic"), n.seq), None, False))
    for d in st.comparisons:
        c = Comparison.from_dict(d)
        line = Text(f"{clock(d['ts'] - t0)} ⊞ fleet {c.fleet} · {c.probe}: ", style="bold cyan")
        line.append(c.headline() + "   [m] matrix", style="cyan")
        rows.append((d["ts"], d["seq"], line, None, False))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [(ts, line, run, flagged) for ts, _seq, line, run, flagged in rows]


def observation_sentence(seen: payloads.StateObserved) -> str:
    """What a state read before a run told (``state.observed``): changed outside sleuth, back
    to an earlier state, the same state as a run; empty when it told nothing."""
    said = ""
    if seen.changes:
        how = (f"changed by {seen.by}" if seen.by else
               f"changed since #{seen.since}, the last run of this same check" if seen.since else
               "changed outside sleuth")
        said = f"{how}: {changes_text(seen.changes)}"
    if seen.back_from:
        said += ("; " if said else "") + f"back to the state of #{seen.same_as} (#{seen.back_from} saw another)"
    elif seen.same_as:
        said += ("; " if said else "") + f"the same state as #{seen.same_as}"
    return said


def _own_reads(st: InvestigationState, run: Any) -> list[Observation]:
    """The state read made for *run* (recorded when it told something), not one made for an
    attempt that was refused or declined in between. A session from before runs named their
    read: every read on the target between the previous run's start and this one's."""
    if run.observed_seq is not None:
        return [seen for seen in st.observations if seen.seq == run.observed_seq]
    previous = max((r.started_seq for r in st.runs.values()
                    if r.target == run.target and r.started_seq < run.started_seq), default=0)
    return [seen for seen in st.observations
            if seen.read.target == run.target and previous < seen.seq < run.started_seq]


def run_changes(st: InvestigationState, run_id: int) -> dict[str, list[dict[str, Any]]]:
    """What changed, as data (``probe run --json``): ``drift``, the run's environment against
    its baseline, and ``state_changes``, what its own state read saw changed since sleuth last
    looked — each a list of {"name", "before", "after"} (a distribution with both versions,
    None where it was absent), the sentences of :func:`run_findings` beside them."""
    run = st.runs[run_id]
    drift = run.result.get("changes") if run.result.get("has_baseline") else None
    seen = [c for own in _own_reads(st, run) for c in own.read.changes or ()]
    return {"drift": [_change(c) for c in drift] if isinstance(drift, list) else [],
            "state_changes": [_change(c) for c in seen]}


def _change(c: dict[str, Any]) -> dict[str, Any]:
    return {"name": c.get("name"), "before": c.get("before"), "after": c.get("after")}


def run_findings(st: InvestigationState, run_id: int) -> list[dict[str, Any]]:
    """What sleuth noticed about one run, as the timeline says it: the state read before it
    (changed outside sleuth, back to an earlier state), its flags (circular retest,
    oscillation, revisit) and its drift from the baseline. ``sleuth probe run`` prints these
    (and puts them in --json) so the CLI says what the UI's timeline says."""
    run = st.runs[run_id]
    out: list[dict[str, Any]] = []
    for own in _own_reads(st, run):
        said = observation_sentence(own.read)
        if said:
            out.append({"kind": "state", "text": f"{run.target} read before the run: {said}",
                        "changes": [_change(c) for c in own.read.changes or ()]})
    out += [{"kind": f.kind, "text": f.message} for f in st.flags if f.run == run_id]
    out += [{"kind": "environment", "text": n.text} for n in st.notes
            if n.finding and n.about == f"#{run_id}"]  # said once per target, with the run that showed it
    drift = run.result.get("changes") if run.result.get("has_baseline") else None
    if isinstance(drift, list) and drift:
        out.append({"kind": "drift", "text": f"against the baseline: {changes_text(drift)}",
                    "changes": [_change(c) for c in drift]})
    for rec in run.records:  # what a probe found about the target itself (stacks: no ptrace rights, no py-spy)
        if rec.get("kind") == "finding" and rec.get("text"):
            out.append({"kind": str(rec.get("finding") or "finding"),
                        "text": str(rec["text"]) + (f" — fix: {rec['fix']}" if rec.get("fix") else "")})
    if isinstance(run.result.get("sentences"), list) and run.result.get("verdict"):  # the stacks' reading
        out += [{"kind": "hang", "text": str(said)} for said in run.result["sentences"]]
    if run.result.get("said"):  # the probe's reading in words (compile-cache's counters, the race experiment)
        out.append({"kind": run.probe, "text": str(run.result["said"])})
    known = st.known_for_run(run_id)
    out += [{"kind": "known", "text": describe_match(m.to_dict())} for m in known["matches"]]
    out += [{"kind": "known", "text": describe_left(m.to_dict())} for m in known["left"]]
    return out


def _probe_of(st: InvestigationState, run: Any) -> str:
    info = st.runs.get(run) if isinstance(run, int) else None
    return f"#{run} {info.probe}" if info is not None else f"#{run}"


def _investigation_created(event: Event, st: InvestigationState) -> str:
    return f"investigation started: {payloads.InvestigationCreated.of(event).title}"


def _symptom_added(event: Event, st: InvestigationState) -> str:
    sym = payloads.SymptomAdded.of(event)
    return f"symptom added: {sym.title or sym.id}"


def _symptom_removed(event: Event, st: InvestigationState) -> str:
    return f"symptom removed: {payloads.SymptomRemoved.of(event).id}"


def _hypothesis_added(event: Event, st: InvestigationState) -> str:
    hyp = payloads.HypothesisAdded.of(event)
    return f"hypothesis added: {hyp.title or hyp.id}" + (" (catalog)" if hyp.source == "builtin" else "")


def _hypothesis_removed(event: Event, st: InvestigationState) -> str:
    return f"hypothesis removed: {payloads.HypothesisRemoved.of(event).id}"


def _link_added(event: Event, st: InvestigationState) -> str:
    link = payloads.LinkAdded.of(event)
    return f"linked {str(link.src).split(':', 1)[-1]} {link.kind} {str(link.dst).split(':', 1)[-1]}"


def _run_started(event: Event, st: InvestigationState) -> str:
    started = payloads.RunStarted.of(event)
    params = ", ".join(f"{k}={v}" for k, v in sorted((started.params or {}).items()))
    retest = f" (a retest of #{started.retest_of}, run anyway)" if started.retest_of else ""
    return (f"run #{started.run} {started.probe} started on {started.target}" + (f" ({params})" if params else "")
            + retest)


def _run_finished(event: Event, st: InvestigationState) -> str:
    finished = payloads.RunFinished.of(event)
    info = st.runs.get(finished.run)
    took = f" in {info.duration:.0f} s" if info is not None and info.duration is not None else ""
    reason = f": {finished.reason}" if finished.reason else ""
    return f"{_probe_of(st, finished.run)} {finished.classification}{took}{reason}"


def _evidence_recorded(event: Event, st: InvestigationState) -> str:
    ev = payloads.EvidenceRecorded.of(event)
    said = f"{_probe_of(st, ev.run)} {ev.verdict} {ev.hypothesis}"
    fields = ev.fields or {}
    if ev.rule == "fleet: members disagree":
        said += f": {fields.get('member')} differs from the fleet ({fields.get('differs')})"
    return said


def _remedy_previewed(event: Event, st: InvestigationState) -> str:
    preview = payloads.RemedyPreviewed.of(event)
    blocked = " (blocked)" if preview.blocked else ""
    return f"remedy {preview.remedy} previewed on {preview.path}{blocked}"


def _remedy_applied(event: Event, st: InvestigationState) -> str:
    applied = payloads.RemedyApplied.of(event)
    target = applied.target if applied.has("target") else None
    return f"remedy {applied.remedy} applied on {target} (application #{applied.application})"


def _remedy_reverted(event: Event, st: InvestigationState) -> str:
    reverted = payloads.RemedyReverted.of(event).application
    app = st.applications.get(reverted)
    return f"remedy {app.remedy if app else ''} #{reverted} reverted"


def _application_verified(event: Event, st: InvestigationState) -> str:
    verified = payloads.ApplicationVerified.of(event)
    app = st.applications.get(verified.application)
    [said] = describe_verifications(app.remedy if app else "the remedy", verified.application, [verified.verification])
    return f"{_probe_of(st, verified.run)} {said}"


def _flag_raised(event: Event, st: InvestigationState) -> str:
    flag = payloads.FlagRaised.of(event)
    return f"⚑ {flag.flag}: {flag.message}"


def _note_added(event: Event, st: InvestigationState) -> str:
    note = payloads.NoteAdded.of(event)
    return f"note: {note.text}" + (f" (about {note.about})" if note.about else "")


def _baseline_marked(event: Event, st: InvestigationState) -> str:
    baseline = payloads.BaselineMarked.of(event)
    return f"{_probe_of(st, baseline.run)} marked as the baseline of {baseline.target}"


def _state_observed(event: Event, st: InvestigationState) -> str:
    seen = payloads.StateObserved.of(event)
    said = []
    if seen.changes:
        how = f"changed by {seen.by}" if seen.by else "changed outside sleuth"
        said.append(f"{how}: " + changes_text(seen.changes))
    if seen.back_from:
        said.append(f"back to the state of #{seen.same_as}")
    elif seen.same_as:
        said.append(f"the same state as #{seen.same_as}")
    return f"{seen.target} read" + (": " + "; ".join(said) if said else "")


def _fleet_expanded(event: Event, st: InvestigationState) -> str:
    fleet = payloads.FleetExpanded.of(event)
    members: list[Any] = [m.get("name") for m in fleet.members]
    how = fleet.how if fleet.has("how") else None
    return f"fleet {fleet.fleet}: {len(members)} members ({how}): {', '.join(members[:8])}" + (
        " …" if len(members) > 8 else "")


def _fleet_compared(event: Event, st: InvestigationState) -> str:
    compared = payloads.FleetCompared.of(event)
    probe = compared.probe if compared.has("probe") else None
    return f"fleet {compared.fleet} compared on {probe}: {Comparison.from_dict(event.data).headline()}"


def _known_matched(event: Event, st: InvestigationState) -> str:
    known = payloads.KnownMatched.of(event)
    said = [f"matched {m.id} ({m.package} {m.measured} in {m.affected}; {fix_words(m.to_dict())})"
            for m in known.matches]
    said += [f"{m.id} no longer applies: {m.why}" for m in known.left]
    return f"{_probe_of(st, known.run)} known upstream: " + "; ".join(said)


_SENTENCES: dict[str, Callable[[Event, InvestigationState], str]] = {
    EventKind.INVESTIGATION_CREATED: _investigation_created,
    EventKind.SYMPTOM_ADDED: _symptom_added,
    EventKind.SYMPTOM_REMOVED: _symptom_removed,
    EventKind.HYPOTHESIS_ADDED: _hypothesis_added,
    EventKind.HYPOTHESIS_REMOVED: _hypothesis_removed,
    EventKind.LINK_ADDED: _link_added,
    EventKind.RUN_STARTED: _run_started,
    EventKind.RUN_FINISHED: _run_finished,
    EventKind.EVIDENCE_RECORDED: _evidence_recorded,
    EventKind.REMEDY_PREVIEWED: _remedy_previewed,
    EventKind.REMEDY_APPLIED: _remedy_applied,
    EventKind.REMEDY_REVERTED: _remedy_reverted,
    EventKind.APPLICATION_VERIFIED: _application_verified,
    EventKind.FLAG_RAISED: _flag_raised,
    EventKind.NOTE_ADDED: _note_added,
    EventKind.BASELINE_MARKED: _baseline_marked,
    EventKind.STATE_OBSERVED: _state_observed,
    EventKind.FLEET_EXPANDED: _fleet_expanded,
    EventKind.FLEET_COMPARED: _fleet_compared,
    EventKind.KNOWN_MATCHED: _known_matched,
}


def event_sentence(event: Event, st: InvestigationState) -> str:
    """One event in words, for the replay scrubber and ``sleuth events``; *st* is the state
    folded up to and including it (for the names of runs and remedies)."""
    said = _SENTENCES.get(event.kind)
    return said(event, st) if said is not None else str(event.kind)


def narrated(events: Iterable[Event], keep: Callable[[Event], bool] = lambda _e: True) -> Iterator[tuple[Event, str]]:
    """The event log in words (`sleuth events`, the MCP tool `events`): each event *keep*
    takes, with its sentence told with the names the state had at that event (every event is
    folded as the log is read; only the kept ones are put in words)."""
    st = InvestigationState()
    for e in events:
        st.apply(e)
        if keep(e):
            yield e, event_sentence(e, st)


def retest_prompt(st: InvestigationState, check: PreRunCheck, now: float) -> tuple[str, list[str], str, str]:
    """The circular-retest question in parts: (headline, what matched — a short list, what
    the earlier run said, the question)."""
    earlier = check.retest_of
    points: list[str] = []
    if earlier is None:  # only revisits: a refuted idea tested again in its refuting state
        return ("A refuted hypothesis would be tested again in the state that refuted it:",
                [describe_revisit(h) for h in check.revisits], "", "Run anyway?")
    when = ago(now - earlier.started_ts)
    if check.back_from is not None:
        headline = (f"Back to the state of #{earlier.id} {earlier.probe} on {earlier.target} ({when}), after "
                    f"#{check.back_from.id} saw {what_differed(earlier, check.back_from)}. Same as #{earlier.id}:")
    else:
        how = "measured just now" if check.measured else "as last reported"
        headline = f"This repeats #{earlier.id} {earlier.probe} on {earlier.target} ({when}). The same, {how}:"
    read = earlier.read
    torch = read.torch_reported if read is not None else None
    points.append(f"torch {torch}" if torch else "the same environment")
    if read is not None and read.python:
        points.append(f"Python {read.python}")
    points += ["the same code", "the same caches"]
    points.append("remedies: " + (", ".join(earlier.remedies) or "none") )
    points.append(f"parameters: {', '.join(f'{k}={v}' for k, v in sorted(earlier.params.items())) or 'the defaults'}")
    points += [describe_revisit(h) for h in check.revisits]
    verdicts = "; ".join(str(e) for e in st.verdict_per_hypothesis(earlier.id)) or earlier.reason or "no evidence"
    said = f"#{earlier.id} answered: {earlier.classification} — {verdicts}"
    fields = short_fields(earlier.result)
    if fields:
        said += f"\n{fields}"
    return headline, points, said, "Nothing changed since, so it will say the same. Run anyway?"


def fleet_retest_prompt(st: InvestigationState, same: dict[str, PreRunCheck], total: int,
                        now: float) -> tuple[str, list[str], str, str]:
    """The question before a fleet fan-out where some members would repeat their last run of
    this check in the same state: which members, what each said then, the question."""
    first = next(iter(same.values())).retest_of
    headline = (f"{len(same)} of {total} members are in the same state as at their last "
                f"{first.probe if first else 'run'} (same environment, code, caches, parameters):")
    points = []
    for name, check in list(same.items())[:8]:
        earlier = check.retest_of
        if earlier is None:
            continue
        verdicts = "; ".join(str(e) for e in st.verdict_per_hypothesis(earlier.id)) or earlier.classification
        points.append(f"{name}: as #{earlier.id} ({ago(now - earlier.started_ts)}) — {verdicts}")
    if len(same) > 8:
        points.append(f"… and {len(same) - 8} more")
    others = total - len(same)
    said = f"The other {others} member{'s' if others != 1 else ''} run now either way." if others else ""
    return headline, points, said, ("Nothing changed on these, so they would say the same. Run them again? "
                                    "(Don't run: their earlier answers stand in the comparison.)")

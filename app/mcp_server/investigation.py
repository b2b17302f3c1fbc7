"""The MCP tools over the investigation itself: status (and the next step), hypotheses, the
event log, notes, symptoms, hypotheses and links of one's own, a baseline, and the known
upstream issues that apply to a target now."""

from __future__ import annotations

from typing import Any

from ...hypotheses.known import load_known
from ...probes import builtin_probes
from ...sessions import measure_state
from ...sessions.known_issues import known_rows
from ..errors import HypothesisError, SessionError
from ..timeline import narrated
from ..views import investigation_next_step
from .answers import Events, Hypotheses, Known, Status, Written, state_said
from .tools import READS, TARGET_SAID, WRITES, Context, Sleuth, ToolError, hints, target_of, tool

__all__ = ["TOOLS"]


@tool(READS, Status, target=TARGET_SAID)
def status(sl: Sleuth, target: str = "local", ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
    """The investigation in brief: its hypotheses and their status, the runs and flags, the
    state of `target`, and the one suggested next step."""
    config = sl.config()
    target_of(sl, target)  # an unknown target is refused here, not by the probe_run it suggests
    with sl.open(ctx) as inv:
        st = inv.state
        probes = builtin_probes()
        step = investigation_next_step(st, probes, target, config.params_for)
        return {
            "session": str(inv.path), "title": st.title, "events": st.last_seq, "runs": len(st.runs),
            "symptoms": [{"id": s.id, "title": s.title} for s in st.symptoms.values()],
            "hypotheses": [{"id": h, "status": st.status(h), **st.evidence_counts(h)} for h in st.hypotheses],
            "flags": [{"flag": f.kind, "run": f.run, "message": f.message} for f in st.flags[-10:]],
            "next_step": {"action": step.action, "said": step.text, "probe": step.probe, "remedy": step.remedy,
                          "hypothesis": step.hypothesis, "params": step.params},
            "probes": {p.id: p.title for p in probes.values()},
            "targets": list(config.targets),
            "state": state_said(inv, target),
        }


@tool(READS, Hypotheses)
def hypotheses(sl: Sleuth, ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
    """Every hypothesis with its derived status, evidence counts, probes, remedies, the
    known upstream issues matched, and its refinements nested."""
    with sl.open(ctx) as inv:
        return {"hypotheses": inv.hypotheses_json(), "as_of_event": inv.state.last_seq}


@tool(READS, Events, after="events after this number (0: from the first)",
      limit="the most events (1 to 1000, default 100)")
def events(sl: Sleuth, after: int = 0, limit: int = 100, ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
    """The event log after event `after` (at most `limit`), each in words, with who wrote it
    (ui, cli, mcp:<client>)."""
    most = max(1, min(limit, 1000))
    with sl.open(ctx) as inv:
        out: list[dict[str, Any]] = []
        last = 0

        def keep(e: Any) -> bool:
            nonlocal last
            last = e.seq  # the log's last event, as read now
            return e.seq > after and len(out) < most

        for e, said in narrated(inv.store.events(), keep):
            out.append({"seq": e.seq, "ts": e.ts, "kind": e.kind, "by": e.author, "said": said})
        return {"events": out, "last_event": last, "more": last > (out[-1]["seq"] if out else after)}


@tool(WRITES, Written, text="the note", about="a hypothesis id or a run (#N)")
def note(sl: Sleuth, text: str, about: str | None = None, ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
    """Add a note to the timeline; `about` a hypothesis id or a run (#N)."""
    with sl.open(ctx) as inv:
        inv.add_note(text, about)
        return {"noted": text, "about": about, "event": inv.state.last_seq}


@tool(WRITES, Written, id="the symptom's id (a catalog id such as fx-trace-error fills in the text)",
      title="its title (default: the catalog's, else the id)", text="what was seen, in words")
def symptom_add(sl: Sleuth, id: str, title: str | None = None, text: str | None = None,
                ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
    """Record what was observed (a catalog id such as fx-trace-error fills in the text);
    the catalog's hypotheses that explain it join the investigation."""
    with sl.open(ctx) as inv:
        before = set(inv.state.hypotheses)
        inv.add_symptom(id, title or "", text or "")
        st = inv.state
        return {"added": id, "title": st.symptoms[id].title,
                "explained_by": [h for h, hyp in st.hypotheses.items() if id in hyp.explains],
                "hypotheses_joined": [h for h in st.hypotheses if h not in before], "event": st.last_seq}


@tool(WRITES, Written, id="the hypothesis's id", title="its title (default: the id)", claim="what it claims",
      explains="ids of the symptoms it explains", refines="ids of the hypotheses it refines",
      competes="ids of the hypotheses it competes with", exposes="ids of the hypotheses it exposes")
def hypothesis_add(
    sl: Sleuth,
    id: str, title: str | None = None, claim: str | None = None, explains: list[str] | None = None,
    refines: list[str] | None = None, competes: list[str] | None = None, exposes: list[str] | None = None,
    ctx: Context = None,  # type: ignore[assignment]
) -> dict[str, Any]:
    """Add your own hypothesis, linked to the symptoms it explains and the hypotheses it
    refines, competes with or exposes."""
    links = [("refines", h) for h in refines or []] + [("competes", h) for h in competes or []]
    links += [("exposes", h) for h in exposes or []]
    with sl.open(ctx) as inv:
        inv.add_hypothesis(id, title or id, claim or "", explains or [], links)
        return {"added": id, "status": inv.state.status(id), "event": inv.state.last_seq}


@tool(WRITES, Written, src="the hypothesis linked from",
      kind="refines, competes, exposes (to a hypothesis) or explains (to a symptom)",
      dst="the hypothesis or symptom linked to")
def link(sl: Sleuth, src: str, kind: str, dst: str, ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
    """Link hypothesis `src` to `dst`: refines, competes or exposes another hypothesis, or
    explains a symptom."""
    with sl.open(ctx) as inv:
        inv.link(src, kind, dst)
        return {"linked": [src, kind, dst], "event": inv.state.last_seq}


@tool(hints(idempotent=True), Written, run="the id of a completed run")
def baseline(sl: Sleuth, run: int, ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
    """Mark a completed run as its target's baseline (env-fingerprint compares against it)."""
    with sl.open(ctx) as inv:
        inv.mark_baseline(run)
        return {"baseline": run, "target": inv.state.runs[run].target, "event": inv.state.last_seq}


@tool(hints(read_only=True, idempotent=True, open_world=True), Known, target=TARGET_SAID,
      all="list the whole catalog instead (nothing read on the target)")
async def known(sl: Sleuth, target: str = "local", all: bool = False, ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
    """The known upstream issues that apply to what `target` has now (its versions read
    now), with what this session measured of each fix; `all` lists the whole catalog."""
    try:
        entries = load_known([sl.ws.dir / "known"])
    except (HypothesisError, SessionError) as exc:
        raise ToolError(str(exc)) from None
    tgt = target_of(sl, target)
    if all:
        return {"catalog": [e.to_dict() for e in entries.values()]}
    runner = sl.runner()
    try:
        measured = await measure_state(tgt, runner=runner)
    finally:
        if runner is not None:
            await runner.close()
    if measured.state is None:
        raise ToolError(f"not reached: {measured.unknown}")
    versions = (measured.state.get("env") or {}).get("distributions") or {}
    return {"target": tgt.name, "distributions_read": len(versions),
            "applies": known_rows(sl.ws, entries, tgt.name, versions)}


TOOLS = [status, hypotheses, events, note, symptom_add, hypothesis_add, link, baseline, known]

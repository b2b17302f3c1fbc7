"""The investigation as a fold of events: a networkx graph plus the indexes queries need.

Nothing here is stored: every field is derived from the event sequence, so folding the first
k events gives the investigation exactly as it stood at event k (that is replay). A
hypothesis's status is computed from its evidence and the remedy applications on demand.

Node ids: ``symptom:ID``, ``hyp:ID``, ``probe:ID``, ``remedy:ID``, ``run:N``, ``app:N``.
Edge kinds (the design card's): explains, tests, of, evidence, addresses, applied,
verified-by, and between hypotheses refines, competes, exposes.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import networkx as nx

from .catalog import HypothesisDef, SymptomDef
from .payloads import (
    ApplicationVerified,
    BaselineMarked,
    EvidenceRecorded,
    FlagRaised,
    FleetExpanded,
    FleetHang,
    HypothesisAdded,
    HypothesisRemoved,
    InvestigationCreated,
    KnownMatched,
    LinkAdded,
    NoteAdded,
    RemedyApplied,
    RemedyPreviewed,
    RemedyReverted,
    RunFinished,
    RunStarted,
    StateObserved,
    SymptomAdded,
    SymptomRemoved,
)
from .queries import StateQueries
from .records import Event, EventKind, Evidence, Flag, Observation, RemedyApplication, RunInfo
from .state import canonical, component_keys, state_key_of_parts
from .stored import StateRead
from .verdict import result_fields

__all__ = ["InvestigationState"]
# Only these runs asked their question for real; a transport fault or a kill did not, so a
# repeat of one is not a circular retest.
_ANSWERED = ("completed", "failed", "no_result")


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Folding creates many small objects at once; the cyclic GC would rescan them all again
    and again (measured: more than half of a 100k-event fold). Nothing here makes cycles
    that need it, so it waits until the fold is done."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class InvestigationState(StateQueries):
    """Fold events into the graph and the indexes; the questions asked of them are
    :class:`StateQueries` (queries.py)."""

    def __init__(self) -> None:
        self._graph: nx.MultiDiGraph | None = None  # made when first read (networkx loads then)
        # Node and edge additions wait here until someone reads .graph: folding 100k events
        # should not pay networkx's per-edge cost for a graph nobody looks at.
        self._pending_nodes: list[tuple[str, dict[str, Any]]] = []
        self._pending_edges: list[Any] = []  # (u, v, key, attrs), added in one call
        self.title = ""
        self.created_ts: float | None = None
        self.last_seq = 0
        self.last_ts: float | None = None
        self.authors: dict[int, str] = {}  # event seq -> who wrote it, where recorded ("ui", "cli", "mcp:…")
        self.symptoms: dict[str, SymptomDef] = {}
        self.hypotheses: dict[str, HypothesisDef] = {}
        self.runs: dict[int, RunInfo] = {}
        self.applications: dict[int, RemedyApplication] = {}
        self.flags: list[Flag] = []
        self.previews: dict[tuple[str, str], dict[str, Any]] = {}  # (remedy, file) -> latest preview
        self.notes: list[dict[str, Any]] = []
        self.baselines: dict[str, int] = {}  # target -> run id
        self.evidence: dict[str, list[Evidence]] = {}  # hypothesis -> its evidence, in order
        # hypothesis -> (its latest decisive evidence, the decisive verdicts seen in each state):
        # what status() reads, kept as evidence arrives (status in O(1), not a scan per call)
        self._decisive: dict[str, tuple[Evidence, dict[str | None, set[str]]]] = {}
        self._by_run: dict[int, list[Evidence]] = {}  # run -> its verdicts, in order
        self.user_links: list[tuple[str, str, str]] = []
        self._by_check: dict[tuple[str, str], int] = {}  # (check key, state key) -> latest run
        # (probe, params, target name) -> its latest answered run with a state, whatever the
        # target's definition then: what the world looked like the last time this was asked
        self._last_asked: dict[tuple[str, str, str], int] = {}
        self._polls: set[tuple[str, str]] = set()  # (target, shell command) declared a poll
        self.observations: list[Observation] = []  # state reads before runs that told something
        self.fleets: dict[str, dict[str, Any]] = {}  # fleet -> its latest expansion (who the members were)
        self.comparisons: list[dict[str, Any]] = []  # fleet comparisons, in order (Comparison dicts + seq, ts)
        self._counts: dict[str, dict[str, int]] = {}  # hypothesis -> verdict -> n
        # target -> (last reported state, its part keys); None once a shell run made it unknown
        self._known_state: dict[str, tuple[dict[str, Any], dict[str, str]] | None] = {}
        self._history: dict[tuple[str, str], list[tuple[str, int]]] = {}  # (target, part)
        self._refuted_at: dict[str, str | None] = {}  # hypothesis -> state key of refuting run
        # Known upstream issues matched by runs (known.matched): evidence of its own kind, never
        # an experiment's verdict, so status() does not read it.
        self.known_matches: list[dict[str, Any]] = []  # each match with its run, target, state key
        self.known_left: list[dict[str, Any]] = []  # an entry that stopped applying on a target
        self._known_by_run: dict[int, dict[str, list[dict[str, Any]]]] = {}
        self._known_live: dict[tuple[str, str], bool] = {}  # (target, entry id) -> applies now
        self._known_state_seq: dict[str, int] = {}  # target -> the event that last told its state
        self._overlay_events: list[tuple[str, int, int, str]] = []  # (target, seq, application, made|removed)
        self.fleet_hangs: list[FleetHang] = []  # a stacks fan-out's ranks read together (fleet.hang)
        self._handlers: dict[str, Callable[[Event], None]] = {
            EventKind.INVESTIGATION_CREATED: self._created,
            EventKind.SYMPTOM_ADDED: self._symptom,
            EventKind.HYPOTHESIS_ADDED: self._hypothesis,
            EventKind.SYMPTOM_REMOVED: self._symptom_removed,
            EventKind.HYPOTHESIS_REMOVED: self._hypothesis_removed,
            EventKind.LINK_ADDED: self._link,
            EventKind.RUN_STARTED: self._run_started,
            EventKind.RUN_FINISHED: self._run_finished,
            EventKind.EVIDENCE_RECORDED: self._evidence,
            EventKind.REMEDY_PREVIEWED: self._previewed,
            EventKind.REMEDY_APPLIED: self._applied,
            EventKind.REMEDY_REVERTED: self._reverted,
            EventKind.APPLICATION_VERIFIED: self._verified,
            EventKind.FLAG_RAISED: self._flag,
            EventKind.NOTE_ADDED: self._note,
            EventKind.BASELINE_MARKED: self._baseline,
            EventKind.STATE_OBSERVED: self._observed,
            EventKind.FLEET_EXPANDED: self._fleet_expanded,
            EventKind.FLEET_COMPARED: self._fleet_compared,
            EventKind.KNOWN_MATCHED: self._known_matched,
            EventKind.FLEET_HANG: self._fleet_hang,
        }

    # ---------------------------------------------------------------- folding

    @property
    def graph(self) -> nx.MultiDiGraph:
        """The hypothesis graph (a networkx MultiDiGraph), up to the last folded event."""
        if self._graph is None:
            import networkx

            self._graph = networkx.MultiDiGraph()
        if self._pending_nodes or self._pending_edges:
            with _gc_paused():
                self._graph.add_nodes_from(self._pending_nodes)
                self._graph.add_edges_from(self._pending_edges)
            self._pending_nodes, self._pending_edges = [], []
        return self._graph

    def _node(self, node: str, **attrs: Any) -> None:
        self._pending_nodes.append((node, attrs))

    def _edge(self, u: str, v: str, kind: str, **attrs: Any) -> None:
        attrs["kind"] = kind
        self._pending_edges.append((u, v, kind, attrs))

    @classmethod
    def fold(cls, events: Iterable[Event]) -> InvestigationState:
        state = cls()
        with _gc_paused():
            for event in events:
                state.apply(event)
        return state

    def author(self, seq: int) -> str:
        """Who wrote event *seq* ("" where the session did not record it)."""
        return self.authors.get(seq, "")

    def apply(self, event: Event) -> None:
        handler = self._handlers.get(event.kind)
        if handler is not None:  # unknown kinds come from newer versions: keep, skip
            handler(event)
        if event.author:
            self.authors[event.seq] = event.author
        self.last_seq = event.seq
        self.last_ts = event.ts

    def _created(self, e: Event) -> None:
        self.title = InvestigationCreated.of(e).title
        self.created_ts = e.ts

    def _symptom(self, e: Event) -> None:
        p = SymptomAdded.of(e)
        sym = SymptomDef(p.id, p.title if p.has("title") else p.id, p.text)
        self.symptoms[sym.id] = sym
        self._node(f"symptom:{sym.id}", kind="symptom", title=sym.title)
        for hyp in self.hypotheses.values():
            if sym.id in hyp.explains:
                self._edge(f"hyp:{hyp.id}", f"symptom:{sym.id}", "explains")

    def _hypothesis(self, e: Event) -> None:
        hyp = HypothesisDef.from_dict(HypothesisAdded.of(e).to_dict())
        node = f"hyp:{hyp.id}"
        if hyp.id in self.hypotheses:  # a newer definition replaces the catalog edges (not a link's placeholder)
            stale = [
                (u, v, k) for u, v, k, d in self.graph.out_edges(node, keys=True, data=True) if d.get("catalog")
            ] + [(u, v, k) for u, v, k, d in self.graph.in_edges(node, keys=True, data=True) if d.get("catalog")]
            self.graph.remove_edges_from(stale)
        self.hypotheses[hyp.id] = hyp
        self.evidence.setdefault(hyp.id, [])
        self._node(node, kind="hypothesis", title=hyp.title)
        for sym in hyp.explains:
            if sym in self.symptoms:
                self._edge(node, f"symptom:{sym}", "explains", catalog=True)
        for test in hyp.probes:
            self._node(f"probe:{test.probe}", kind="probe")
            self._edge(f"probe:{test.probe}", node, "tests", prediction=test.predicts, catalog=True)
        for remedy in hyp.remedies:
            self._node(f"remedy:{remedy}", kind="remedy")
            self._edge(f"remedy:{remedy}", node, "addresses", catalog=True)
        for kind, other in hyp.links:
            self._node(f"hyp:{other}")  # may be defined later
            self._edge(node, f"hyp:{other}", kind, catalog=True)

    def _forget_node(self, node: str) -> None:
        graph = self.graph
        if node in graph:
            graph.remove_node(node)
        self.user_links = [(u, v, k) for u, v, k in self.user_links if node not in (u, v)]

    def _symptom_removed(self, e: Event) -> None:
        """A symptom taken back (a typo, a wrong guess): gone from the graph from here on."""
        ident = SymptomRemoved.of(e).id
        self.symptoms.pop(ident, None)
        self._forget_node(f"symptom:{ident}")

    def _hypothesis_removed(self, e: Event) -> None:
        """A hypothesis taken back: gone from the graph; its runs stay (they happened)."""
        h = HypothesisRemoved.of(e).id
        self.hypotheses.pop(h, None)
        self.evidence.pop(h, None)
        self._decisive.pop(h, None)
        self._counts.pop(h, None)
        self._forget_node(f"hyp:{h}")

    def _link(self, e: Event) -> None:
        p = LinkAdded.of(e)
        src, dst, kind = p.src, p.dst, p.kind
        self.user_links.append((src, dst, kind))
        self._edge(src, dst, kind)

    def _run_started(self, e: Event) -> None:
        p = RunStarted.of(e)
        run = RunInfo(
            id=p.run,
            probe=p.probe,
            params=p.params,
            target=p.target,
            kind=p.kind,
            check_key=p.check_key,
            started_ts=e.ts,
            started_seq=e.seq,
            remedies=tuple(p.remedies),
            retest_of=p.retest_of,
            stochastic=bool(p.stochastic),
            observed_seq=p.observed,
        )
        self.runs[run.id] = run
        self._node(f"run:{run.id}", kind="run")
        self._node(f"probe:{run.probe}", kind="probe")
        self._edge(f"run:{run.id}", f"probe:{run.probe}", "of")

    def _run_finished(self, e: Event) -> None:
        p = RunFinished.of(e)
        run = self.runs[p.run]
        run.classification = p.classification
        run.reason = p.reason
        run.records = p.records
        run.result = result_fields(run.records)
        run.lines = p.lines
        run.exit_status = p.exit_status
        run.signal = p.signal
        run.finished_ts = e.ts
        run.finished_seq = e.seq
        self._node(f"run:{run.id}", kind="run", classification=run.classification)
        if p.state is not None:
            reported = e.data["state"]  # the stored object itself, as every reader had it
            run.state, run.read = reported, p.state
            # Keys are computed once, when the run is recorded; older events lack them.
            parts = p.state_parts or component_keys(reported)
            run.state_parts = parts
            run.state_key = p.state_key or state_key_of_parts(parts, run.remedies)
            self._known_state[run.target] = (reported, parts)
            self._known_state_seq[run.target] = e.seq
            for part, key in parts.items():
                history = self._history.setdefault((run.target, part), [])
                if not history or history[-1][0] != key:
                    history.append((key, run.id))
        elif run.kind == "shell" or p.state_unknown:
            before = p.state_before
            if run.kind == "shell" and isinstance(before, dict):
                # the state the command ran in (read just before it): the same command in the
                # same state is the same experiment, a circular retest like any probe's
                parts = p.state_parts or component_keys(before)
                run.state, run.read, run.state_parts = before, StateRead.from_dict(before), parts
                run.state_key = p.state_key or state_key_of_parts(parts, run.remedies)
                if run.params.get("poll"):  # declared a poll: its repeats are meant, never flagged
                    self._polls.add((run.target, str(run.params.get("cmd"))))
            # A shell command may have changed anything (pip install, rm -rf a cache):
            # what we knew of the target's state is no longer known.
            self._known_state[run.target] = None
        if run.classification in _ANSWERED and run.state_key is not None:
            self._by_check[(run.check_key, run.state_key)] = run.id
            self._last_asked[(run.probe, canonical(run.params), run.target)] = run.id

    def _evidence(self, e: Event) -> None:
        p = EvidenceRecorded.of(e)
        entry = Evidence(
            run=p.run,
            hypothesis=p.hypothesis,
            verdict=p.verdict,
            rule=p.rule,
            fields=p.fields,
            seq=e.seq,
            state_key=self.runs[p.run].state_key if p.run in self.runs else None,
        )
        self.evidence.setdefault(p.hypothesis, []).append(entry)
        if entry.verdict != "inconclusive":
            _last, by_state = self._decisive.get(entry.hypothesis, (entry, {}))
            by_state.setdefault(entry.state_key, set()).add(entry.verdict)
            self._decisive[entry.hypothesis] = (entry, by_state)
        self._by_run.setdefault(p.run, []).append(entry)
        counts = self._counts.setdefault(p.hypothesis, {"supports": 0, "refutes": 0, "inconclusive": 0})
        counts[p.verdict] += 1
        self._edge(f"run:{p.run}", f"hyp:{p.hypothesis}", "evidence", verdict=p.verdict)
        if p.verdict == "refutes":
            self._refuted_at[p.hypothesis] = self.runs[p.run].state_key

    def _previewed(self, e: Event) -> None:
        p = RemedyPreviewed.of(e)
        self.previews[(p.remedy, p.path)] = {**e.data, "seq": e.seq}

    def _applied(self, e: Event) -> None:
        p = RemedyApplied.of(e)
        app = RemedyApplication(
            id=p.application,
            remedy=p.remedy,
            hypothesis=p.hypothesis,
            target=p.target,
            files=p.files,
            applied_ts=e.ts,
            upgrade=p.overlay,
            applied_seq=e.seq,
        )
        self.applications[app.id] = app
        if app.upgrade is not None:
            self._overlay_events.append((app.target, e.seq, app.id, "made"))
        self._node(f"remedy:{app.remedy}", kind="remedy")
        self._node(f"app:{app.id}", kind="application")
        self._edge(f"app:{app.id}", f"remedy:{app.remedy}", "applied")

    def _reverted(self, e: Event) -> None:
        app = self.applications[RemedyReverted.of(e).application]
        app.active = False
        if app.upgrade is not None:
            self._overlay_events.append((app.target, e.seq, app.id, "removed"))

    def _verified(self, e: Event) -> None:
        p = ApplicationVerified.of(e)
        app = self.applications[p.application]
        app.verified.append(p.verification)
        self._edge(f"app:{app.id}", f"run:{p.run}", "verified-by", outcome=p.outcome)

    def _flag(self, e: Event) -> None:
        p = FlagRaised.of(e)
        self.flags.append(
            Flag(
                kind=p.flag,
                seq=e.seq,
                ts=e.ts,
                target=p.target,
                message=p.message,
                run=p.run,
                earlier=p.earlier,
                hypothesis=p.hypothesis,
                component=p.component,
            )
        )

    def _note(self, e: Event) -> None:
        p = NoteAdded.of(e)
        note = {"seq": e.seq, "ts": e.ts, "text": p.text, "about": p.about}
        if p.finding:  # sleuth's own note: a finding about a target's environment
            note.update(finding=p.finding, target=p.target)
        self.notes.append(note)

    def _observed(self, e: Event) -> None:
        p = StateObserved.of(e)
        self.observations.append(Observation(e.seq, e.ts, p))
        if p.state is not None:
            state = e.data["state"]  # the stored object itself, as every reader had it
            self._known_state[p.target] = (state, p.state_parts or component_keys(state))
            self._known_state_seq[p.target] = e.seq

    def _fleet_expanded(self, e: Event) -> None:
        self.fleets[FleetExpanded.of(e).fleet] = {**e.data, "seq": e.seq, "ts": e.ts}

    def _fleet_compared(self, e: Event) -> None:
        self.comparisons.append({**e.data, "seq": e.seq, "ts": e.ts})

    def _known_matched(self, e: Event) -> None:
        p = KnownMatched.of(e)
        run = self.runs.get(p.run)
        target = p.target or (run.target if run else "")
        state_key = run.state_key if run else None
        said = self._known_by_run.setdefault(p.run, {"matches": [], "left": []})
        where = {"run": p.run, "target": target, "state_key": state_key, "seq": e.seq, "ts": e.ts}
        for m in p.matches:
            match = {**m.to_dict(), **where}
            self.known_matches.append(match)
            said["matches"].append(match)
            self._known_live[(target, m.id)] = True
            self._node(f"known:{m.id}", kind="known", title=m.title)
            self._edge(f"run:{p.run}", f"known:{m.id}", "matched")
            for h in m.explains:
                if h in self.hypotheses:
                    self._edge(f"known:{m.id}", f"hyp:{h}", "explains")
        for m in p.left:
            left = {**m.to_dict(), **where}
            self.known_left.append(left)
            said["left"].append(left)
            self._known_live[(target, m.id)] = False

    def _fleet_hang(self, e: Event) -> None:
        self.fleet_hangs.append(FleetHang.of(e))

    def _baseline(self, e: Event) -> None:
        p = BaselineMarked.of(e)
        self.baselines[p.target] = p.run

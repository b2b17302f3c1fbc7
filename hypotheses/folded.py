"""What the fold of an investigation's events keeps: every index the queries read, and the
hypothesis graph (networkx), built only when someone reads it.

The handlers that fill these are functions of these indexes and one event, by what the events
are about (fold_definitions.py, fold_runs.py, fold_findings.py);
:class:`~hypotheses.model.InvestigationState` applies them in order.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import networkx as nx

from .catalog import HypothesisDef, SymptomDef
from .payloads import FleetExpanded, FleetHang
from .records import Evidence, Flag, Observation, RemedyApplication, RunInfo
from .stored import KnownAtRun, KnownSeen, Note

__all__ = ["FoldedIndexes"]


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


class FoldedIndexes:
    """The fold's indexes, empty, and the graph's pending additions."""

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
        self.notes: list[Note] = []
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
        self.fleets: dict[str, FleetExpanded] = {}  # fleet -> its latest expansion (who the members were, how)
        self.comparisons: list[dict[str, Any]] = []  # fleet comparisons, in order (Comparison dicts + seq, ts)
        self._counts: dict[str, dict[str, int]] = {}  # hypothesis -> verdict -> n
        # target -> (last reported state, its part keys); None once a shell run made it unknown
        self._known_state: dict[str, tuple[dict[str, Any], dict[str, str]] | None] = {}
        self._history: dict[tuple[str, str], list[tuple[str, int]]] = {}  # (target, part)
        self._refuted_at: dict[str, str | None] = {}  # hypothesis -> state key of refuting run
        # Known upstream issues matched by runs (known.matched): evidence of its own kind, never
        # an experiment's verdict, so status() does not read it.
        self.known_matches: list[KnownSeen] = []  # each match with its run, target, state key
        self.known_left: list[KnownSeen] = []  # an entry that stopped applying on a target
        self._known_by_run: dict[int, KnownAtRun] = {}
        self._known_live: dict[tuple[str, str], bool] = {}  # (target, entry id) -> applies now
        self._known_state_seq: dict[str, int] = {}  # target -> the event that last told its state
        self._overlay_events: list[tuple[str, int, int, str]] = []  # (target, seq, application, made|removed)
        self.fleet_hangs: list[FleetHang] = []  # a stacks fan-out's ranks read together (fleet.hang)

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

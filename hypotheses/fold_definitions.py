"""Folding what an investigation is about: its title, symptoms and hypotheses (added, or taken
back), and the links a user drew between them."""

from __future__ import annotations

from .catalog import HypothesisDef, SymptomDef
from .folded import FoldedIndexes
from .payloads import (
    HypothesisAdded,
    HypothesisRemoved,
    InvestigationCreated,
    LinkAdded,
    SymptomAdded,
    SymptomRemoved,
)
from .records import Event

__all__ = ["DefinitionFolds"]


class DefinitionFolds(FoldedIndexes):
    """The handlers of the definition events (a mixin of InvestigationState)."""

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

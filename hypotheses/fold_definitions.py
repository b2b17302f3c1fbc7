"""Folding what an investigation is about: its title, symptoms and hypotheses (added, or taken
back), and the links a user drew between them."""

from __future__ import annotations

from collections.abc import Callable

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
from .records import Event, EventKind

__all__ = ["HANDLERS"]



def created(st: FoldedIndexes, e: Event) -> None:
    st.title = InvestigationCreated.of(e).title
    st.created_ts = e.ts


def symptom(st: FoldedIndexes, e: Event) -> None:
    p = SymptomAdded.of(e)
    sym = SymptomDef(p.id, p.title if p.has("title") else p.id, p.text)
    st.symptoms[sym.id] = sym
    st._node(f"symptom:{sym.id}", kind="symptom", title=sym.title)
    for hyp in st.hypotheses.values():
        if sym.id in hyp.explains:
            st._edge(f"hyp:{hyp.id}", f"symptom:{sym.id}", "explains")


def hypothesis(st: FoldedIndexes, e: Event) -> None:
    hyp = HypothesisDef.from_dict(HypothesisAdded.of(e).to_dict())
    node = f"hyp:{hyp.id}"
    if hyp.id in st.hypotheses:  # a newer definition replaces the catalog edges (not a link's placeholder)
        stale = [
            (u, v, k) for u, v, k, d in st.graph.out_edges(node, keys=True, data=True) if d.get("catalog")
        ] + [(u, v, k) for u, v, k, d in st.graph.in_edges(node, keys=True, data=True) if d.get("catalog")]
        st.graph.remove_edges_from(stale)
    st.hypotheses[hyp.id] = hyp
    st.evidence.setdefault(hyp.id, [])
    st._node(node, kind="hypothesis", title=hyp.title)
    for sym in hyp.explains:
        if sym in st.symptoms:
            st._edge(node, f"symptom:{sym}", "explains", catalog=True)
    for test in hyp.probes:
        st._node(f"probe:{test.probe}", kind="probe")
        st._edge(f"probe:{test.probe}", node, "tests", prediction=test.predicts, catalog=True)
    for remedy in hyp.remedies:
        st._node(f"remedy:{remedy}", kind="remedy")
        st._edge(f"remedy:{remedy}", node, "addresses", catalog=True)
    for kind, other in hyp.links:
        st._node(f"hyp:{other}")  # may be defined later
        st._edge(node, f"hyp:{other}", kind, catalog=True)


def forget_node(st: FoldedIndexes, node: str) -> None:
    graph = st.graph
    if node in graph:
        graph.remove_node(node)
    st.user_links = [(u, v, k) for u, v, k in st.user_links if node not in (u, v)]


def symptom_removed(st: FoldedIndexes, e: Event) -> None:
    """A symptom taken back (a typo, a wrong guess): gone from the graph from here on."""
    ident = SymptomRemoved.of(e).id
    st.symptoms.pop(ident, None)
    forget_node(st, f"symptom:{ident}")


def hypothesis_removed(st: FoldedIndexes, e: Event) -> None:
    """A hypothesis taken back: gone from the graph; its runs stay (they happened)."""
    h = HypothesisRemoved.of(e).id
    st.hypotheses.pop(h, None)
    st.evidence.pop(h, None)
    st._decisive.pop(h, None)
    st._counts.pop(h, None)
    forget_node(st, f"hyp:{h}")


def link(st: FoldedIndexes, e: Event) -> None:
    p = LinkAdded.of(e)
    src, dst, kind = p.src, p.dst, p.kind
    st.user_links.append((src, dst, kind))
    st._edge(src, dst, kind)


# the handler of each event kind above, by kind (hypotheses/model.py puts the tables together)
HANDLERS: dict[str, Callable[[FoldedIndexes, Event], None]] = {
    EventKind.INVESTIGATION_CREATED: created,
    EventKind.SYMPTOM_ADDED: symptom,
    EventKind.HYPOTHESIS_ADDED: hypothesis,
    EventKind.SYMPTOM_REMOVED: symptom_removed,
    EventKind.HYPOTHESIS_REMOVED: hypothesis_removed,
    EventKind.LINK_ADDED: link,
}

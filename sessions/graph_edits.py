"""Edits of the hypothesis graph, decided without writing anything: the catalog's hypotheses
joining the session (a dormant one when its symptom or its probe arrives), symptoms and
hypotheses added and taken back, and links. Each function returns the events an edit writes,
or refuses it with an InvestigationError (nothing written)."""

from __future__ import annotations

from collections.abc import Callable

from ..hypotheses import LINK_KINDS, Catalog, EventKind, HypothesisDef, InvestigationState
from .errors import InvestigationError
from .new_event import NewEvent

__all__ = [
    "catalog_changes",
    "hypothesis_added",
    "hypothesis_removed",
    "link_added",
    "new_hypothesis",
    "symptom_added",
    "symptom_removed",
    "woken",
]


def hypothesis_added(hyp: HypothesisDef) -> NewEvent:
    """*hyp*'s definition, added to the session (or replacing the one it had)."""
    return NewEvent(EventKind.HYPOTHESIS_ADDED, hyp.to_dict())


def catalog_changes(st: InvestigationState, catalog: Catalog) -> list[HypothesisDef]:
    """The catalog hypotheses the session lacks, or whose definition changed (a dormant one
    waits; the user's own of the same id wins)."""
    changed = []
    for hyp in catalog.hypotheses.values():
        have = st.hypotheses.get(hyp.id)
        if have is None and _dormant(st, hyp, catalog):
            continue  # joins when its symptom is added or its probe runs (woken)
        new = hyp.to_dict()
        if have is not None and {**have.to_dict(), "origin": ""} == {**new, "origin": ""}:
            continue
        if have is not None and have.source == "session":
            continue  # the user's own in this session wins over a file of the same id
        changed.append(hyp)
    return changed


def _dormant(st: InvestigationState, hyp: HypothesisDef, catalog: Catalog) -> bool:
    """A catalog hypothesis that explains only opt-in symptoms, none of them in this session."""
    syms = [catalog.symptoms.get(s) for s in hyp.explains]
    return bool(syms) and all(s is not None and s.opt_in for s in syms) and not any(
        s in st.symptoms for s in hyp.explains)


def woken(st: InvestigationState, catalog: Catalog | None,
          wanted: Callable[[HypothesisDef], bool]) -> list[HypothesisDef]:
    """The catalog's dormant hypotheses *wanted* picks, in the order they join (each after the
    one it refines)."""
    if catalog is None:
        return []
    added: list[HypothesisDef] = []

    def add(h: HypothesisDef) -> None:
        if h.id in st.hypotheses or any(a.id == h.id for a in added):
            return
        for kind, other in h.links:
            if kind == "refines" and other in catalog.hypotheses:
                add(catalog.hypotheses[other])
        added.append(h)

    for hyp in catalog.hypotheses.values():
        if wanted(hyp):
            add(hyp)
    return added


def symptom_added(st: InvestigationState, catalog: Catalog | None, ident: str, title: str = "",
                  text: str = "") -> list[NewEvent]:
    """Symptom *ident* (the catalog's words where the user gave none), then the dormant
    hypotheses that explain it."""
    if ident in st.symptoms:
        raise InvestigationError(f"symptom {ident!r} is already recorded")
    if catalog is not None and ident in catalog.symptoms and not (title or text):
        sym = catalog.symptoms[ident]
        title, text = sym.title, sym.text
    added = NewEvent(EventKind.SYMPTOM_ADDED, {"id": ident, "title": title or ident, "text": text})
    return [added, *map(hypothesis_added, woken(st, catalog, lambda h: ident in h.explains))]


def new_hypothesis(st: InvestigationState, hyp: HypothesisDef) -> NewEvent:
    """The user's own hypothesis (the facade's words as a definition, its source "session"), its
    links and the symptoms it explains checked."""
    if hyp.id in st.hypotheses:
        raise InvestigationError(f"hypothesis {hyp.id!r} already exists")
    for kind, other in hyp.links:
        _need_link(st, kind, "hyp", other)
    for sym in hyp.explains:
        if sym not in st.symptoms:
            raise InvestigationError(f"unknown symptom {sym!r}; known: {', '.join(st.symptoms) or 'none'}")
    return hypothesis_added(hyp)


def _need_link(st: InvestigationState, kind: str, node_kind: str, ident: str) -> None:
    if kind not in (*LINK_KINDS, "explains"):
        raise InvestigationError(f"unknown link kind {kind!r}; use one of {', '.join((*LINK_KINDS, 'explains'))}")
    pool = st.hypotheses if node_kind == "hyp" else st.symptoms
    if ident not in pool:
        what = "hypothesis" if node_kind == "hyp" else "symptom"
        raise InvestigationError(f"unknown {what} {ident!r}; known: {', '.join(pool) or 'none'}")


def symptom_removed(st: InvestigationState, ident: str) -> NewEvent:
    """Symptom *ident* taken back (replay shows it until here)."""
    if ident not in st.symptoms:
        raise InvestigationError(f"no symptom {ident!r}; recorded: {', '.join(st.symptoms) or 'none'}")
    return NewEvent(EventKind.SYMPTOM_REMOVED, {"id": ident})


def hypothesis_removed(st: InvestigationState, ident: str) -> NewEvent:
    """Hypothesis *ident* taken back; not while others refine it."""
    if ident not in st.hypotheses:
        raise InvestigationError(f"no hypothesis {ident!r}; known: {', '.join(st.hypotheses) or 'none'}")
    children = st.children(ident)
    if children:
        raise InvestigationError(f"{', '.join(children)} refine{'s' * (len(children) == 1)} {ident}: remove "
                                 f"{'it' if len(children) == 1 else 'them'} first")
    return NewEvent(EventKind.HYPOTHESIS_REMOVED, {"id": ident})


def link_added(st: InvestigationState, src: str, kind: str, dst: str) -> NewEvent:
    """Hypothesis *src* linked to *dst*: a hypothesis (refines/competes/exposes) or a symptom (explains)."""
    _need_link(st, kind, "hyp", src)
    _need_link(st, kind, "symptom" if kind == "explains" else "hyp", dst)
    prefix = "symptom" if kind == "explains" else "hyp"
    return NewEvent(EventKind.LINK_ADDED, {"src": f"hyp:{src}", "dst": f"{prefix}:{dst}", "kind": kind})

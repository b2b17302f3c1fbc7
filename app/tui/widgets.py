"""The widgets both screens are made of: the title bar, the hypothesis tree, the detail of the
selection, the run pane (header, pinned records, the output view, the search box), the
timeline and the replay scrubber.

Each takes what it shows as arguments (the folded state, the store, the selection, the
time "now") and knows nothing of whether the investigation is live or replayed: the screens
decide that. Wording comes from ``app.views`` (plain functions, tested without Textual).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Input, OptionList, Static, Tree
from textual.widgets.option_list import Option

from ...hypotheses import STATUS_GLYPHS, Event, EventKind, InvestigationState
from ...probes import Target
from ...sessions import Store
from ..timeline import event_sentence, timeline_rows
from ..views import (
    STATUS_STYLE,
    VERDICT_STYLE,
    NextStep,
    Selection,
    clock,
    detail_text,
    hypothesis_label,
    ranks_table,
    run_label,
    run_summary,
)
from .output import OutputView

__all__ = ["DetailPane", "Guide", "GuideStep", "HintBar", "HypothesisTree", "Legend", "LiveRun", "RunPane", "Scrubber", "Timeline", "TitleBar", "TreeColumn"]

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


@dataclass(frozen=True)
class GuideStep:
    """One step of a guided walk-through, and how to tell it was done."""

    text: str | Callable[[InvestigationState], str]  # what to do, or what to do given the hunt so far
    done: Callable[[InvestigationState, Path], bool]

    def says(self, st: InvestigationState) -> str:
        return self.text if isinstance(self.text, str) else self.text(st)


@dataclass(frozen=True)
class Guide:
    title: str
    steps: tuple[GuideStep, ...]


class HintBar(Static):
    """A hint over the panes; a :class:`Guide` shows the first step not done yet (it moves
    on as steps are done). ``h`` hides it."""

    def show(self, hint: str | Guide, st: InvestigationState, root: Path) -> None:
        if isinstance(hint, str):
            self.update(Text.assemble(hint, ("   h hides this", "dim")))
            return
        done = [step.done(st, root) for step in hint.steps]
        todo = next((i for i, d in enumerate(done) if not d), None)
        text = Text()
        text.append(f"{hint.title} ", style="bold")
        text.append(" ".join("✓" if d else "·" for d in done) + "  ", style="green")
        if todo is None:
            text.append("all done — the postmortem is in postmortem.md; q quits.", style="bold green")
        else:
            text.append(f"step {todo + 1} of {len(done)}: ", style="bold")
            text.append(hint.steps[todo].says(st))
        text.append("   h hides this", style="dim")
        self.update(text)


class TreeColumn(Vertical):
    """The tree and its legend: zoomed (z) together."""

    ALLOW_MAXIMIZE = True


class Legend(Static):
    """What each mark of the tree means, always under it: a hypothesis's status in the words and
    colours the detail pane gives it (●supported, ?inconclusive), and the evidence counts
    (▲supports, ▼refutes); on as many lines as the column's width needs."""

    MARKS: tuple[tuple[str, str, str], ...] = (
        *((glyph, status, STATUS_STYLE[status]) for status, glyph in STATUS_GLYPHS.items()),
        ("▲", "supports", VERDICT_STYLE["supports"]),
        ("▼", "refutes", VERDICT_STYLE["refutes"]),
    )

    @classmethod
    def text_for(cls, width: int) -> Text:
        """The legend laid out in lines of at most *width* cells (a mark and its word never split)."""
        text = Text(no_wrap=True, overflow="ellipsis")
        used = 0
        for glyph, word, style in cls.MARKS:
            cells = len(glyph) + len(word)
            if used and used + 2 + cells > width:
                text.append("\n")
                used = 0
            elif used:
                text.append("  ")
                used += 2
            text.append(glyph, style=style or "bold")
            text.append(word, style=style or "")
            used += cells
        return text

    def on_mount(self) -> None:
        self.update(self.text_for(self.content_size.width or 80))

    def on_resize(self) -> None:
        self.update(self.text_for(self.content_size.width or 80))


class TitleBar(Static):
    """sleuth · title · target (its hops) · [mode] · time since the investigation began."""

    def show(self, state: InvestigationState, target: Target, now: float, mode: str = "") -> None:
        elapsed = clock(now - (state.created_ts or now))
        self.update(
            Text.assemble(
                ("sleuth", "bold"),
                f" · {state.title or 'investigation'} · target ",
                (target.name, "bold"),
                f" ({target.describe()})",
                (f" · {mode}" if mode else "", "bold yellow"),
                ("   " + elapsed, "dim"),
            )
        )


class HypothesisTree(Tree[Selection]):
    """Symptoms → hypotheses (refinements nested) → their probes (recent runs) and remedies."""

    def on_mount(self) -> None:
        self.show_root = False
        self.guide_depth = 2

    def show(self, st: InvestigationState, keep: Selection) -> Selection:
        """Rebuild from *st*, keeping *keep* selected (and in view); the selection it ends on."""
        self.clear()
        placed: set[str] = set()
        found = None

        def add_hypothesis(parent: Any, h: str) -> None:
            nonlocal found
            if h in placed:
                return
            placed.add(h)
            sel = Selection("hypothesis", h, hypothesis=h)
            top = st.parent(h) is None
            node = parent.add(hypothesis_label(st, h), data=sel, expand=top and st.status(h) != "refuted" or keep.hypothesis == h)
            if keep == sel:
                found = node
            for child in st.children(h):
                add_hypothesis(node, child)
            hyp = st.hypotheses[h]
            for test in hyp.probes:
                psel = Selection("probe", test.probe, hypothesis=h)
                runs = [r for r in st.runs.values() if r.probe == test.probe]
                label = Text(f"▷ {test.probe}", style="")
                if runs:
                    label.append(f"  {len(runs)} run{'s' if len(runs) > 1 else ''}", style="dim")
                pnode = node.add(label, data=psel, expand=False) if runs else node.add_leaf(label, data=psel)
                if keep == psel:
                    found = pnode
                for run in runs[-5:]:
                    rsel = Selection("run", str(run.id), hypothesis=h, run=run.id)
                    rnode = pnode.add_leaf(run_label(st, run.id), data=rsel)
                    if keep == rsel:
                        found = rnode
            for remedy in hyp.remedies:
                msel = Selection("remedy", remedy, hypothesis=h)
                applied = [a for a in st.applications.values() if a.remedy == remedy and a.active]
                label = Text(f"✚ {remedy}", style="cyan")
                if applied:
                    label.append(f"  applied #{applied[-1].id}", style="bold green")
                mnode = node.add_leaf(label, data=msel)
                if keep == msel:
                    found = mnode

        for sym in st.symptoms.values():
            ssel = Selection("symptom", sym.id)
            snode = self.root.add(Text.assemble(("✖ ", "bold red"), (sym.title, "bold")), data=ssel, expand=True)
            if keep == ssel:
                found = snode
            for h, hyp in st.hypotheses.items():
                if sym.id in hyp.explains and st.parent(h) is None:
                    add_hypothesis(snode, h)
        for h in st.hypotheses:
            if st.parent(h) is None:
                add_hypothesis(self.root, h)
        selection = keep
        if found is None and keep.kind == "none":
            found = next(iter(self.root.children), None)
            if found is not None and found.data is not None:
                selection = found.data
        if found is not None:
            up = found.parent
            while up is not None:  # the selection stays in view, even under a collapsed node
                up.expand()
                up = up.parent
            self.move_cursor(found)
            self.call_after_refresh(self.move_cursor, found)  # again, once the lines are rebuilt
        return selection


class DetailPane(VerticalScroll):
    """The selection's claim, predictions, evidence, remedies, flags and (live) next step."""

    def compose(self) -> ComposeResult:
        yield Static(id="detail")

    def show(self, st: InvestigationState, selection: Selection, step: NextStep | None) -> None:
        self.query_one("#detail", Static).update(detail_text(st, selection, step))


@dataclass(frozen=True)
class LiveRun:
    """A run in progress, as the run header shows it."""

    run: int
    elapsed: float
    spin: int
    progress: str | None = None  # the probe's own word on how far it is ("trial 2 of 5 passed in 41 s · …")


class RunPane(Vertical):
    """One run: a header (classification and why, lines, bytes, folds), its result records
    pinned, the output view, and the search box under it."""

    class SearchAsked(Message):
        """The user submitted a search term."""

        def __init__(self, term: str) -> None:
            super().__init__()
            self.term = term

    def compose(self) -> ComposeResult:
        yield Static(id="run-header")
        yield Static(id="pinned")
        yield OutputView(id="output")
        yield Input(placeholder="search the output (smart case) — enter: find, esc: close", id="search-input", classes="-hidden")

    @property
    def view(self) -> OutputView:
        return self.query_one(OutputView)

    def show_run(self, store: Store | None, run: int | None) -> None:
        self.view.show_run(store if run is not None else None, run)

    def show_header(self, st: InvestigationState, store: Store, run_id: int | None, live: LiveRun | None,
                    empty: str) -> None:
        header = self.query_one("#run-header", Static)
        pinned = self.query_one("#pinned", Static)
        view = self.view
        run = st.runs.get(run_id) if run_id is not None else None
        if run is None:
            header.update(Text(empty, style="dim"))
            pinned.update("")
            return
        text = Text(f"RUN #{run.id} {run.probe} on {run.target} · ", style="bold")
        summary = store.output_summary(run.id)
        if run.classification is None and live is not None and live.run == run.id:
            text.append(SPINNER[live.spin % len(SPINNER)] + " ", style="bold yellow")
        running_for = live.elapsed if live is not None and live.run == run.id else None
        text.append_text(run_summary(st, run.id, view.total, summary["bytes"], running_for))
        if view.stream:
            text.append(f" ({view.stream})", style="magenta")
        if run.classification is None and live is not None and live.run == run.id and live.progress:
            text.append(f" · {live.progress}", style="yellow")
        if run.classification is None and running_for is not None:
            text.append("  [x] cancel", style="bold")
        if view.hits is not None and view.term:
            ordinal, count, more = view.hits
            text.append(f" · {view.term!r} {ordinal}/{count:,}{'+' if more else ''}", style="bold cyan")
            if view.hit_line is not None:
                text.append(f" line {view.hit_line + 1:,}", style="cyan")
        if view.wrap:
            text.append(" · wrapped", style="dim")
        if view.rows != view.total:
            text.append(f" · {view.total - view.rows:,} folded", style="cyan")
        if view.new_since_scroll:
            text.append(f"  ▼ {view.new_since_scroll:,} new lines", style="bold cyan")
        if run.reason and run.classification is not None:  # the protocol's detail, after what a person needs
            text.append(f" · {run.reason}", style="dim")
        header.update(text)
        header.set_class(run.classification is None, "-running")
        records = [r for r in run.records if r.get("kind") not in ("done", "state", "progress")]
        if isinstance(run.result.get("per_rank"), list):  # a stacks run: the ranks × where they wait
            pinned.update(ranks_table(run.result, most=16))
            pinned.set_class(False, "-hidden")
            return
        pin = Text(no_wrap=True, overflow="ellipsis")
        for i, r in enumerate(records[:3]):
            fields = {k: v for k, v in r.items() if k != "kind"}
            # scalars first: they are what rules read; nested values are in the output below
            flat = [f"{k}={json.dumps(v)}" for k, v in sorted(fields.items()) if not isinstance(v, (dict, list))]
            nested = [f"{k}={{…}}" for k, v in sorted(fields.items()) if isinstance(v, (dict, list))]
            pin.append(("\n" if i else "") + f"▸ {r.get('kind', 'record')}  ", style="bold green")
            pin.append("  ".join(flat + nested)[:1000])
        pinned.update(pin)
        pinned.set_class(not records, "-hidden")

    def open_search(self) -> None:
        box = self.query_one("#search-input", Input)
        box.remove_class("-hidden")
        box.focus()

    def close_search(self) -> bool:
        """Hide the search box if it is open; whether it was."""
        box = self.query_one("#search-input", Input)
        if box.has_class("-hidden"):
            return False
        box.add_class("-hidden")
        self.view.focus()
        return True

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "search-input":
            return
        event.stop()
        self.view.focus()
        event.input.add_class("-hidden")
        self.view.search(event.value)


class Timeline(OptionList):
    """Runs, remedies, flags and notes in time order; highlighting a run shows its output."""

    class RunPicked(Message):
        def __init__(self, run: int) -> None:
            super().__init__()
            self.run = run

    def show(self, st: InvestigationState) -> None:
        rows = timeline_rows(st)
        self.clear_options()
        self.add_options(
            [Option(line, id=f"{i}:{run if run is not None else ''}") for i, (_ts, line, run, _flag) in enumerate(rows)]
        )
        if rows:
            self.highlighted = len(rows) - 1

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if event.option.id is None or self.screen.focused is not self:
            return
        run = event.option.id.split(":", 1)[1]
        if run:
            self.post_message(self.RunPicked(int(run)))


class Scrubber(Static):
    """◀ event k of N · time · what it was ▶ — the replay's position."""

    def show(self, events: list[Event], k: int, st: InvestigationState) -> None:
        t0 = events[0].ts if events else 0.0
        text = Text("◀ ", style="bold")
        text.append(f"event {k} of {len(events)}", style="bold")
        if k:
            e = events[k - 1]
            text.append(f" · {clock(e.ts - t0)} · ")
            text.append(event_sentence(e, st)[:110], style="bold yellow" if e.kind == EventKind.FLAG_RAISED else "italic")
        text.append(" ▶", style="bold")
        self.update(text)

"""What both screens share: the layout of the shared widgets, following the tree's selection
and the timeline, showing a run, search, and the postmortem export in a thread worker that
reads its own read-only copy of the session."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Tree

from ....hypotheses import InvestigationState
from ....sessions import Investigation, SessionError, write_postmortem
from ...views import NextStep, Selection
from ..keys import show_keys
from ..output import OutputView
from ..widgets import (
    DetailPane,
    Guide,
    HintBar,
    HypothesisTree,
    Legend,
    LiveRun,
    RunPane,
    Timeline,
    TitleBar,
    TreeColumn,
)

if TYPE_CHECKING:
    from ..app import SleuthApp

__all__ = ["BrowseScreen"]


class BrowseScreen(Screen):
    """Title · tree | detail · run pane · [scrubber] · timeline: reading an investigation."""

    MODE = ""  # shown in the title bar
    EMPTY_RUN = "no run yet"
    # keys both screens have; each screen adds its own (all are in the ? panel)
    COMMON_BINDINGS = [
        Binding("question_mark", "toggle_keys", "keys", id="keys", key_display="?", tooltip="Show or hide every key of the focused pane"),
        Binding("z", "zoom", "zoom", id="zoom", show=False, tooltip="Give the focused pane the whole screen (z or esc: back)"),
        Binding("less_than_sign", "tree_width(-5)", "narrower tree", id="tree.narrower", key_display="<", show=False),
        Binding("greater_than_sign", "tree_width(5)", "wider tree", id="tree.wider", key_display=">", show=False),
        Binding("w", "wrap", "wrap lines", id="wrap", show=False, tooltip="Wrap the output's long lines, or scroll them sideways"),
        Binding("m", "fleet_matrix", "fleet matrix", id="fleet", show=False, tooltip="The latest fleet comparison: members × fields"),
        Binding("h", "toggle_hint", "hint", id="hint", show=False, tooltip="Hide or show the hint over the panes"),
    ]

    if TYPE_CHECKING:  # the screens run only inside SleuthApp: its attributes are typed

        @property
        def app(self) -> SleuthApp: ...

    def __init__(self, hint: str | Guide | None = None) -> None:
        super().__init__()
        self.selection = Selection("none")
        self.shown_run: int | None = None
        self.hint = hint

    # ---------------------------------------------------------------- what it shows

    @property
    def state(self) -> InvestigationState:
        raise NotImplementedError

    @property
    def store(self):
        return self.app.inv.store

    def now(self) -> float:
        """The time the screen speaks of (the title's clock)."""
        return self.app.clock()

    def step(self) -> NextStep | None:
        """The suggested next step shown in the detail; none by default."""
        return None

    def live(self) -> LiveRun | None:
        return None

    @property
    def run_pane(self) -> RunPane:
        return self.query_one(RunPane)

    # ---------------------------------------------------------------- layout

    def compose(self) -> ComposeResult:
        yield TitleBar(id="title")
        if self.hint:
            yield HintBar(id="hint")
        with Horizontal(id="top"):
            with TreeColumn(id="tree-column"):
                yield HypothesisTree("investigation", id="tree")
                yield Legend(id="legend")
            yield DetailPane(id="detail-pane")
        yield RunPane(id="output-pane")
        yield from self.compose_extra()
        yield Timeline(id="timeline")
        yield Footer()

    def compose_extra(self) -> ComposeResult:
        return iter(())

    def on_mount(self) -> None:
        self.refresh_all()
        self.show_output(max(self.state.runs, default=None))
        self.query_one(HypothesisTree).focus()

    # ---------------------------------------------------------------- refresh

    def refresh_all(self) -> None:
        self.selection = self.query_one(HypothesisTree).show(self.state, self.selection)
        self.update_detail()
        self.query_one(Timeline).show(self.state)
        self.update_title()
        self.update_run_header()
        if self.hint:
            self.query_one(HintBar).show(self.hint, self.state, self.app.workspace.root)

    def action_toggle_hint(self) -> None:
        for bar in self.query(HintBar):
            bar.set_class(not bar.has_class("-hidden"), "-hidden")

    def update_detail(self) -> None:
        self.query_one(DetailPane).show(self.state, self.selection, self.step())

    def update_title(self) -> None:
        self.query_one(TitleBar).show(self.state, self.app.target, self.now(), self.MODE)

    def update_run_header(self) -> None:
        self.run_pane.show_header(self.state, self.store, self.shown_run, self.live(), self.EMPTY_RUN)

    def show_output(self, run: int | None) -> None:
        self.shown_run = run
        self.run_pane.show_run(self.store, run)
        self.update_run_header()

    # ---------------------------------------------------------------- events

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        sel = event.node.data
        if sel is None or event.node is not event.control.cursor_node:
            return  # a stale highlight from a rebuild of the tree
        self.selection = sel
        self.update_detail()
        if sel.kind == "run" and sel.run is not None:
            self.show_output(sel.run)
        elif sel.kind == "probe":
            runs = [r.id for r in self.state.runs.values() if r.probe == sel.id]
            if runs and self.shown_run not in runs:
                self.show_output(runs[-1])

    def on_timeline_run_picked(self, event: Timeline.RunPicked) -> None:
        if event.run in self.state.runs and event.run != self.shown_run:
            self.show_output(event.run)

    def on_output_view_changed(self, _event: OutputView.Changed) -> None:
        self.update_run_header()

    def on_output_view_search_result(self, event: OutputView.SearchResult) -> None:
        if event.line is None:
            self.notify(f"{event.term!r}: not in this run's output", severity="warning")
        elif event.wrapped:
            self.notify(f"{event.term!r}: wrapped around, line {event.line + 1:,}")

    # ---------------------------------------------------------------- actions both screens have

    def action_search(self) -> None:
        self.run_pane.open_search()

    def action_focus_output(self) -> None:
        self.run_pane.view.focus()

    def key_escape(self) -> None:
        if self.run_pane.close_search():
            return
        if self.maximized is not None:
            self.minimize()

    def action_toggle_keys(self) -> None:
        show_keys(self)

    def action_zoom(self) -> None:
        if self.maximized is not None:
            self.minimize()
        elif self.focused is not None:
            target = self.focused
            if isinstance(target, Tree):
                target = self.query_one(TreeColumn)
            self.maximize(target, container=False)

    def action_tree_width(self, delta: int) -> None:
        column = self.query_one("#tree-column")
        now = column.outer_size.width or 40
        column.styles.width = max(20, min(now + delta, self.size.width - 30))

    def action_fleet_matrix(self) -> None:
        from ....hypotheses import Comparison
        from ..dialogs import FleetMatrix

        comparisons = self.state.comparisons
        if not comparisons:
            self.notify("no fleet comparison yet: pick a fleet target (t) and run a probe (r)", severity="warning")
            return
        shown = self.shown_run
        mine = [d for d in comparisons if shown in d.get("runs", {}).values()]
        d = (mine or comparisons)[-1]
        expanded = self.state.fleets.get(d["fleet"])
        how = expanded.how if expanded is not None else ""
        self.app.push_screen(FleetMatrix(Comparison.from_dict(d), how))

    def action_wrap(self) -> None:
        self.run_pane.view.action_toggle_wrap()

    def action_export(self) -> None:
        self.notify("writing postmortem.md …")
        self._export(self.app.inv.path, self.app.workspace.root / "postmortem.md")

    @work(thread=True, exclusive=True, group="export")
    def _export(self, session: Path, out: Path) -> None:
        # its own read-only view of the session: the live one goes on meanwhile
        snapshot = Investigation.replay(session)
        try:
            written = write_postmortem(snapshot, out)
        except (SessionError, OSError) as exc:
            self.app.call_from_thread(self.notify, f"postmortem not written: {exc}", severity="error")
            return
        finally:
            snapshot.close()
        self.app.call_from_thread(self.notify, f"wrote {written} (full outputs in {written.stem}-output/)")
        self.app.call_from_thread(self.refresh_all)  # a guide's last step may be this

    def selection_commands(self) -> list[tuple[str, str, Any]]:
        """(name, help, callback) for the command palette: what the selection allows now."""
        return [
            ("Export the postmortem", "postmortem.md with each run's output", self.action_export),
            ("Search the output", "/ then n / N", self.action_search),
        ]

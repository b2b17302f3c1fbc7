"""The investigation screen (live: runs, remedies, edits) and the replay screen (the same
views, read-only, with a scrubber over the events).

Everything goes through ``sessions``: the screen reads the folded state and the store, and
asks :class:`sessions.Investigation` (and ``run_probe`` / the remedy functions) to change
anything. Probes run in async workers on the app's loop; the output view polls the store.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from rich.text import Text
from sleuth.hypotheses import Event, EventKind, InvestigationState
from sleuth.sessions import (
    CircularRetest,
    Investigation,
    InvestigationError,
    apply_remedy,
    plan_remedy,
    remedy_file,
    request_for_probe,
    revert_remedy,
    run_probe,
    run_to_verify,
    write_postmortem,
)
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, OptionList, Static, Tree
from textual.widgets.option_list import Option

from ..errors import HypothesisError, ProbesError, SessionError
from ..views import (
    CLASS_STYLE,
    NextStep,
    Selection,
    clock,
    detail_text,
    hypothesis_label,
    next_step,
    run_label,
    timeline_rows,
)
from .dialogs import AddDialog, ConfirmDialog, RemedyDialog, RetestDialog, TargetDialog
from .output import OutputView

__all__ = ["InvestigationScreen", "ReplayScreen"]

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n} B"


class InvestigationScreen(Screen):
    """Tree · detail · output · timeline. Keys act on the tree's selection."""

    BINDINGS = [
        Binding("r", "run", "run", id="run", tooltip="Run the selected probe (or the suggested next step) on the target"),
        Binding("x", "cancel_run", "cancel", id="cancel", tooltip="Cancel the probe that is running"),
        Binding("f", "remedy", "remedy", id="remedy", tooltip="Preview the selected remedy's diff; apply or revert it"),
        Binding("slash", "search", "search", id="search", key_display="/", tooltip="Search the output (n / N: next, previous)"),
        Binding("e", "export", "export", id="export", tooltip="Write postmortem.md (and each run's full output beside it)"),
        Binding("t", "target", "target", id="target", tooltip="Pick the target probes run on"),
        Binding("a", "add", "add", id="add", tooltip="Add a note, hypothesis, symptom or link"),
        Binding("b", "baseline", "baseline", id="baseline", show=False, tooltip="Mark the shown run as its target's baseline"),
        Binding("o", "focus_output", "output", id="focus_output", show=False, tooltip="Move to the output view"),
        Binding("q", "app.quit", "quit", id="quit", tooltip="Quit (the session is saved as you go)"),
    ]
    READONLY = False

    def __init__(self, hint: str | None = None) -> None:
        super().__init__()
        self.selection = Selection("none")
        self.shown_run: int | None = None
        self.live_run: int | None = None
        self.live_started = 0.0
        self._cancel: asyncio.Event | None = None
        self._spin = 0
        self.hint = hint

    # ---------------------------------------------------------------- data

    @property
    def inv(self) -> Investigation:
        return self.app.inv

    @property
    def state(self) -> InvestigationState:
        return self.app.inv.state

    @property
    def store(self):
        return self.app.inv.store

    # ---------------------------------------------------------------- layout

    def compose(self) -> ComposeResult:
        yield Static(id="title")
        if self.hint:
            yield Static(self.hint, id="hint")
        with Horizontal(id="top"):
            yield Tree("investigation", id="tree")
            with VerticalScroll(id="detail-pane"):
                yield Static(id="detail")
        with Vertical(id="output-pane"):
            yield Static(id="run-header")
            yield Static(id="pinned")
            yield OutputView(id="output")
            yield Input(placeholder="search the output (smart case) — enter: find, esc: close", id="search-input", classes="-hidden")
        yield from self.compose_scrubber()
        yield OptionList(id="timeline")
        yield Footer()

    def compose_scrubber(self) -> ComposeResult:
        return iter(())

    def on_mount(self) -> None:
        tree = self.query_one(Tree)
        tree.show_root = False
        tree.guide_depth = 2
        self.refresh_all()
        latest = max(self.state.runs, default=None)
        self.show_output(latest)
        tree.focus()
        self.set_interval(0.1, self._tick)

    # ---------------------------------------------------------------- refresh

    def refresh_all(self) -> None:
        self._build_tree()
        self._update_detail()
        self._update_timeline()
        self._update_title()
        self._update_run_header()

    def _build_tree(self) -> None:
        st = self.state
        tree: Tree[Selection] = self.query_one(Tree)
        keep = self.selection
        tree.clear()
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
            snode = tree.root.add(Text.assemble(("✖ ", "bold red"), (sym.title, "bold")), data=ssel, expand=True)
            if keep == ssel:
                found = snode
            for h, hyp in st.hypotheses.items():
                if sym.id in hyp.explains and st.parent(h) is None:
                    add_hypothesis(snode, h)
        for h in st.hypotheses:
            if st.parent(h) is None:
                add_hypothesis(tree.root, h)
        if found is None and keep.kind == "none":
            found = next(iter(tree.root.children), None)
            if found is not None:
                self.selection = found.data
        if found is not None:
            up = found.parent
            while up is not None:  # the selection stays in view, even under a collapsed node
                up.expand()
                up = up.parent
            tree.move_cursor(found)
            self.call_after_refresh(tree.move_cursor, found)  # again, once the lines are rebuilt

    def _step(self) -> NextStep:
        return next_step(self.state, self.selection.hypothesis, self.app.probes, self.app.target.name, self.app.config.params_for)

    def _update_detail(self) -> None:
        step = None if self.READONLY else self._step()
        self.query_one("#detail", Static).update(detail_text(self.state, self.selection, step))

    def _update_timeline(self) -> None:
        timeline = self.query_one("#timeline", OptionList)
        rows = timeline_rows(self.state)
        timeline.clear_options()
        timeline.add_options(
            [Option(line, id=f"{i}:{run if run is not None else ''}") for i, (_ts, line, run, _flag) in enumerate(rows)]
        )
        if rows:
            timeline.highlighted = len(rows) - 1

    def _update_title(self) -> None:
        st = self.state
        target = self.app.target
        elapsed = clock(self.app.clock() - (st.created_ts or self.app.clock()))
        mode = " · REPLAY (read-only)" if self.READONLY else ""
        self.query_one("#title", Static).update(
            Text.assemble(
                ("sleuth", "bold"),
                f" · {st.title or 'investigation'} · target ",
                (target.name, "bold"),
                f" ({target.describe()})",
                (mode, "bold yellow"),
                ("   " + elapsed, "dim"),
            )
        )

    def _update_run_header(self) -> None:
        header = self.query_one("#run-header", Static)
        pinned = self.query_one("#pinned", Static)
        view = self.query_one(OutputView)
        st = self.state
        run = st.runs.get(self.shown_run) if self.shown_run is not None else None
        if run is None:
            header.update(Text("no run yet — select a probe and press r", style="dim"))
            pinned.update("")
            return
        text = Text(f"RUN #{run.id} {run.probe} on {run.target} · ", style="bold")
        summary = self.store.output_summary(run.id)
        lines = f"{view.total:,} lines" + (f" ({view.stream})" if view.stream else "")
        if run.classification is None:
            spin = SPINNER[self._spin % len(SPINNER)]
            elapsed = time.monotonic() - self.live_started if self.live_run == run.id else 0.0
            text.append(f"{spin} running {elapsed:.1f} s", style="bold yellow")
            text.append(f" · {lines} · {_size(summary['bytes'])}  [x] cancel")
        else:
            text.append(run.classification, style=CLASS_STYLE.get(run.classification, "yellow"))
            text.append(f" · {run.reason}" if run.reason else "")
            text.append(f" · {lines} · {_size(summary['bytes'])}", style="dim")
        if view.rows != view.total:
            text.append(f" · {view.total - view.rows:,} folded", style="cyan")
        if view.new_since_scroll:
            text.append(f"  ▼ {view.new_since_scroll:,} new lines", style="bold cyan")
        header.update(text)
        header.set_class(run.classification is None, "-running")
        records = [r for r in run.records if r.get("kind") not in ("done", "state")]
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

    def show_output(self, run: int | None) -> None:
        self.shown_run = run
        view = self.query_one(OutputView)
        view.show_run(self.store if run is not None else None, run)
        self._update_run_header()

    def _tick(self) -> None:
        self._spin += 1
        if self.live_run is not None and self.shown_run == self.live_run:
            self.query_one(OutputView).poll()
            self._update_run_header()
        if self._spin % 10 == 0:
            self._update_title()

    # ---------------------------------------------------------------- events

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        sel = event.node.data
        if sel is None or event.node is not event.control.cursor_node:
            return  # a stale highlight from a rebuild of the tree
        self.selection = sel
        self._update_detail()
        if sel.kind == "run" and sel.run is not None:
            self.show_output(sel.run)
        elif sel.kind == "probe":
            runs = [r.id for r in self.state.runs.values() if r.probe == sel.id]
            if runs and self.shown_run not in runs:
                self.show_output(runs[-1])

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id != "timeline" or event.option.id is None:
            return
        run = event.option.id.split(":", 1)[1]
        if run and int(run) in self.state.runs and int(run) != self.shown_run and self.focused is event.option_list:
            self.show_output(int(run))

    def on_output_view_changed(self, _event: OutputView.Changed) -> None:
        self._update_run_header()

    def on_output_view_search_result(self, event: OutputView.SearchResult) -> None:
        if event.line is None:
            self.notify(f"{event.term!r}: not in this run's output", severity="warning")
        elif event.wrapped:
            self.notify(f"{event.term!r}: wrapped around, line {event.line + 1:,}")

    # ---------------------------------------------------------------- search

    def action_search(self) -> None:
        box = self.query_one("#search-input", Input)
        box.remove_class("-hidden")
        box.focus()

    def action_focus_output(self) -> None:
        self.query_one(OutputView).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "search-input":
            return
        view = self.query_one(OutputView)
        view.focus()
        event.input.add_class("-hidden")
        view.search(event.value)

    def key_escape(self) -> None:
        box = self.query_one("#search-input", Input)
        if not box.has_class("-hidden"):
            box.add_class("-hidden")
            self.query_one(OutputView).focus()

    # ---------------------------------------------------------------- runs

    def _probe_for_selection(self) -> str | None:
        sel = self.selection
        if sel.kind == "probe":
            return sel.id
        if sel.kind == "run" and sel.run in self.state.runs:
            return self.state.runs[sel.run].probe
        step = self._step()
        return step.probe if step.action == "run" else None

    def action_run(self) -> None:
        if self.READONLY:
            self.notify("replay is read-only", severity="warning")
            return
        if self.live_run is not None:
            self.notify(f"run #{self.live_run} is still going; [x] cancels it", severity="warning")
            return
        probe = self._probe_for_selection()
        if probe is None or probe not in self.app.probes:
            self.notify("select a probe (▷) to run, or a hypothesis with a next step", severity="warning")
            return
        self.start_probe(probe)

    def start_probe(self, probe: str) -> None:
        target = self.app.target
        params = self.app.config.params_for(probe)
        request = request_for_probe(self.inv, self.app.probes[probe], target, params)
        check = self.inv.check_before_run(request.probe, request.params, target.name)
        if not check.flagged:
            self._run_worker(request, False)
            return
        message = self.inv.describe_check(check, now=self.app.clock())
        earlier = ""
        if check.retest_of is not None:
            e = check.retest_of
            fields = ", ".join(f"{k}={v}" for k, v in sorted(e.result.items()))[:300]
            earlier = f"#{e.id} {e.probe}: {e.classification} — {fields}"

        def answer(yes: bool | None) -> None:
            if yes:
                self._run_worker(request, True)
            else:
                self.inv.decline_run(request.probe, request.params, target.name, check)
                self.notify("not run; the declined retest is in the timeline")
                self.refresh_all()

        self.app.push_screen(RetestDialog(message[:1].upper() + message[1:], earlier), answer)

    @work(group="runs")
    async def _run_worker(self, request: Any, force: bool) -> None:
        target = self.app.target
        self._cancel = asyncio.Event()
        self.live_started = time.monotonic()

        def started(run: int) -> None:
            self.live_run = run
            self.refresh_all()
            self.show_output(run)

        try:
            report = await run_probe(
                self.inv, target, request, force=force, cancel=self._cancel, pool=self.app.pool,
                agents=self.app.agents, on_start=started,
            )
        except CircularRetest as flag:  # another writer ran it meanwhile
            self.notify(f"circular retest: {flag}", severity="warning")
            return
        except (SessionError, ProbesError, HypothesisError) as exc:  # the run is recorded as it ended
            self.notify(f"the run could not start: {exc}", severity="error", timeout=10)
            return
        finally:
            finished, self.live_run = self.live_run, None
            self._cancel = None
            if finished is not None:
                view = self.query_one(OutputView)
                if self.shown_run == finished:
                    view.poll()
        info = self.state.runs[report.run]
        verdicts = [str(e) for e in self.state.verdicts_for(report.run)]
        self.notify(f"#{report.run} {info.probe}: {info.classification}" + (" — " + ", ".join(verdicts) if verdicts else ""))
        self.refresh_all()

    def action_cancel_run(self) -> None:
        if self._cancel is None:
            self.notify("nothing is running")
            return
        self._cancel.set()
        self.notify(f"cancelling run #{self.live_run}…")

    # ---------------------------------------------------------------- remedies

    def _code_dir(self) -> Path:
        target = self.app.target
        root = self.app.workspace.root
        return (root / target.code_local) if target.code_local else root

    def action_remedy(self) -> None:
        if self.READONLY:
            self.notify("replay is read-only", severity="warning")
            return
        sel = self.selection
        remedy = sel.id if sel.kind == "remedy" else None
        hyp = sel.hypothesis
        if remedy is None and hyp in self.state.hypotheses:
            remedies = self.state.hypotheses[hyp].remedies
            step = self._step()
            remedy = step.remedy or (remedies[0] if remedies else None)
        if remedy is None:
            self.notify("select a remedy (✚) or a hypothesis that has one", severity="warning")
            return
        if not self.app.target.is_local:
            self.notify(
                f"remedies on {self.app.target.name} go through the CLI for now: sleuth remedy apply {remedy} PATH --target {self.app.target.name}",
                severity="warning",
                timeout=10,
            )
            return
        active = any(a.active and a.remedy == remedy for a in self.state.applications.values())
        path = remedy_file(self.state, remedy, self._code_dir())
        if path is None:
            self.notify(f"no file under {self._code_dir()} that {remedy} would change", severity="warning")
            return
        try:
            plan = plan_remedy(self.inv, remedy, path, self.app.target.name)
        except (SessionError, ProbesError) as exc:
            self.notify(str(exc), severity="error")
            return
        notes = [f"line {f['line']}: {f['what']}" for f in plan.findings]
        rel = str(path.relative_to(self.app.workspace.root)) if path.is_relative_to(self.app.workspace.root) else str(path)

        def chosen(what: str | None) -> None:
            if what == "apply":
                self._apply(plan, hyp, rel)
            elif what == "revert":
                try:
                    app = revert_remedy(self.inv, path)
                except (SessionError, ProbesError) as exc:
                    self.notify(str(exc), severity="error")
                    return
                self.notify(f"reverted application #{app}: {rel} has its original bytes")
                self.refresh_all()

        self.app.push_screen(RemedyDialog(remedy, rel, plan.diff, notes, list(plan.blocked), bool(active)), chosen)

    def _apply(self, plan: Any, hyp: str | None, rel: str) -> None:
        try:
            app = apply_remedy(self.inv, plan, self.app.target.name, hyp)
        except (SessionError, ProbesError) as exc:
            self.notify(str(exc), severity="error")
            return
        if app is None:
            self.notify(f"{rel}: {plan.remedy} was already there; nothing changed")
            return
        self.refresh_all()
        self.notify(f"applied {plan.remedy} to {rel} (application #{app})")
        earlier = run_to_verify(self.state, self.app.target.name)
        if earlier is None:
            return

        def rerun(yes: bool | None) -> None:
            if yes:
                self.start_probe(earlier.probe)

        self.app.push_screen(
            ConfirmDialog("Verify", f"Re-run #{earlier.id} {earlier.probe} to verify the {plan.remedy}?", default=True), rerun
        )

    # ---------------------------------------------------------------- the rest

    def action_export(self) -> None:
        out = self.app.workspace.root / "postmortem.md"
        written = write_postmortem(self.inv, out)
        self.notify(f"wrote {written} (full outputs in {written.stem}-output/)")

    def action_target(self) -> None:
        targets = [(name, t.describe()) for name, t in self.app.config.targets.items()]

        def picked(name: str | None) -> None:
            if name:
                self.app.target = self.app.config.target(name)
                self.refresh_all()

        self.app.push_screen(TargetDialog(targets, self.app.target.name), picked)

    def action_add(self) -> None:
        if self.READONLY:
            self.notify("replay is read-only", severity="warning")
            return

        def added(values: dict[str, Any] | None) -> None:
            if not values:
                return
            kind, a, b, c = values["kind"], values["a"], values["b"], values["c"]
            try:
                if kind == "note":
                    if not a:
                        raise InvestigationError("a note needs text")
                    self.inv.add_note(a, about=b or None)
                elif kind == "hypothesis":
                    if not a:
                        raise InvestigationError("a hypothesis needs an id")
                    self.inv.add_hypothesis(a, title=b or a, claim=c, explains=list(self.state.symptoms)[:1])
                    self.selection = Selection("hypothesis", a, hypothesis=a)
                elif kind == "symptom":
                    if not a:
                        raise InvestigationError("a symptom needs an id")
                    self.inv.add_symptom(a, title=b, text=c)
                else:
                    self.inv.link(a, b, c)
            except (SessionError, HypothesisError) as exc:
                self.notify(str(exc), severity="error")
                return
            self.notify(f"added {kind}")
            self.refresh_all()

        about = self.selection.hypothesis
        self.app.push_screen(AddDialog(about), added)

    def action_baseline(self) -> None:
        if self.READONLY or self.shown_run is None:
            return
        try:
            self.inv.mark_baseline(self.shown_run)
        except SessionError as exc:
            self.notify(str(exc), severity="error")
            return
        self.notify(f"run #{self.shown_run} is the baseline of {self.state.runs[self.shown_run].target}")
        self.refresh_all()

    def selection_commands(self) -> list[tuple[str, str, Any]]:
        """(name, help, callback) for the command palette: what the selection allows now."""
        out: list[tuple[str, str, Any]] = []
        st, sel = self.state, self.selection
        if not self.READONLY:
            h = sel.hypothesis
            probes = []
            if sel.kind == "probe":
                probes = [sel.id]
            elif h in st.hypotheses:
                probes = [t.probe for t in st.hypotheses[h].probes]
            for p in probes:
                if p in self.app.probes:
                    out.append((f"Run {p} on {self.app.target.name}", self.app.probes[p].title, lambda p=p: self.start_probe(p)))
            if h in st.hypotheses:
                for r in st.hypotheses[h].remedies:
                    out.append((f"Preview remedy {r}", f"for {st.hypotheses[h].title}", self.action_remedy))
                out.append((f"Add a note about {h}", "a line in the timeline", self.action_add))
            if self.shown_run is not None:
                out.append((f"Mark run #{self.shown_run} as the baseline", "env-fingerprint compares against it", self.action_baseline))
        out.append(("Export the postmortem", "postmortem.md with each run's output", self.action_export))
        out.append(("Search the output", "/ then n / N", self.action_search))
        out.append(("Pick the target", "where probes run", self.action_target))
        return out


class ReplayScreen(InvestigationScreen, inherit_bindings=False):  # no run / remedy / add keys here
    """The investigation as it stood at event k; ←/→ step, [ / ] jump between flags."""

    READONLY = True
    BINDINGS = [
        Binding("left", "step(-1)", "◀ event", id="replay.back", tooltip="One event back", priority=True),
        Binding("right", "step(1)", "event ▶", id="replay.forward", tooltip="One event on", priority=True),
        Binding("left_square_bracket", "flag(-1)", "⚑ prev", id="replay.flag_back", key_display="[", tooltip="The previous flagged event"),
        Binding("right_square_bracket", "flag(1)", "⚑ next", id="replay.flag_forward", key_display="]", tooltip="The next flagged event"),
        Binding("home", "jump(0)", "first", id="replay.first", show=False, priority=True),
        Binding("end", "jump(-1)", "last", id="replay.last", show=False, priority=True),
        Binding("slash", "search", "search", id="search", key_display="/"),
        Binding("e", "export", "export", id="export", show=False),
        Binding("o", "focus_output", "output", id="focus_output", show=False),
        Binding("q", "app.quit", "quit", id="quit"),
        Binding("tab", "app.focus_next", "next pane", show=False),
        Binding("shift+tab", "app.focus_previous", "previous pane", show=False),
    ]

    def __init__(self, events: list[Event], at: int | None = None, hint: str | None = None) -> None:
        super().__init__(hint)
        self.events = events
        self.at = len(events) if at is None else at
        self._state = InvestigationState.fold(events[: self.at])

    @property
    def state(self) -> InvestigationState:
        return self._state

    def compose_scrubber(self) -> ComposeResult:
        yield Static(id="scrubber")

    def refresh_all(self) -> None:
        super().refresh_all()
        self._update_scrubber()

    def _update_scrubber(self) -> None:
        k, total = self.at, len(self.events)
        t0 = self.events[0].ts if self.events else 0.0
        text = Text("◀ ", style="bold")
        text.append(f"event {k} of {total}", style="bold")
        if k:
            e = self.events[k - 1]
            text.append(f" · {clock(e.ts - t0)} · {e.kind}")
            said = e.data.get("message") or e.data.get("title") or e.data.get("text") or e.data.get("probe") or ""
            if said:
                text.append(f' "{str(said)[:70]}"', style="italic")
            if e.kind == EventKind.FLAG_RAISED:
                text.append(" ⚑", style="bold yellow")
        text.append(" ▶", style="bold")
        text.append("   ← → step · [ ] flags · home end", style="dim")
        self.query_one("#scrubber", Static).update(text)

    def _go(self, k: int) -> None:
        k = max(0, min(len(self.events), k))
        if k == self.at:
            return
        if k > self.at:
            for e in self.events[self.at : k]:
                self._state.apply(e)
        else:
            self._state = InvestigationState.fold(self.events[:k])
        self.at = k
        self.refresh_all()
        runs = self._state.runs
        if self.shown_run not in runs:
            self.show_output(max(runs, default=None))
        else:
            self._update_run_header()

    def action_step(self, delta: int) -> None:
        self._go(self.at + delta)

    def action_jump(self, k: int) -> None:
        self._go(len(self.events) if k < 0 else k)

    def action_flag(self, direction: int) -> None:
        flagged = [i + 1 for i, e in enumerate(self.events) if e.kind == EventKind.FLAG_RAISED]
        if direction > 0:
            after = [k for k in flagged if k > self.at]
            if after:
                self._go(after[0])
        else:
            before = [k for k in flagged if k < self.at]
            if before:
                self._go(before[-1])

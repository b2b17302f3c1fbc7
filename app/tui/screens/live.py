"""The live investigation screen: runs (async workers on the app's loop), notes and links,
the target, the baseline; its remedy actions are screens/remedies.py's."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from textual import work
from textual.binding import Binding

from ....hypotheses import InvestigationState
from ....sessions import (
    CheckAsk,
    CircularRetest,
    Investigation,
    request_for_probe,
    request_for_shell,
    run_fleet,
)
from ....sessions.checks import Declined, ResolvedCheck, run_resolved
from ...errors import HypothesisError, ProbesError, SessionError
from ...timeline import fleet_retest_prompt, retest_prompt
from ...views import NextStep, Selection, next_step
from ..dialogs import AddDialog, ConfirmDialog, RetestDialog, TargetDialog
from ..widgets import LiveRun
from .browse import BrowseScreen
from .remedies import RemedyActions

__all__ = ["InvestigationScreen"]


class InvestigationScreen(RemedyActions):
    """The live investigation: keys act on the tree's selection."""

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
        Binding("q", "quit", "quit", id="quit", tooltip="Quit (the session is saved as you go; a running probe is asked about)"),
        *BrowseScreen.COMMON_BINDINGS,
    ]
    EMPTY_RUN = "no run yet — select a probe and press r"

    def __init__(self, hint: str | None = None) -> None:
        super().__init__(hint)
        self.live_run: int | None = None
        self.live_started = 0.0
        self._cancel: asyncio.Event | None = None
        self._starting = False  # reading the target's state / asking before a retest
        self._spin = 0
        self._progress: str | None = None  # the running probe's last progress sentence

    @property
    def inv(self) -> Investigation:
        return self.app.inv

    @property
    def state(self) -> InvestigationState:
        return self.app.inv.state

    def step(self) -> NextStep:
        """The next step the detail shows, and what r does: one answer for both. On a probe
        or a run it is that probe (again); on a hypothesis, the suggested one."""
        st, sel = self.state, self.selection
        if sel.kind == "run" and sel.run in st.runs:
            run = st.runs[sel.run]
            if run.kind == "shell":
                return NextStep("run", "r", f"re-run #{run.id}'s shell command: {run.params.get('cmd', '')}",
                                probe="shell", params={"cmd": run.params.get("cmd", "")}, kind="run")
            if run.probe in self.app.probes:
                return NextStep("run", "r", f"re-run #{run.id} {run.probe}{self._retest_note(run.probe, run.params)}",
                                probe=run.probe, hypothesis=sel.hypothesis, params=dict(run.params), kind="run")
        if sel.kind == "probe" and sel.id in self.app.probes:
            params = self.app.config.params_for(sel.id)
            return NextStep("run", "r", f"run {sel.id}{self._retest_note(sel.id, params)}", probe=sel.id,
                            hypothesis=sel.hypothesis, kind="run")
        return next_step(st, sel.hypothesis, self.app.probes, self.app.target.name, self.app.config.params_for)

    def _retest_note(self, probe: str, params: dict[str, Any]) -> str:
        """" (as last reported, a retest of #4: sleuth will ask)" when it looks like one (the
        run itself measures the state first, and only then asks)."""
        asked = {k: v for k, v in params.items() if k != "baseline_run"}
        try:
            request = request_for_probe(self.inv, self.app.probes[probe], self.app.target,
                                        self.app.config.params_for(probe, asked))
        except ProbesError:  # a required param unset: the run itself says so
            return ""
        check = self.state.check_before_run(request.probe, request.params, self.app.target.name,
                                            definition=self.app.target.definition(), stochastic=request.stochastic)
        if check.retest_of is not None:
            return f" (as last reported, a retest of #{check.retest_of.id}: sleuth will ask)"
        return ""

    def live(self) -> LiveRun | None:
        if self.live_run is None:
            return None
        return LiveRun(self.live_run, time.monotonic() - self.live_started, self._spin, self._progress)

    def on_mount(self) -> None:
        super().on_mount()
        self.set_interval(0.1, self._tick)

    FOLLOW_TICKS = 3  # another process's events show within 0.3 s (one indexed SQLite read each time)

    def _tick(self) -> None:
        self._spin += 1
        if self.live_run is not None and self.shown_run == self.live_run:
            self.run_pane.view.poll()
            self.update_run_header()
        elif self.shown_run is not None and self._running_elsewhere(self.shown_run):
            self.run_pane.view.poll()  # a run another process is making: its output as it comes
            self.update_run_header()
        if self._spin % self.FOLLOW_TICKS == 0:
            self._follow()
        if self._spin % 10 == 0:
            self.update_title()

    def _running_elsewhere(self, run: int) -> bool:
        info = self.state.runs.get(run)
        return info is not None and info.classification is None

    def _follow(self) -> None:
        """Events another process appended (the CLI in another terminal, an agent through
        `sleuth mcp`): fold them and show them; a run it started is shown when the newest run
        was (the user was not reading an older one)."""
        newest = max(self.state.runs, default=None)
        running = {r for r, info in self.state.runs.items() if info.classification is None}
        if not self.inv.follow():
            return
        latest = max(self.state.runs, default=None)
        st = self.state
        for run in sorted(running | {r for r in st.runs if newest is None or r > newest}):
            info = st.runs[run]
            who = st.author(info.started_seq)
            if info.classification is not None and run != self.live_run and who and who != "ui":
                verdicts = ", ".join(str(e) for e in st.verdict_per_hypothesis(run))
                self.notify(f"#{run} {info.probe} by {who}: {info.classification}" + (f" — {verdicts}" if verdicts else ""))
        self.refresh_all()
        if latest != newest and self.live_run is None and self.shown_run in (None, newest):
            self.show_output(latest)
        elif self.shown_run is not None:
            self.run_pane.view.poll()

    # ---------------------------------------------------------------- runs

    def action_run(self) -> None:
        if self.live_run is not None:
            self.notify(f"run #{self.live_run} is still going; [x] cancels it", severity="warning")
            return
        if self._starting:
            self.notify("reading the target's state before the run…", severity="warning")
            return
        step = self.step()  # what the detail's "next:" says is what r does
        if step.action != "run" or step.probe is None:
            self.notify("select a probe (▷) or a run to run, or a hypothesis with a next step", severity="warning")
            return
        if self.app.target.fleet is not None:
            if step.probe == "shell":
                self.notify("a shell command runs on one target: pick one of the fleet's members (t)", severity="warning")
                return
            self._starting = True
            self._fleet_worker(step.probe, {k: v for k, v in (step.params or {}).items() if k != "baseline_run"})
            return
        if step.probe == "shell":
            self._starting = True
            self._run_worker(request_for_shell(str((step.params or {}).get("cmd", ""))))
            return
        params = {k: v for k, v in (step.params or {}).items() if k != "baseline_run"}
        self.start_probe(step.probe, params)

    def start_probe(self, probe: str, extra: dict[str, Any] | None = None) -> None:
        target = self.app.target
        params = self.app.config.params_for(probe, extra or {})
        try:
            request = request_for_probe(self.inv, self.app.probes[probe], target, params)
        except ProbesError as exc:  # e.g. the entry script is not set: nothing was run
            self.notify(str(exc), severity="error", timeout=10)
            return
        self._starting = True
        self._run_worker(request)

    @work(group="runs")
    async def _run_worker(self, request: Any) -> None:
        """Read the target's state, ask before a circular retest, then run and record: the
        shared run path (sessions.checks.run_resolved) with the dialog as its retest policy."""
        target = self.app.target
        resolved = ResolvedCheck(CheckAsk(target=target.name), target, None)  # the request is made already

        async def ask(flag: CircularRetest) -> bool:
            self._starting = False
            headline, points, earlier, question = retest_prompt(self.state, flag.check, self.app.clock())
            self.refresh_all()  # the state read is in the timeline already
            return bool(await self.app.push_screen_wait(RetestDialog(headline, points, earlier, question)))

        def started(run: int) -> None:
            self._starting = False
            self.live_started = time.monotonic()
            self.live_run = run
            self._progress = None
            self.refresh_all()
            self.show_output(run)

        def heard(rec: dict[str, Any]) -> None:  # a long run's step (trial 2 of 5 …), for the run header
            if rec.get("kind") == "progress" and rec.get("said"):
                self._progress = str(rec["said"])

        self._cancel = asyncio.Event()
        try:
            report = await run_resolved(self.inv, resolved, self.app.config, on_retest=ask, request=request,
                                        cancel=self._cancel, runner=self.app.runner, on_start=started, on_record=heard)
        except CircularRetest as flag:  # another writer ran it meanwhile
            self.notify(f"circular retest: {flag}", severity="warning")
            return
        except (SessionError, ProbesError, HypothesisError) as exc:  # the run is recorded as it ended
            self.notify(f"the run could not start: {exc}", severity="error", timeout=10)
            return
        finally:
            self._starting = False
            finished, self.live_run = self.live_run, None
            self._cancel = None
            if finished is not None and self.shown_run == finished:
                self.run_pane.view.poll()
        if isinstance(report, Declined):
            self.notify("not run; the declined retest is in the timeline")
            self.refresh_all()
            return
        info = self.state.runs[report.run]
        verdicts = [str(e) for e in self.state.verdict_per_hypothesis(report.run)]
        self.notify(f"#{report.run} {info.probe}: {info.classification}" + (" — " + ", ".join(verdicts) if verdicts else ""))
        self.refresh_all()

    @work(group="runs")
    async def _fleet_worker(self, probe: str, params: dict[str, Any]) -> None:
        """One probe on every member of the fleet at once; then the matrix."""
        from ....hypotheses import Comparison
        from ..dialogs import FleetMatrix

        fleet = self.app.target
        self.notify(f"{probe} on every member of {fleet.name} ({fleet.fleet.describe() if fleet.fleet else fleet.name})…")

        async def ask(same: dict[str, Any]) -> bool:
            """Members in the same state as at their last run of this check: run them again?"""
            expanded = self.inv.state.fleets.get(fleet.name)
            total = (len(expanded.members) if expanded is not None else 0) or len(same)
            self.refresh_all()  # their state reads are in the timeline already
            return bool(await self.app.push_screen_wait(
                RetestDialog(*fleet_retest_prompt(self.state, same, total, self.app.clock()))))

        try:
            report = await run_fleet(self.inv, self.app.config, fleet, self.app.probes[probe], params,
                                     runner=self.app.runner, pool=self.app.pool, ask=ask)
        except (SessionError, ProbesError, HypothesisError) as exc:
            self.notify(f"the fleet run could not start: {exc}", severity="error", timeout=10)
            return
        finally:
            self._starting = False
        self.refresh_all()
        comparison = report.comparison or Comparison(fleet.name, probe, {})
        if report.reports:
            self.show_output(max(r.run for r in report.reports.values()))
        kept = ", ".join(f"{m} (#{r})" for m, r in report.reused.items())
        self.notify(comparison.headline() + (f" — earlier answers kept: {kept}" if kept else ""), timeout=10)
        self.app.push_screen(FleetMatrix(comparison, fleet.fleet.describe() if fleet.fleet else ""))

    def action_quit(self) -> None:
        """Quit — but a running probe may be an hour of a remote run: ask, and say what goes."""
        if self.live_run is None:
            self.app.exit()
            return
        run = self.state.runs[self.live_run]
        elapsed = time.monotonic() - self.live_started

        def answer(yes: bool | None) -> None:
            if yes:
                if self._cancel is not None:
                    self._cancel.set()  # the worker kills its process group at the far end; the run is recorded
                self.app.exit()

        self.app.push_screen(
            ConfirmDialog(
                "Quit?",
                f"Run #{run.id} {run.probe} on {run.target} has been running for {elapsed:.0f} s. Quitting cancels it "
                "and kills its processes at the far end (its output so far is kept). Quit anyway?",
                default=False,
            ),
            answer,
        )

    def action_cancel_run(self) -> None:
        if self._cancel is None:
            self.notify("nothing is running")
            return
        self._cancel.set()
        self.notify(f"cancelling run #{self.live_run}…")

    # ---------------------------------------------------------------- the rest

    def action_target(self) -> None:
        targets = [(name, t.describe()) for name, t in self.app.config.targets.items()]

        def picked(name: str | None) -> None:
            if name:
                self.app.target = self.app.config.target(name)
                self.refresh_all()

        self.app.push_screen(TargetDialog(targets, self.app.target.name), picked)

    def action_add(self) -> None:
        self.app.push_screen(AddDialog(self.selection.hypothesis, submit=self._add), self._added)

    def _add(self, values: dict[str, Any]) -> tuple[str, str] | None:
        """Record what the add dialog holds; (field, why) when refused (the dialog stays open)."""
        kind, a, b, c = values["kind"], values["a"], values["b"], values["c"]
        if not a:
            return "a", {"note": "a note needs text", "link": "a link needs the hypothesis it starts from"}.get(
                kind, f"a {kind} needs an id")
        try:
            if kind == "note":
                self.inv.add_note(a, about=b or None)
            elif kind == "hypothesis":
                self.inv.add_hypothesis(a, title=b or a, claim=c, explains=list(self.state.symptoms)[:1])
                self.selection = Selection("hypothesis", a, hypothesis=a)
            elif kind == "symptom":
                self.inv.add_symptom(a, title=b, text=c)
            else:
                self.inv.link(a, b, c)
        except (SessionError, HypothesisError) as exc:
            said = str(exc)
            field = "a"
            if kind == "note" and b and repr(b) in said:
                field = "b"
            elif kind == "link":
                field = "b" if "link kind" in said else "c" if c and repr(c) in said else "a"
            return field, said
        return None

    def _added(self, values: dict[str, Any] | None) -> None:
        if values:
            self.notify(f"added {values['kind']}")
            self.refresh_all()

    def action_baseline(self) -> None:
        if self.shown_run is None:
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
                applied = [a for a in st.applications.values() if a.remedy == r and a.active]
                if applied:
                    out.append((f"Revert remedy {r} (application #{applied[-1].id})", "put the file's original bytes back",
                                lambda r=r: self.action_remedy(r)))
                else:
                    out.append((f"Preview remedy {r}", f"for {st.hypotheses[h].title}", lambda r=r: self.action_remedy(r)))
            out.append((f"Add a note about {h}", "a line in the timeline", self.action_add))
        if self.shown_run is not None:
            out.append((f"Mark run #{self.shown_run} as the baseline", "env-fingerprint compares against it", self.action_baseline))
        out.append(("Pick the target", "where probes run", self.action_target))
        return out + super().selection_commands()

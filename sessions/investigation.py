"""The live investigation: the one object the CLI and the UI go through.

Every change is an event: :class:`Investigation` writes it to the store first, then folds it
into :class:`hypotheses.InvestigationState`. Reads go to the folded state. Replay opens the
store read-only and folds up to event k. What to write is decided elsewhere, without writing
(graph_edits, notes, run_events, judging, known_matching, fleet_judging); this object writes
what they decide, in order.

Exceptions:
    InvestigationError   a request names something unknown (a hypothesis, a run, a link
                         kind) or is not allowed now; nothing was written
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..hypotheses import (
    Catalog,
    Comparison,
    EventKind,
    HypothesisDef,
    InvestigationState,
    PreRunCheck,
    ProbeTest,
    RunInfo,
    describe_check,
    result_fields,
)
from ..hypotheses.known import KnownIssue
from . import graph_edits, notes
from .capture import CaptureWriter
from .errors import InvestigationError
from .exchange import export_session
from .fleet_judging import comparison_judged, fleet_hang_judged
from .judging import judge_run, verify_upgrades
from .known_matching import known_matched, run_versions
from .new_event import NewEvent
from .postmortem import postmortem_markdown
from .redact import Redactor
from .run_events import RunStart, baseline_marked, run_declined, run_finished, run_of, run_started, state_observed
from .store import Store

__all__ = ["Investigation", "InvestigationError", "RunStart", "result_fields"]


class Investigation:
    """An investigation backed by one session file."""

    def __init__(self, store: Store, state: InvestigationState) -> None:
        self.store = store
        self.state = state
        self.clock: Callable[[], float] = time.time  # the time events are recorded at
        # the known upstream issues runs are matched against (hypotheses/known.py); the
        # workspace sets them when it opens the investigation
        self.known: Mapping[str, KnownIssue] = {}
        self._catalog: Catalog | None = None  # the last one synced: its dormant hypotheses wake from it

    # ------------------------------------------------------------ lifecycle

    @classmethod
    def create(cls, path: Path | str, title: str, catalog: Catalog, redactor: Redactor | None = None) -> Investigation:
        inv = cls(Store.create(path, redactor), InvestigationState())
        inv._record(EventKind.INVESTIGATION_CREATED, {"title": title})
        inv.sync_catalog(catalog)
        return inv

    @classmethod
    def open(cls, path: Path | str, catalog: Catalog | None = None, redactor: Redactor | None = None) -> Investigation:
        store = Store.open(path, redactor=redactor)
        inv = cls(store, InvestigationState.fold(store.events()))
        if catalog is not None:
            inv.sync_catalog(catalog)
        return inv

    @classmethod
    def replay(cls, path: Path | str, upto: int | None = None) -> Investigation:
        """Read-only, folded up to event *upto* (all events when None)."""
        store = Store.open(path, readonly=True)
        total = store.event_count()
        if upto is not None and not 0 <= upto <= total:
            store.close()
            raise InvestigationError(f"{path}: event {upto} does not exist; the session has events 0..{total}")
        return cls(store, InvestigationState.fold(store.events(upto)))

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Investigation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def path(self) -> Path:
        return self.store.path

    def _record(self, kind: str, data: dict[str, Any], ts: float | None = None) -> Any:
        event = self.store.append(kind, data, self.clock() if ts is None else ts)
        if event.seq != self.state.last_seq + 1:  # another process appended since we looked: theirs first
            for theirs in self.store.events(after=self.state.last_seq, upto=event.seq - 1):
                self.state.apply(theirs)
        self.state.apply(event)
        return event

    def _write(self, events: NewEvent | Iterable[NewEvent] | None) -> None:
        """Write what a decider decided, in order (None: nothing)."""
        for new in [events] if isinstance(events, NewEvent) else events or ():
            self._record(new.kind, new.data)

    def follow(self) -> int:
        """Fold the events another process appended since we last looked (the CLI in another
        terminal, an agent through `sleuth mcp`); how many there were."""
        before = self.state.last_seq
        if self.store.last_seq() > before:
            for event in self.store.events(after=before):
                self.state.apply(event)
        return self.state.last_seq - before

    # ------------------------------------------------------------ graph edits (sessions/graph_edits.py)

    def sync_catalog(self, catalog: Catalog) -> list[str]:
        """Add catalog hypotheses the session lacks, or whose definition changed."""
        changed = graph_edits.catalog_changes(self.state, catalog)
        self._write(map(graph_edits.hypothesis_added, changed))
        self._catalog = catalog
        return [h.id for h in changed]

    def add_symptom(self, ident: str, title: str = "", text: str = "") -> None:
        self._write(graph_edits.symptom_added(self.state, self._catalog, ident, title, text))

    def adopt_probe(self, probe: str) -> list[str]:
        """Before *probe* runs: the dormant catalog hypotheses it tests join the session, so its
        evidence has somewhere to go."""
        woken = graph_edits.woken(self.state, self._catalog, lambda h: any(t.probe == probe for t in h.probes))
        self._write(map(graph_edits.hypothesis_added, woken))
        return [h.id for h in woken]

    def add_hypothesis(
        self,
        ident: str,
        title: str,
        claim: str = "",
        explains: Iterable[str] = (),
        links: Iterable[tuple[str, str]] = (),
        probes: Iterable[ProbeTest] = (),
        remedies: Iterable[str] = (),
    ) -> None:
        hyp = HypothesisDef(id=ident, title=title, claim=claim, explains=tuple(explains), probes=tuple(probes),
                            remedies=tuple(remedies), links=tuple(links), source="session")
        self._write(graph_edits.new_hypothesis(self.state, hyp))

    def remove_symptom(self, ident: str) -> None:
        """Take a symptom back (recorded: replay shows it until here)."""
        self._write(graph_edits.symptom_removed(self.state, ident))

    def remove_hypothesis(self, ident: str) -> None:
        """Take a hypothesis back (recorded). Not while others refine it: remove those first."""
        self._write(graph_edits.hypothesis_removed(self.state, ident))

    def link(self, src: str, kind: str, dst: str) -> None:
        """Link hypothesis *src* to *dst*: a hypothesis (refines/competes/exposes) or a symptom (explains)."""
        self._write(graph_edits.link_added(self.state, src, kind, dst))

    # ------------------------------------------------------------ notes (sessions/notes.py)

    def add_note(self, text: str, about: str | None = None) -> None:
        self._write(notes.note_added(self.state, text, about))

    def has_finding(self, target: str, finding: str) -> bool:
        return notes.has_finding(self.state, target, finding)

    def record_finding(self, target: str, finding: str, sentence: str, run: int) -> bool:
        """Say *sentence* about *target* once (a note from sleuth, about the run that showed
        it); False when it was said already."""
        said = notes.finding_noted(self.state, target, finding, sentence, run)
        self._write(said)
        return said is not None

    # ------------------------------------------------------------ runs (sessions/run_events.py, judging.py)

    def mark_baseline(self, run: int) -> None:
        self._write(baseline_marked(self.state, run))

    def baseline(self, target: str) -> RunInfo | None:
        run = self.state.baselines.get(target)
        return self.state.runs.get(run) if run is not None else None

    def check_before_run(self, probe: str, params: Mapping[str, Any], target: str, **given: Any) -> PreRunCheck:
        """:meth:`InvestigationState.check_before_run` (its keywords: state, definition, unknown,
        stochastic) on the session as it is now, other writers' events folded first: measured
        when *state* (or *unknown*) is given, predicted otherwise."""
        self.follow()
        return self.state.check_before_run(probe, params, target, **given)

    def observe_state(self, target: str, check: PreRunCheck) -> int | None:
        """Record the state read before a run when it tells something: the target changed
        since sleuth last saw it (by hand, outside sleuth), or the run would repeat an earlier
        one. Declining the run then loses nothing. The event's seq where it was recorded (the
        run started under *check* names it: its findings are its own read's), else None."""
        observed = state_observed(self.state, target, check)
        return None if observed is None else self._record(observed.kind, observed.data).seq

    def describe_check(self, check: PreRunCheck, now: float | None = None) -> str:
        """What is flagged about *check*, in the words every front end uses."""
        return describe_check(self.state, check, now)

    def begin_run(
        self, probe: str, params: Mapping[str, Any], target: str, kind: str = "probe", check: PreRunCheck | None = None,
        reason: str | None = None,
    ) -> RunStart:
        """Record the start of a run (under *check*, the one made before it, measured or
        not); flags a circular retest or revisit first, as events. *reason*: why a flagged
        run was run anyway (an agent's `force` must give one), kept in the flag and the run."""
        reason = (reason or "").strip() or None
        check = check or self.check_before_run(probe, params, target)
        with self.store.batch():
            run = self.state.next_run_id()
            self._write(run_started(self.state, run, probe, params, target, kind, check, reason))
            return RunStart(run, check)

    def decline_run(self, probe: str, params: Mapping[str, Any], target: str, check: PreRunCheck) -> None:
        """The user chose not to repeat a check: that is worth a line in the postmortem too."""
        self._write(run_declined(self.state, target, check))

    def capture(self, run: int) -> CaptureWriter:
        return self.store.capture(run)

    def finish_run(
        self,
        run: int,
        classification: str,
        reason: str,
        records: list[dict[str, Any]] | None = None,
        state: dict[str, Any] | None = None,
        lines: Mapping[str, int] | None = None,
        ts: float | None = None,
        exit_status: int | None = None,
        signal: str | None = None,
        seen: Mapping[str, str] | None = None,
        read_before: Mapping[str, Any] | None = None,
    ) -> RunInfo:
        """Record how a run ended, then the evidence it gives, verifications and flags, and
        the known upstream issues it matches (*seen*: entry id -> the output line that showed
        its signature, from a :class:`~hypotheses.known.SignatureWatch`). A run that reports no
        state of its own (a shell command) is matched against *read_before*, the state read just
        before it, and the match says so."""
        info = run_of(self.state, run)
        records = records or []
        finished = run_finished(info, classification, reason, records, state, lines, exit_status, signal, read_before)
        seen = seen or {}
        with self.store.batch():
            fields = result_fields(records)
            self._record(finished.kind, finished.data, ts)
            # each decider reads the state with what the one before it decided written
            self._write(judge_run(self.state, info, classification, fields))
            self._write(known_matched(self.state, self.known, info, state, seen, read_before))
            versions = run_versions(state)
            if versions is not None:
                self._write(verify_upgrades(self.state, info, versions, seen, self.known))
        return info

    # ------------------------------------------------------------ remedies and fleets

    def record_application(
        self, remedy: str, target: str, files: list[dict[str, Any]], hypothesis: str | None = None,
        overlay: dict[str, Any] | None = None,
    ) -> int:
        """Record that *remedy* was applied to *files* (path, before/after hashes, diff), or,
        for an upgrade, that its *overlay* was made at the far end."""
        if hypothesis is not None and hypothesis not in self.state.hypotheses:
            raise InvestigationError(f"unknown hypothesis {hypothesis!r}")
        app = self.state.next_application_id()
        data: dict[str, Any] = {"application": app, "remedy": remedy, "hypothesis": hypothesis, "target": target,
                                "files": files}
        if overlay is not None:
            data["overlay"] = overlay
        self._record(EventKind.REMEDY_APPLIED, data)
        return app

    def record_preview(self, remedy: str, path: str, before_sha: str, after_sha: str, blocked: list[str]) -> None:
        """Record that *remedy* was previewed on *path* (a file key), as the diff showed it."""
        self._record(
            EventKind.REMEDY_PREVIEWED,
            {"remedy": remedy, "path": path, "before_sha": before_sha, "after_sha": after_sha, "blocked": blocked},
        )

    def record_revert(self, application: int) -> None:
        app = self.state.applications.get(application)
        if app is None:
            raise InvestigationError(f"no remedy application #{application}")
        if not app.active:
            raise InvestigationError(f"application #{application} ({app.remedy}) was already reverted")
        self._record(EventKind.REMEDY_REVERTED, {"application": application})

    def record_fleet(self, fleet: str, how: str, members: list[dict[str, Any]]) -> None:
        """Who *fleet*'s members were when it was used (replay shows them)."""
        self._record(EventKind.FLEET_EXPANDED, {"fleet": fleet, "how": how, "members": members})

    def record_comparison(self, comparison: Comparison) -> list[tuple[str, int]]:
        """Record a fleet's comparison and, where members disagree on what the code runs on
        (a version, a build, the driver, an environment variable), evidence that supports
        version drift on each odd member's run, the members named. (odd member, run) back."""
        events, judged = comparison_judged(self.state, comparison)
        self._write(events)
        return judged

    def record_fleet_hang(self, fleet: str, runs: Mapping[str, int], reading: Mapping[str, Any]) -> int | None:
        """Record a stacks fan-out's ranks read together (*reading*: hypotheses.hang's fields) and
        its evidence on each hang hypothesis, on the run of the member that holds the first odd
        rank (else the first member's run): the run whose state the reading belongs to."""
        with self.store.batch():
            self.follow()  # decided on what every writer wrote: nobody else writes until the batch ends
            events, run = fleet_hang_judged(self.state, fleet, runs, reading)
            self._write(events)
        return run

    # ------------------------------------------------------------ views

    def hypotheses_json(self) -> list[dict[str, Any]]:
        """Top-level hypotheses, each with its refinements nested, as `sleuth hypotheses --json`."""
        st = self.state

        def node(h: str) -> dict[str, Any]:
            out = st.hypothesis_summary(h)
            out["refinements"] = [node(c) for c in st.children(h)]
            return out

        return [node(h) for h in st.hypotheses if st.parent(h) is None]

    def export_json(self) -> dict[str, Any]:
        """The whole session: events and captured output, secrets already redacted."""
        return export_session(self.store, self.state.last_seq)

    def to_markdown(self, outputs: dict[int, str] | None = None) -> str:
        """The postmortem (see :mod:`sessions.postmortem`); *outputs* maps runs to links."""
        return postmortem_markdown(self.state, outputs)

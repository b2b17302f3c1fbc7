"""The live investigation: the one object the CLI and the UI go through.

Every change is an event: :class:`Investigation` writes it to the store first, then folds it
into :class:`hypotheses.InvestigationState`. Reads go to the folded state. Replay opens the
store read-only and folds up to event k.

Exceptions:
    InvestigationError   a request names something unknown (a hypothesis, a run, a link
                         kind) or is not allowed now; nothing was written
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..hypotheses import (
    LINK_KINDS,
    Catalog,
    Comparison,
    EventKind,
    HypothesisDef,
    InvestigationState,
    PreRunCheck,
    ProbeTest,
    RunInfo,
    component_keys,
    describe_check,
    describe_retest,
    describe_revisit,
    judge,
    result_fields,
    state_changes,
    state_key_of_parts,
    target_parts,
)
from ..hypotheses.known import KnownIssue, leaving, match_run
from .capture import CaptureWriter
from .errors import InvestigationError
from .exchange import export_session
from .judging import RunJudging
from .postmortem import postmortem_markdown
from .redact import Redactor
from .store import Store

__all__ = ["Investigation", "InvestigationError", "RunStart", "result_fields"]


@dataclass(frozen=True)
class RunStart:
    run: int
    check: PreRunCheck


class Investigation(RunJudging):
    """An investigation backed by one session file."""

    def __init__(self, store: Store, state: InvestigationState) -> None:
        self.store = store
        self.state = state
        self.clock: Callable[[], float] = time.time  # the time events are recorded at
        # the known upstream issues runs are matched against (hypotheses/known.py); the
        # workspace sets them when it opens the investigation
        self.known: Mapping[str, KnownIssue] = {}

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

    def follow(self) -> int:
        """Fold the events another process appended since we last looked (the CLI in another
        terminal, an agent through `sleuth mcp`); how many there were."""
        before = self.state.last_seq
        if self.store.last_seq() > before:
            for event in self.store.events(after=before):
                self.state.apply(event)
        return self.state.last_seq - before

    # ------------------------------------------------------------ graph edits

    def sync_catalog(self, catalog: Catalog) -> list[str]:
        """Add catalog hypotheses the session lacks, or whose definition changed."""
        changed = []
        for hyp in catalog.hypotheses.values():
            have = self.state.hypotheses.get(hyp.id)
            if have is None and self._dormant(hyp, catalog):
                continue  # joins when its symptom is added or its probe runs (_wake)
            new = hyp.to_dict()
            if have is not None and {**have.to_dict(), "origin": ""} == {**new, "origin": ""}:
                continue
            if have is not None and have.source == "session":
                continue  # the user's own in this session wins over a file of the same id
            self._record(EventKind.HYPOTHESIS_ADDED, new)
            changed.append(hyp.id)
        self._catalog = catalog
        return changed

    def add_symptom(self, ident: str, title: str = "", text: str = "") -> None:
        if ident in self.state.symptoms:
            raise InvestigationError(f"symptom {ident!r} is already recorded")
        known = getattr(self, "_catalog", None)
        if known is not None and ident in known.symptoms and not (title or text):
            sym = known.symptoms[ident]
            title, text = sym.title, sym.text
        self._record(EventKind.SYMPTOM_ADDED, {"id": ident, "title": title or ident, "text": text})
        self._wake(lambda h: ident in h.explains)

    def _dormant(self, hyp: HypothesisDef, catalog: Catalog) -> bool:
        """A catalog hypothesis that explains only opt-in symptoms, none of them in this session."""
        syms = [catalog.symptoms.get(s) for s in hyp.explains]
        return bool(syms) and all(s is not None and s.opt_in for s in syms) and not any(
            s in self.state.symptoms for s in hyp.explains)

    def _wake(self, wanted: Callable[[HypothesisDef], bool]) -> list[str]:
        """Add the catalog's dormant hypotheses *wanted* picks (each after the one it refines)."""
        catalog = getattr(self, "_catalog", None)
        if catalog is None:
            return []
        added: list[str] = []

        def add(h: HypothesisDef) -> None:
            if h.id in self.state.hypotheses or h.id in added:
                return
            for kind, other in h.links:
                if kind == "refines" and other in catalog.hypotheses:
                    add(catalog.hypotheses[other])
            self._record(EventKind.HYPOTHESIS_ADDED, h.to_dict())
            added.append(h.id)

        for hyp in catalog.hypotheses.values():
            if wanted(hyp):
                add(hyp)
        return added

    def adopt_probe(self, probe: str) -> list[str]:
        """Before *probe* runs: the dormant catalog hypotheses it tests join the session, so its
        evidence has somewhere to go."""
        return self._wake(lambda h: any(t.probe == probe for t in h.probes))

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
        if ident in self.state.hypotheses:
            raise InvestigationError(f"hypothesis {ident!r} already exists")
        links = tuple(links)
        for kind, other in links:
            self._need_link(kind, "hyp", other)
        for sym in explains:
            if sym not in self.state.symptoms:
                raise InvestigationError(f"unknown symptom {sym!r}; known: {', '.join(self.state.symptoms) or 'none'}")
        hyp = HypothesisDef(
            id=ident,
            title=title,
            claim=claim,
            explains=tuple(explains),
            probes=tuple(probes),
            remedies=tuple(remedies),
            links=links,
            source="session",
        )
        self._record(EventKind.HYPOTHESIS_ADDED, hyp.to_dict())

    def _need_link(self, kind: str, node_kind: str, ident: str) -> None:
        if kind not in (*LINK_KINDS, "explains"):
            raise InvestigationError(f"unknown link kind {kind!r}; use one of {', '.join((*LINK_KINDS, 'explains'))}")
        pool = self.state.hypotheses if node_kind == "hyp" else self.state.symptoms
        if ident not in pool:
            what = "hypothesis" if node_kind == "hyp" else "symptom"
            raise InvestigationError(f"unknown {what} {ident!r}; known: {', '.join(pool) or 'none'}")

    def remove_symptom(self, ident: str) -> None:
        """Take a symptom back (recorded: replay shows it until here)."""
        if ident not in self.state.symptoms:
            raise InvestigationError(f"no symptom {ident!r}; recorded: {', '.join(self.state.symptoms) or 'none'}")
        self._record(EventKind.SYMPTOM_REMOVED, {"id": ident})

    def remove_hypothesis(self, ident: str) -> None:
        """Take a hypothesis back (recorded). Not while others refine it: remove those first."""
        if ident not in self.state.hypotheses:
            raise InvestigationError(f"no hypothesis {ident!r}; known: {', '.join(self.state.hypotheses) or 'none'}")
        children = self.state.children(ident)
        if children:
            raise InvestigationError(f"{', '.join(children)} refine{'s' * (len(children) == 1)} {ident}: remove "
                                     f"{'it' if len(children) == 1 else 'them'} first")
        self._record(EventKind.HYPOTHESIS_REMOVED, {"id": ident})

    def link(self, src: str, kind: str, dst: str) -> None:
        """Link hypothesis *src* to *dst*: a hypothesis (refines/competes/exposes) or a symptom (explains)."""
        self._need_link(kind, "hyp", src)
        self._need_link(kind, "symptom" if kind == "explains" else "hyp", dst)
        prefix = "symptom" if kind == "explains" else "hyp"
        self._record(EventKind.LINK_ADDED, {"src": f"hyp:{src}", "dst": f"{prefix}:{dst}", "kind": kind})

    def add_note(self, text: str, about: str | None = None) -> None:
        if not text.strip():
            raise InvestigationError("a note needs some text")
        if (
            about is not None
            and about not in self.state.hypotheses
            and not (about.startswith("#") and about[1:].isdigit() and int(about[1:]) in self.state.runs)
        ):
            raise InvestigationError(f"a note can be about a hypothesis id or a run (#N); {about!r} is neither")
        self._record(EventKind.NOTE_ADDED, {"text": text, "about": about})

    def has_finding(self, target: str, finding: str) -> bool:
        return any(n.get("finding") == finding and n.get("target") == target for n in self.state.notes)

    def record_finding(self, target: str, finding: str, sentence: str, run: int) -> bool:
        """Say *sentence* about *target* once (a note from sleuth, about the run that showed
        it); False when it was said already."""
        if self.has_finding(target, finding):
            return False
        self._record(EventKind.NOTE_ADDED, {"text": f"sleuth, on {target}: {sentence}", "about": f"#{run}",
                                            "finding": finding, "target": target})
        return True

    def mark_baseline(self, run: int) -> None:
        info = self._run(run)
        if info.classification != "completed":
            raise InvestigationError(
                f"run #{run} is {info.classification or 'still running'}; only a completed run can be a baseline"
            )
        self._record(EventKind.BASELINE_MARKED, {"run": run, "target": info.target})

    def baseline(self, target: str) -> RunInfo | None:
        run = self.state.baselines.get(target)
        return self.state.runs.get(run) if run is not None else None

    def _run(self, run: int) -> RunInfo:
        if run not in self.state.runs:
            raise InvestigationError(f"no run #{run}; runs are #1..#{len(self.state.runs)}")
        return self.state.runs[run]

    # ------------------------------------------------------------ runs

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
        measured = check.state
        if measured is None:
            return None
        known = self.state.known_state(target)
        since = None
        if known is None:  # unknown since a shell command: compare with the last run of this same check
            earlier = [r for r in self.state.runs.values() if r.check_key == check.check_key and r.state is not None]
            if earlier and earlier[-1].state is not None:
                since = earlier[-1]
                known = (earlier[-1].state, since.state_parts or component_keys(earlier[-1].state))
        parts = check.state_parts or component_keys(measured)
        changed = known is None or target_parts(known[1]) != target_parts(parts)
        if not (changed or check.flagged):
            return None
        data: dict[str, Any] = {"target": target, "state": measured, "state_parts": parts, "state_key": check.expected_state}
        if known is not None:
            data["changes"] = [c.to_dict() for c in state_changes(known[0], measured)]
            if since is not None and data["changes"]:
                data["since"] = since.id  # what changed since that run of the same command
            by = self.state.overlay_changes_since_state(target)
            if by and data["changes"]:  # sleuth's own overlay did it, not a hand outside sleuth
                data["by"] = "; ".join(by)
        if check.retest_of is not None:
            data["same_as"] = check.retest_of.id
        if check.back_from is not None:
            data["back_from"] = check.back_from.id
        return self._record(EventKind.STATE_OBSERVED, data).seq

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
        anyway = f"; run anyway: {reason}" if reason else ""
        check = check or self.check_before_run(probe, params, target)
        with self.store.batch():
            run = self.state.next_run_id()
            if check.retest_of is not None:
                self._record(
                    EventKind.FLAG_RAISED,
                    {
                        "flag": "circular-retest",
                        "run": run,
                        "earlier": check.retest_of.id,
                        "target": target,
                        "message": describe_retest(self.state, check) + anyway,
                        **({"forced_because": reason} if reason else {}),
                    },
                )
            for hyp in check.revisits:
                self._record(
                    EventKind.FLAG_RAISED,
                    {
                        "flag": "revisit",
                        "run": run,
                        "hypothesis": hyp,
                        "target": target,
                        "message": describe_revisit(hyp) + anyway,
                        **({"forced_because": reason} if reason else {}),
                    },
                )
            self._record(
                EventKind.RUN_STARTED,
                {
                    "run": run,
                    "probe": probe,
                    "params": dict(params),
                    "target": target,
                    "kind": kind,
                    "check_key": check.check_key,
                    "remedies": list(self.state.active_remedies(target)),
                    "retest_of": check.retest_of.id if check.retest_of else None,
                    "observed": check.observed_seq or 0,  # its own state read (0: it told nothing)
                    **({"stochastic": True} if check.stochastic else {}),
                    **({"force_reason": reason} if reason and check.flagged else {}),
                },
            )
            return RunStart(run, check)

    def decline_run(self, probe: str, params: Mapping[str, Any], target: str, check: PreRunCheck) -> None:
        """The user chose not to repeat a check: that is worth a line in the postmortem too."""
        if check.retest_of is not None:
            self._record(
                EventKind.FLAG_RAISED,
                {
                    "flag": "circular-retest",
                    "run": None,
                    "earlier": check.retest_of.id,
                    "target": target,
                    "declined": True,
                    "message": describe_retest(self.state, check) + "; not run again",
                },
            )

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
        info = self._run(run)
        if info.classification is not None:
            raise InvestigationError(f"run #{run} already finished ({info.classification})")
        records = records or []
        with self.store.batch():
            fields = result_fields(records)
            finished: dict[str, Any] = {
                "run": run,
                "classification": classification,
                "reason": reason,
                "records": records,
                "state": state,
                "lines": dict(lines or {}),
            }
            if exit_status is not None:
                finished["exit_status"] = exit_status
            if signal is not None:
                finished["signal"] = signal
            if state is not None:
                parts = component_keys(state)
                finished["state_parts"] = parts
                finished["state_key"] = state_key_of_parts(parts, info.remedies)
            elif info.kind == "shell" and read_before is not None:
                # a shell command reports no state: it ran in the one read just before it
                parts = component_keys(read_before)
                finished["state_before"] = dict(read_before)
                finished["state_parts"] = parts
                finished["state_key"] = state_key_of_parts(parts, info.remedies)
            self._record(EventKind.RUN_FINISHED, finished, ts)
            for part, earlier, previous in self.state.oscillations(run):
                self._record(
                    EventKind.FLAG_RAISED,
                    {
                        "flag": "oscillation",
                        "run": run,
                        "earlier": earlier,
                        "target": info.target,
                        "component": part,
                        "message": self._oscillation(part, earlier, previous, run),
                    },
                )
            self._judge(info, classification, fields)
            self._match_known(info, state, seen or {}, read_before)
        return info

    def _match_known(self, info: RunInfo, state: Mapping[str, Any] | None, seen: Mapping[str, str],
                     read_before: Mapping[str, Any] | None = None) -> None:
        """Record the known upstream issues this run matches (versions measured by the run in
        range, and the signature seen where the entry has one), and the ones an earlier run on
        this target matched that no longer apply (the versions left the range): like drift,
        a match belongs to the state it was seen in."""
        versions = ((state or {}).get("env") or {}).get("distributions") if state else None
        if state is None and read_before is not None and seen:
            # a shell command reports no state: its signatures are matched against the versions
            # read just before it (a command that changed them says so in its own output)
            before = (read_before.get("env") or {}).get("distributions")
            matches = [{**m, "versions_from": "the state read just before the run"}
                       for m in match_run(self.known, before if isinstance(before, dict) else None, seen)
                       if m.get("seen")]
            if matches:
                self._record(EventKind.KNOWN_MATCHED, {"run": info.id, "target": info.target, "matches": matches,
                                                       "left": []})
            return
        if not isinstance(versions, dict) or not versions:
            return  # nothing measured: no match and no leaving, never a guess
        run = self.state.runs[info.id]
        matches = match_run(self.known, versions, seen, run.probe if run.classification == "completed" else None,
                            run.result)
        matched = {m["id"] for m in matches}
        left = []
        st = self.state
        earlier = {m["id"]: m for m in st.known_matches if m["target"] == info.target}
        for ident, m in earlier.items():
            if ident in matched or st.known_live(info.target, ident) is False:
                continue
            why = leaving(m, versions)
            if why is not None:
                left.append({k: m.get(k) for k in ("id", "title", "package", "affected", "fixed_in", "source",
                                                    "checked", "explains")} | {"why": why})
        if matches or left:
            self._record(EventKind.KNOWN_MATCHED, {"run": info.id, "target": info.target, "matches": matches,
                                                   "left": left})
        self._verify_upgrades(info, versions, seen)

    # ------------------------------------------------------------ remedies

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

    def record_fleet(self, fleet: str, how: str, members: list[dict[str, Any]]) -> None:
        """Who *fleet*'s members were when it was used (replay shows them)."""
        self._record(EventKind.FLEET_EXPANDED, {"fleet": fleet, "how": how, "members": members})

    def record_comparison(self, comparison: Comparison) -> list[tuple[str, int]]:
        """Record a fleet's comparison and, where members disagree on what the code runs on
        (a version, a build, the driver, an environment variable), evidence that supports
        version drift on each odd member's run, the members named. (odd member, run) back."""
        self._record(EventKind.FLEET_COMPARED, comparison.to_dict())
        judged = []
        if "version-drift" not in self.state.hypotheses:
            return judged
        total = len(comparison.runs)
        for member, spreads in comparison.odd_members(drift_only=True).items():
            run = comparison.runs[member]
            said = [f"{s.name} {s.odd[member] if s.odd[member] is not None else 'absent'} "
                    f"({len(s.holders)} of {total}: {s.majority if s.majority is not None else 'absent'})" for s in spreads]
            self._record(EventKind.EVIDENCE_RECORDED, {
                "run": run, "hypothesis": "version-drift", "verdict": "supports", "rule": "fleet: members disagree",
                "fields": {"fleet": comparison.fleet, "member": member, "differs": "; ".join(said[:5])
                           + (f" and {len(said) - 5} more" if len(said) > 5 else "")},
            })
            judged.append((member, run))
        return judged

    def record_fleet_hang(self, fleet: str, runs: Mapping[str, int], reading: Mapping[str, Any]) -> int | None:
        """Record a stacks fan-out's ranks read together (*reading*: hypotheses.hang's fields) and
        its evidence on each hang hypothesis, on the run of the member that holds the first odd
        rank (else the first member's run): the run whose state the reading belongs to."""
        odd_member = next((r.get("member") for r in reading.get("odd_ranks") or [] if r.get("member") in runs), None)
        run = runs[odd_member] if odd_member else next(iter(runs.values()), None)
        with self.store.batch():
            self._record(EventKind.FLEET_HANG, {"fleet": fleet, "runs": dict(runs), "run": run,
                                                "reading": dict(reading)})
            if run is None:
                return None
            for hyp_id in self.state.testing("stacks"):
                test = next(t for t in self.state.hypotheses[hyp_id].probes if t.probe == "stacks")
                verdict = judge(test, "completed", reading)
                if verdict is None:
                    continue
                self._record(EventKind.EVIDENCE_RECORDED, {
                    "run": run, "hypothesis": hyp_id, "verdict": verdict.verdict,
                    "rule": f"fleet {fleet}: every member's ranks read together ({verdict.rule})",
                    "fields": {"fleet": fleet, "members": len(runs), **dict(verdict.fields)}})
        return run

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

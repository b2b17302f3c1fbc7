"""Folding runs: a run started, its end (result, state, the state key that makes a retest a
retest), the evidence judged from it, a baseline marked."""

from __future__ import annotations

from collections.abc import Callable

from .folded import FoldedIndexes
from .payloads import BaselineMarked, EvidenceRecorded, RunFinished, RunStarted
from .records import Event, EventKind, Evidence, RunInfo
from .state import canonical, component_keys, state_key_of_parts
from .stored import StateRead
from .verdict import result_fields

__all__ = ["ANSWERED", "HANDLERS"]
# Only these runs asked their question for real; a transport fault or a kill did not, so a
# repeat of one is not a circular retest.
ANSWERED = ("completed", "failed", "no_result")



def run_started(st: FoldedIndexes, e: Event) -> None:
    p = RunStarted.of(e)
    run = RunInfo(id=p.run, probe=p.probe, params=p.params, target=p.target, kind=p.kind, check_key=p.check_key,
                  started_ts=e.ts, started_seq=e.seq, remedies=tuple(p.remedies), retest_of=p.retest_of,
                  stochastic=bool(p.stochastic), observed_seq=p.observed)
    st.runs[run.id] = run
    st._node(f"run:{run.id}", kind="run")
    st._node(f"probe:{run.probe}", kind="probe")
    st._edge(f"run:{run.id}", f"probe:{run.probe}", "of")


def run_finished(st: FoldedIndexes, e: Event) -> None:
    p = RunFinished.of(e)
    run = st.runs[p.run]
    run.classification = p.classification
    run.reason = p.reason
    run.records = p.records
    run.result = result_fields(run.records)
    run.lines = p.lines
    run.exit_status = p.exit_status
    run.signal = p.signal
    run.finished_ts = e.ts
    run.finished_seq = e.seq
    st._node(f"run:{run.id}", kind="run", classification=run.classification)
    if p.state is not None:
        reported = e.data["state"]  # the stored object itself, as every reader had it
        run.state, run.read = reported, p.state
        # Keys are computed once, when the run is recorded; older events lack them.
        parts = p.state_parts or component_keys(reported)
        run.state_parts = parts
        run.state_key = p.state_key or state_key_of_parts(parts, run.remedies)
        st._known_state[run.target] = (reported, parts)
        st._known_state_seq[run.target] = e.seq
        for part, key in parts.items():
            history = st._history.setdefault((run.target, part), [])
            if not history or history[-1][0] != key:
                history.append((key, run.id))
    elif run.kind == "shell" or p.state_unknown:
        before = p.state_before
        if run.kind == "shell" and isinstance(before, dict):
            # the state the command ran in (read just before it): the same command in the
            # same state is the same experiment, a circular retest like any probe's
            parts = p.state_parts or component_keys(before)
            run.state, run.read, run.state_parts = before, StateRead.from_dict(before), parts
            run.state_key = p.state_key or state_key_of_parts(parts, run.remedies)
            if run.params.get("poll"):  # declared a poll: its repeats are meant, never flagged
                st._polls.add((run.target, str(run.params.get("cmd"))))
        # A shell command may have changed anything (pip install, rm -rf a cache):
        # what we knew of the target's state is no longer known.
        st._known_state[run.target] = None
    if run.classification in ANSWERED and run.state_key is not None:
        st._by_check[(run.check_key, run.state_key)] = run.id
        st._last_asked[(run.probe, canonical(run.params), run.target)] = run.id


def evidence(st: FoldedIndexes, e: Event) -> None:
    p = EvidenceRecorded.of(e)
    state_key = st.runs[p.run].state_key if p.run in st.runs else None
    entry = Evidence(run=p.run, hypothesis=p.hypothesis, verdict=p.verdict, rule=p.rule, fields=p.fields, seq=e.seq,
                     state_key=state_key)
    st.evidence.setdefault(p.hypothesis, []).append(entry)
    if entry.verdict != "inconclusive":
        _last, by_state = st._decisive.get(entry.hypothesis, (entry, {}))
        by_state.setdefault(entry.state_key, set()).add(entry.verdict)
        st._decisive[entry.hypothesis] = (entry, by_state)
    st._by_run.setdefault(p.run, []).append(entry)
    counts = st._counts.setdefault(p.hypothesis, {"supports": 0, "refutes": 0, "inconclusive": 0})
    counts[p.verdict] += 1
    st._edge(f"run:{p.run}", f"hyp:{p.hypothesis}", "evidence", verdict=p.verdict)
    if p.verdict == "refutes":
        st._refuted_at[p.hypothesis] = st.runs[p.run].state_key


def baseline(st: FoldedIndexes, e: Event) -> None:
    p = BaselineMarked.of(e)
    st.baselines[p.target] = p.run


# the handler of each event kind above, by kind (hypotheses/model.py puts the tables together)
HANDLERS: dict[str, Callable[[FoldedIndexes, Event], None]] = {
    EventKind.RUN_STARTED: run_started,
    EventKind.RUN_FINISHED: run_finished,
    EventKind.EVIDENCE_RECORDED: evidence,
    EventKind.BASELINE_MARKED: baseline,
}

"""Running a probe inside an investigation: check for retests, capture, record the outcome.

The glue between :mod:`probes` (which runs things) and :class:`Investigation` (which
records them). The UI and the CLI call :func:`run_probe`; it never blocks the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..hypotheses import PreRunCheck, fingerprint_changes
from ..hypotheses.cache_keys import with_cache_changes
from ..hypotheses.hang import with_hang_analysis
from ..hypotheses.known import SignatureWatch
from ..hypotheses.stored import KnownAtRun
from ..probes import ProbeError, ProgramSpec, Runner, RunOutcome, Target, execute
from ..probes.catalog import ProbeDef
from ..probes.py_spy import ensure_py_spy
from .errors import CircularRetest
from .findings import FindingWatch
from .investigation import Investigation
from .overlay import overlay_prefix, with_overlay

__all__ = [
    "CircularRetest",
    "Measured",
    "RunReport",
    "RunRequest",
    "check_run",
    "measure_state",
    "request_for_probe",
    "request_for_shell",
    "run_probe",
]


@dataclass(frozen=True)
class RunRequest:
    probe: str  # probe id, "script:<name>" or "shell"
    kind: str  # "probe" | "script" | "shell"
    spec: ProgramSpec  # what is sent (runtime params, baseline included)
    params: dict[str, Any]  # what identifies the check (recorded; baseline by run number)
    timeout: float | None = None
    baseline: dict[str, Any] | None = None  # the baseline fingerprint a probe's result is diffed with
    compares: bool = False  # the probe's result is compared with the target's baseline
    stochastic: bool = False  # a sample (a race): repeating it adds trials
    analysis: str | None = None  # what is read from the records into the result ("stacks")


@dataclass
class RunReport:
    run: int
    outcome: RunOutcome
    check: PreRunCheck
    output: str  # where the full output is stored

    def to_json(self, inv: Investigation) -> dict[str, Any]:
        info = inv.state.runs[self.run]
        return {
            "run_id": self.run,
            "probe": info.probe,
            "target": info.target,
            "classification": self.outcome.classification,
            "reason": self.outcome.reason,
            "records": self.outcome.records,
            "state_key": info.state_key,
            "lines": self.outcome.lines,
            "bytes": self.outcome.bytes,
            "output": self.output,
            "retest_of": info.retest_of,
            "state_before": "unknown: " + self.check.unknown if self.check.unknown else
            ("measured" if self.check.measured else "predicted"),
            "evidence": [{"hypothesis": e.hypothesis, "verdict": e.verdict, "why": e.why()}
                         for e in inv.state.verdict_per_hypothesis(self.run)],
            "known": known_json(inv.state.known_for_run(self.run)),
            "seconds": round(self.outcome.seconds, 3),
        }


def known_json(said: KnownAtRun) -> list[dict[str, Any]]:
    """A run's known upstream issues as `probe run --json` gives them: each match (``status``
    "matched") and each entry that stopped applying at it (``status`` "no longer applies")."""
    keys = ("id", "title", "package", "measured", "affected", "fixed_in", "source", "checked", "explains",
            "workarounds", "seen")
    out = [{"status": "matched", **{k: m.stored(k) for k in keys}} for m in said["matches"]]
    out += [{"status": "no longer applies", **{k: m.stored(k) for k in keys if m.has(k)}, "why": m.stored("why")}
            for m in said["left"]]
    return out


def request_for_probe(inv: Investigation, probe: ProbeDef, target: Target, params: dict[str, Any]) -> RunRequest:
    missing = probe.missing(params)
    if missing:
        sets = " and ".join(f"{n} = ..." for n in missing)
        raise ProbeError(
            f"{probe.id} needs {' and '.join(missing)} (the script that starts your job's workers, relative to "
            f"the target's workdir): set it under [probes.{probe.id}] in sleuth.toml ({sets}) or pass "
            f"--param {missing[0]}=PATH; nothing was run")
    merged = {**probe.params, **params}
    runtime = dict(merged)
    baseline = None
    if probe.baseline:
        base = inv.baseline(target.name)
        if base is not None and isinstance(base.result.get("fingerprint"), dict):
            baseline = base.result["fingerprint"]
            merged["baseline_run"] = base.id
    spec = ProgramSpec(probe=probe.id, source=probe.source, filename=str(probe.path.name), params=runtime, fork=probe.fork,
                       parts=probe.part_sources)
    kind = "probe" if probe.path.parent.name == "scripts" else "script"
    name = probe.id if kind == "probe" else f"script:{probe.path.name}"
    return RunRequest(name, kind, spec, merged, probe.timeout, baseline, bool(probe.baseline), probe.stochastic,
                      probe.analysis)


def with_drift(records: list[dict[str, Any]], baseline: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The result record (the one with a ``fingerprint``) with what changed since *baseline*:
    ``has_baseline``, ``drift`` (how many), ``drift_keys`` and ``changes`` ({name, before,
    after}, every distribution named with both versions)."""
    out = []
    for rec in records:
        if rec.get("kind") == "result" and isinstance(rec.get("fingerprint"), dict):
            changes = fingerprint_changes(baseline, rec["fingerprint"]) if baseline is not None else []
            rec = {**rec, "has_baseline": baseline is not None, "drift": len(changes),
                   "drift_keys": [c.name for c in changes], "changes": [c.to_dict() for c in changes]}
        out.append(rec)
    return out


STATE_READ = ProgramSpec(probe="state", mode="state", fork=True)


@dataclass(frozen=True)
class Measured:
    """The target's state read just before a run, or why it could not be read."""

    state: dict[str, Any] | None
    unknown: str | None = None
    seconds: float = 0.0


class _Discard:
    def write(self, stream: str, data: bytes) -> None:
        pass

    def flush(self) -> None:
        pass


async def measure_state(
    target: Target,
    *,
    runner: Runner | None = None,
    timeout: float = 60.0,
    prefix: tuple[str, ...] = (),
    params: dict[str, Any] | None = None,
) -> Measured:
    """Read *target*'s state now — interpreter, distributions, code tree hash, compile
    caches — with the prelude alone (through the resident agent: milliseconds; else one
    short session), under the overlays *prefix* when an upgrade is active. A transport fault
    or any other end is an unknown state, never a guess."""
    spec = STATE_READ
    own = (params or {}).get("env")  # a probe's own environment: the cache folders it names are read too
    if isinstance(own, dict):
        spec = replace(spec, params={"env": {k: v for k, v in own.items() if k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}})
    outcome = await execute(target, with_overlay(spec, prefix), _Discard(), runner=runner, timeout=timeout)
    if outcome.classification == "completed" and outcome.state is not None:
        return Measured(outcome.state, None, outcome.seconds)
    return Measured(None, f"the state of {target.name} could not be read ({outcome.classification}: {outcome.reason})",
                    outcome.seconds)


def request_for_shell(command: str, timeout: float | None = None, hook: bool = False, poll: bool = False,
                      sample: bool = False) -> RunRequest:
    """A shell command as a run. It is judged in the state read just before it: the same command
    in the same state is a circular retest, unless *poll* (``nvidia-smi``, the tail of a log)
    declares it meant to repeat (once: later runs of the command on that target are polls too),
    or *sample*: a sample of a flaky failure, whose runs in one state pool as trials."""
    # forked from the agent: the shell command runs in bash, the fork only saves starting Python
    spec = ProgramSpec(probe="shell", mode="shell", shell=command, fork=True, hook=hook)
    params = {"cmd": command, **({"hook": True} if hook else {}), **({"poll": True} if poll else {}),
              **({"sample": True} if sample else {})}
    return RunRequest("shell", "shell", spec, params, timeout)


async def check_run(
    inv: Investigation,
    target: Target,
    request: RunRequest,
    measured: Measured | None = None,
    *,
    runner: Runner | None = None,
) -> PreRunCheck:
    """Measure *target*'s state (unless given) and say whether *request* repeats an earlier
    run in it; the state read is recorded when it tells something (see observe_state)."""
    if measured is None:
        measured = await measure_state(target, runner=runner, prefix=overlay_prefix(inv, target.name),
                                       params=request.params)
    check = inv.check_before_run(request.probe, request.params, target.name, state=measured.state,
                                 definition=target.definition(), unknown=measured.unknown, stochastic=request.stochastic)
    seq = inv.observe_state(target.name, check)
    return replace(check, observed_seq=seq) if seq else check


async def run_probe(
    inv: Investigation,
    target: Target,
    request: RunRequest,
    *,
    force: bool = False,
    runner: Runner | None = None,
    cancel: asyncio.Event | None = None,
    timeout: float | None = None,
    on_output: Callable[[str, bytes], None] | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    check: PreRunCheck | None = None,
    reason: str | None = None,
) -> RunReport:
    """Run *request* on *target* and record it (*reason*: why it runs although flagged). First the target's state is read (unless
    *check*, made by :func:`check_run` just before, brings it): a run that would repeat an
    earlier one in exactly this state raises CircularRetest unless *force*; an unreadable
    state flags nothing."""
    if check is None:
        check = await check_run(inv, target, request, runner=runner)
    if check.flagged and not force:
        raise CircularRetest(inv.describe_check(check), check)
    inv.adopt_probe(request.probe)  # a dormant family (the hang hypotheses) joins when its probe runs
    spec = request.spec
    if request.analysis == "stacks" and not spec.params.get("py_spy"):
        # py-spy at the far end: found there, or copied from here (same OS and architecture)
        path, _how = await ensure_py_spy(target, runner)
        if path:
            spec = replace(spec, params={**spec.params, "py_spy": path})
    start = inv.begin_run(request.probe, request.params, target.name, kind=request.kind, check=check, reason=reason)
    if on_start:
        on_start(start.run)
    capture = inv.capture(start.run)
    completed = False
    watch = FindingWatch()  # what the output says of the target's environment (said once per target)
    signatures = SignatureWatch(inv.known)  # the known upstream issues' signatures, as output streams

    def output(stream: str, data: bytes) -> None:
        watch.feed(stream, data)
        signatures.feed(stream, data)
        if on_output is not None:
            on_output(stream, data)

    try:
        outcome = await execute(
            target,
            with_overlay(spec, overlay_prefix(inv, target.name)),
            capture,
            runner=runner,
            cancel=cancel,
            timeout=timeout or request.timeout,
            on_output=output,
            on_record=on_record,
        )
        completed = True
    finally:
        capture.close(complete=completed)
        if not completed:  # interrupted here (Ctrl-C): still one classification, never lost
            inv.finish_run(
                start.run, "killed", "sleuth itself was interrupted while the run was going", [], None, capture.lines,
                seen=signatures.seen,
            )
    if request.compares:
        outcome.records = with_drift(outcome.records, request.baseline)
    if request.analysis == "stacks":
        outcome.records = with_hang_analysis(outcome.records)
    if request.analysis == "compile-cache":  # what changed in the key since the last run that hit
        outcome.records = with_cache_changes(inv.state, target.name, request.params, outcome.records)
    inv.finish_run(
        start.run,
        outcome.classification,
        outcome.reason,
        outcome.records,
        outcome.state,
        outcome.lines,
        exit_status=outcome.exit_status,
        signal=outcome.signal,
        seen=signatures.seen,
        read_before=check.state,
    )
    for finding in watch.seen:
        inv.record_finding(target.name, finding.id, finding.sentence, start.run)
    return RunReport(start.run, outcome, check, f"{Path(inv.path)}#run/{start.run}")

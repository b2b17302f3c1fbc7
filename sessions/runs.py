"""Running a probe inside an investigation: check for retests, capture, record the outcome.

The glue between :mod:`probes` (which runs things) and :class:`Investigation` (which
records them). The UI and the CLI call :func:`run_probe`; it never blocks the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sleuth.hypotheses import PreRunCheck
from sleuth.probes import AgentPool, ProgramSpec, RunOutcome, SshPool, Target, Transport, execute
from sleuth.probes.catalog import ProbeDef

from .errors import CircularRetest
from .investigation import Investigation

__all__ = ["CircularRetest", "RunRequest", "RunReport", "run_probe", "request_for_probe", "request_for_shell"]


@dataclass(frozen=True)
class RunRequest:
    probe: str  # probe id, "script:<name>" or "shell"
    kind: str  # "probe" | "script" | "shell"
    spec: ProgramSpec  # what is sent (runtime params, baseline included)
    params: dict[str, Any]  # what identifies the check (recorded; baseline by run number)
    timeout: float | None = None


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
            "evidence": [{"hypothesis": e.hypothesis, "verdict": e.verdict} for e in inv.state.verdicts_for(self.run)],
            "seconds": round(self.outcome.seconds, 3),
        }


def request_for_probe(inv: Investigation, probe: ProbeDef, target: Target, params: dict[str, Any]) -> RunRequest:
    merged = {**probe.params, **params}
    runtime = dict(merged)
    if probe.baseline:
        base = inv.baseline(target.name)
        if base is not None and isinstance(base.result.get("fingerprint"), dict):
            runtime["baseline"] = base.result["fingerprint"]
            merged["baseline_run"] = base.id
    spec = ProgramSpec(probe=probe.id, source=probe.source, filename=str(probe.path.name), params=runtime, fork=probe.fork)
    kind = "probe" if probe.path.parent.name == "scripts" else "script"
    name = probe.id if kind == "probe" else f"script:{probe.path.name}"
    return RunRequest(name, kind, spec, merged, probe.timeout)


def request_for_shell(command: str, timeout: float | None = None) -> RunRequest:
    spec = ProgramSpec(probe="shell", mode="shell", shell=command)
    return RunRequest("shell", "shell", spec, {"cmd": command}, timeout)


async def run_probe(
    inv: Investigation,
    target: Target,
    request: RunRequest,
    *,
    force: bool = False,
    pool: SshPool | None = None,
    agents: AgentPool | None = None,
    transport: Transport | None = None,
    cancel: asyncio.Event | None = None,
    timeout: float | None = None,
    on_output: Callable[[str, bytes], None] | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> RunReport:
    """Run *request* on *target* and record it; CircularRetest first unless *force*."""
    check = inv.check_before_run(request.probe, request.params, target.name)
    if check.flagged and not force:
        raise CircularRetest(inv.describe_check(check), check)
    start = inv.begin_run(request.probe, request.params, target.name, kind=request.kind)
    if on_start:
        on_start(start.run)
    capture = inv.capture(start.run)
    completed = False
    try:
        outcome = await execute(
            target,
            request.spec,
            capture,
            pool=pool,
            agents=agents,
            transport=transport,
            cancel=cancel,
            timeout=timeout or request.timeout,
            on_output=on_output,
            on_record=on_record,
        )
        completed = True
    finally:
        capture.close(complete=completed)
        if not completed:  # interrupted here (Ctrl-C): still one classification, never lost
            inv.finish_run(
                start.run, "killed", "sleuth itself was interrupted while the run was going", [], None, capture.lines
            )
    inv.finish_run(
        start.run,
        outcome.classification,
        outcome.reason,
        outcome.records,
        outcome.state,
        outcome.lines,
        exit_status=outcome.exit_status,
        signal=outcome.signal,
    )
    return RunReport(start.run, outcome, check, f"{Path(inv.path)}#run/{start.run}")

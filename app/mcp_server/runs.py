"""The MCP tools that run checks and read what they wrote: probe_run (a probe, a script, a
shell command; a fleet), stacks (every rank of a job) and run_output (the stored output, a
page at a time). A repeat in the same state is refused with the earlier run's answer."""

from __future__ import annotations

import asyncio
import base64
import re
from typing import Any

from ...sessions import CheckAsk, CircularRetest, Investigation, request_for_check, resolve_check, run_fleet
from ...sessions.checks import Declined, run_resolved
from ...sessions.output_index import STREAMS
from ...sessions.paging import line_total, matching_lines
from ..errors import ProbesError, SessionError
from ..excerpt import DEFAULT_BUDGET
from .answers import OutputPage, RunAnswer, run_answer, state_said
from .tools import FORCE_SAID, READS, REASON_SAID, TARGET_SAID, Context, Sleuth, ToolError, hints, regex, tool

__all__ = ["PAGE_BYTES", "PAGE_LINES", "TOOLS", "output_page", "run_check"]

PAGE_LINES = 200  # run_output's default page
PAGE_BYTES = 64_000  # and its most bytes of text per page


@tool(hints(destructive=True, open_world=True), RunAnswer,
      probe="a built-in probe's id (see `status`'s probes); exactly one of probe, script, shell",
      script="the path of a Python file that speaks the probe protocol",
      shell="a shell command, run as `bash -c` at the far end, sent byte for byte through every hop",
      target=TARGET_SAID + "; a fleet runs a probe on every member",
      params="the probe's parameters, as an object (never a string to quote)",
      trials="repetitions, where the probe has them",
      timeout="seconds before the run is stopped",
      force=FORCE_SAID, reason=REASON_SAID,
      budget="the excerpt's most bytes (default 12000; 1000 to 200000)",
      grep="a regex: the lines matching it come first in the excerpt",
      poll="a shell command meant to repeat (nvidia-smi, the tail of a log): said once, its repeats are never "
           "refused",
      sample="a shell command that is one sample of a flaky failure: its runs in the same state pool as trials "
             "(the answer's `samples`: how many failed of how many), never refused")
async def probe_run(
    sl: Sleuth,
    probe: str | None = None,
    script: str | None = None,
    shell: str | None = None,
    target: str = "local",
    params: dict[str, Any] | None = None,
    trials: int | None = None,
    timeout: float | None = None,
    force: bool = False,
    reason: str | None = None,
    budget: int = DEFAULT_BUDGET,
    grep: str | None = None,
    poll: bool = False,
    sample: bool = False,
    ctx: Context = None,  # type: ignore[assignment]
) -> dict[str, Any]:
    """Run a check on the target and record it: a built-in `probe` (see `status`), a `script`
    (a Python file with the probe protocol) or a `shell` command (run as `bash -c` at the far
    end, sent without re-quoting through every hop). `params` is an object, `trials` the
    number of repetitions where the probe has them. A repeat of an earlier check in the same
    measured state, a shell command's included, is refused with that run's answer; `force`
    runs it anyway and needs a `reason` (recorded). `poll` declares a shell command meant to
    repeat (nvidia-smi, the tail of a log): said once, its repeats are never refused; `sample`
    says a shell command is one sample of a flaky failure, its runs in one state pooled. The
    answer: the run's id, classification and reason, verdicts, flags,
    findings, records, line counts and `output`, an excerpt of at most `budget` bytes
    (default 12000) that says how many lines it left out; `grep` (a regex) puts the lines
    you look for first. Read the rest with run_output."""
    asked = dict(params or {})
    if trials is not None:
        asked["trials"] = trials
    ask = CheckAsk(probe=probe, script=script, shell=shell, target=target, params=asked, force=force,
                   reason=reason, poll=poll, sample=sample)
    return await run_check(sl, ctx, ask, timeout=timeout, budget=budget, grep=grep)


@tool(hints(open_world=True), RunAnswer, target=TARGET_SAID,
      job="a launcher or a process whose job to read", pid="a process id", match="a pattern of the command line",
      samples="how many readings per rank", force=FORCE_SAID, reason=REASON_SAID)
async def stacks(
    sl: Sleuth,
    target: str = "local",
    job: str | None = None,
    pid: str | None = None,
    match: str | None = None,
    samples: int | None = None,
    force: bool = False,
    reason: str | None = None,
    ctx: Context = None,  # type: ignore[assignment]
) -> dict[str, Any]:
    """Read every rank of a stopped or slow job (py-spy, the flight recorder): which rank is
    the odd one, where each one is. `job` is a launcher or a process to read the job of,
    `pid` a process id, `match` a pattern of the command line. The answer is probe_run's for
    the stacks probe, with the reading (`verdict`, `sentences`, `odd_ranks`) on top."""
    params: dict[str, Any] = {}
    for key, value in (("job", job), ("pid", pid), ("match", match), ("samples", samples)):
        if value not in (None, ""):
            params[key] = value
    answer = await probe_run(sl, probe="stacks", target=target, params=params, force=force, reason=reason, ctx=ctx)
    if "records" in answer:
        result = next((r for r in answer["records"] if r.get("kind") == "result"), {})
        answer["reading"] = {k: result.get(k) for k in ("verdict", "sentences", "odd_ranks", "healthy", "ranks",
                                                        "missing", "stuck", "stragglers") if k in result}
    return answer

@tool(READS, OutputPage,
      run="the run's id (the same as run_id, probe_run's name for it; give one of the two)",
      run_id="the run's id, as probe_run answers it (or `run`)",
      start="the first line, 1-based", count="the most lines on the page (default 200)",
      grep="a regex: only the lines matching it, from `start` on", stream="'stdout' or 'stderr'; both when left out",
      ignore_case="grep without regard to case")
def run_output(
    sl: Sleuth,
    run: int | None = None,
    run_id: int | None = None,
    start: int = 1,
    count: int = PAGE_LINES,
    grep: str | None = None,
    stream: str | None = None,
    ignore_case: bool = False,
    ctx: Context = None,  # type: ignore[assignment]
) -> dict[str, Any]:
    """A run's stored output, every byte as the run wrote it, a page at a time: lines from
    `start` (1-based), at most `count` (and 64000 bytes of text) — of one `stream`
    ('stdout' or 'stderr') or both as they came; with `grep` (a regex) only the matching
    lines from `start` on. Each page says how many lines there are, how many matched, and
    `next_start` for the next page. The run is `run_id` (as probe_run answers it) or `run`. A line
    whose bytes are not UTF-8 says so (`utf8: false`) and carries them exactly (`base64`); a last
    line the run ended without a newline says so (`newline: false`)."""
    if run is not None and run_id is not None and run != run_id:
        raise ToolError(f"run={run} and run_id={run_id}: give one of them (they are the same argument)")
    run = run if run is not None else run_id
    if run is None:
        raise ToolError("missing argument 'run_id' (the run's id, as probe_run answers it; `run` also works)")
    if stream not in (None, *STREAMS):
        raise ToolError(f"stream {stream!r}: use 'stdout', 'stderr' or leave it out for both")
    if start < 1 or count < 1:
        raise ToolError("start is a 1-based line number and count at least 1")
    pattern = regex(grep, ignore_case) if grep else None
    with sl.open(ctx) as inv:
        if run not in inv.state.runs:
            raise ToolError(f"no run #{run}; runs: {', '.join(f'#{r}' for r in inv.state.runs) or 'none yet'}")
        return output_page(inv, run, start, count, stream, pattern)


async def run_check(sl: Sleuth, ctx: Context | None, ask: CheckAsk, *, timeout: float | None, budget: int,
                    grep: str | None) -> dict[str, Any]:
    """probe_run's work: the check resolved (a fleet goes to :func:`_fleet`), run under the
    refuse policy (a circular retest is declined, and answered with the earlier run's answer)."""
    if grep:
        regex(grep)
    config = sl.config()
    try:
        resolved = resolve_check(ask, config, root=sl.ws.root, reason_needed=True)
    except (ProbesError, SessionError) as exc:
        raise ToolError(str(exc)) from None
    tgt = resolved.target
    force, reason = ask.force, ask.reason
    if resolved.fleet:
        assert resolved.probe is not None
        return await _fleet(sl, ctx, config, tgt, resolved.probe, dict(ask.params), force, reason)
    with sl.open(ctx) as inv:
        request = request_for_check(inv, resolved, config)
        runner = sl.runner()
        seen = {"lines": 0, "run": None}

        def counted(_stream: str, data: bytes) -> None:
            seen["lines"] += data.count(b"\n")

        def started(run: int) -> None:
            seen["run"] = run

        progress = asyncio.ensure_future(_progress(ctx, seen))
        try:
            report = await run_resolved(inv, resolved, config, request=request, timeout=timeout, runner=runner,
                                        on_output=counted, on_start=started)
        finally:
            progress.cancel()
            if runner is not None:
                await runner.close()
        if isinstance(report, Declined):
            return refused_answer(inv, report.flag, tgt.name, budget, grep)
        out = run_answer(inv, report.run, budget=budget, grep=grep, report=report)
        out["state"] = state_said(inv, tgt.name)
        samples = inv.state.shell_samples(report.run)
        if samples is not None:  # a sample of a flaky failure, pooled with the earlier ones in this state
            out["samples"] = samples
        if report.check.unknown:
            out["state"]["before_run"] = f"unknown ({report.check.unknown}): nothing could be flagged"
        if force and reason:
            out["forced_because"] = reason.strip()
        return out


def refused_answer(inv: Investigation, flag: CircularRetest, target: str, budget: int, grep: str | None) -> dict[str, Any]:
    """A circular retest refused: why, the earlier run, how to run it anyway, and its answer."""
    earlier = flag.check.retest_of
    answer: dict[str, Any] = {
        "refused": "circular-retest",
        "message": str(flag),
        "earlier_run": earlier.id if earlier is not None else None,
        "how_to_run_anyway": "change something first (a remedy, an upgrade, the code), or pass force=true "
                             "with a reason",
        "state": state_said(inv, target),
    }
    if earlier is not None:
        answer["earlier"] = run_answer(inv, earlier.id, budget=budget, grep=grep)
    return answer


def output_page(inv: Investigation, run: int, start: int, count: int, stream: str | None,
                pattern: re.Pattern[str] | None) -> dict[str, Any]:
    """run_output's page: at most *count* lines (and PAGE_BYTES of text) from line *start*
    (1-based), the matches of *pattern* counted past the page, the next page's start."""
    total = line_total(inv.store, run, stream)
    summary = inv.store.output_summary(run)
    lines: list[dict[str, Any]] = []
    used = matched = odd = 0
    next_start: int | None = None
    for ln in matching_lines(inv.store, run, start - 1, stream, pattern):
        matched += 1
        if next_start is not None:
            continue  # counting the matches past this page
        number = ln.number + 1
        text = ln.text.rstrip("\n")
        if len(lines) >= count or used + len(text) > PAGE_BYTES and lines:
            next_start = number
            if pattern is None:
                break
            continue
        item: dict[str, Any] = {"n": number, "stream": ln.stream, "text": text}
        if ln.raw is not None:
            item.update(utf8=False, base64=base64.b64encode(ln.raw).decode("ascii"))
            odd += 1
        if not ln.newline:
            item["newline"] = False
        lines.append(item)
        used += len(text)
    info = inv.state.runs[run]
    out: dict[str, Any] = {
        "run": run, "run_id": run, "lines_total": total, "stream": stream or "both",
        "state": {"target": info.target, "run_state_key": info.state_key,
                  "said": f"as run #{run} wrote it on {info.target}"
                          + (f", in state {info.state_key}" if info.state_key else
                             " (a command that reports no state of its own)")},
        "from": start, "lines": lines, "complete": summary["complete"],
        "next_start": next_start,
    }
    if pattern is not None:
        out["grep"] = pattern.pattern
        out["matched"] = matched
    out["said"] = (f"lines {lines[0]['n']}–{lines[-1]['n']} of {total:,}" if lines else
                   f"no line{' matched' if pattern is not None else ''} from {start} on (of {total:,})")
    if next_start is not None:
        out["said"] += f"; more from start={next_start}"
    if odd:
        out["not_utf8"] = odd
        out["said"] += (f"; {odd} line{'s' * (odd != 1)} not UTF-8 (shown with U+FFFD; each one's exact bytes "
                        "in its base64; `sleuth output RUN --raw` writes them all)")
    return out


PROGRESS_S = 5.0


async def _progress(ctx: Context | None, seen: dict[str, Any]) -> None:
    """While a run goes: a progress notification every few seconds ("run #7: 1,204 lines so
    far"), so a client that keeps a long call alive on progress does, and its user sees it move."""
    if ctx is None:
        return
    ticks = 0
    while True:
        await asyncio.sleep(PROGRESS_S)
        ticks += 1
        run = f"run #{seen['run']}" if seen["run"] else "reading the target's state"
        try:
            n = seen["lines"]
            await ctx.report_progress(ticks, None, f"{run}: {n:,} line{'s' * (n != 1)} so far")
        except Exception:  # a client that takes no progress: the run goes on regardless
            return


async def _fleet(sl: Sleuth, ctx: Context | None, config: Any, fleet: Any, probe: Any, params: dict[str, Any],
                 force: bool, reason: str | None) -> dict[str, Any]:
    """One probe on every member of a fleet; the comparison, the odd ones named."""
    with sl.open(ctx) as inv:
        runner = sl.runner()
        try:
            report = await run_fleet(inv, config, fleet, probe, params, runner=runner, force=force)
        finally:
            if runner is not None:
                await runner.close()
        out = report.to_json()
        out["not_run_again"] = {m: {"earlier_run": r, "said": "the same state as then; its answer stands"}
                                for m, r in report.reused.items()}
        out["answers"] = {m: run_answer(inv, r.run, budget=4_000) for m, r in report.reports.items()}
        if force and reason:
            out["forced_because"] = reason
        return out


TOOLS = [probe_run, stacks, run_output]

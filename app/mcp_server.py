"""`sleuth mcp`: the investigation as tools a coding agent calls (Model Context Protocol).

The same investigation the CLI and the UI use (found as the CLI finds it: ``.sleuth/`` here
or above, or ``--session``), through the official SDK (``mcp``, extra ``sleuth[mcp]``): on
stdio, how agent clients start a tool server, or on streamable HTTP bound to loopback with a
bearer token (:func:`serve_http`).

Every tool answers one JSON object. What an agent needs and a shell tool never gave it:

* ``probe_run`` takes ``params`` as an object (never a string to quote) and a ``shell``
  command that sleuth sends on the interpreter's stdin, never re-quoted per hop; it answers
  the run's classification, verdicts, flags, findings and records, and a bounded excerpt of
  the output (app/excerpt.py) that says how many lines it left out and how to read them.
* a circular retest is **refused**, the earlier run's answer in the refusal; ``force`` needs
  a ``reason``, recorded with the run; an oscillating state is flagged in the answer.
* every answer says the state it speaks of (``state``: the target's last known state, the
  event it was read at) and the session's event count.
* every event says who wrote it: ``mcp:<client name>`` (the client's own name from its
  handshake), beside the UI's and the CLI's.

Tool errors (an unknown id, a refused argument, a target not reached) come back as MCP tool
errors whose text is the one line the CLI would print; nothing is written by a refused call.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import difflib
import hmac
import inspect
import json
import os
import re
import secrets
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import Field, ValidationError

from .. import __version__
from .errors import UsageError

try:
    from mcp.server import MCPServer
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from mcp.types import CallToolResult, TextContent, ToolAnnotations
except ImportError:  # the base install stays lean: the SDK is the extra's
    raise UsageError("sleuth mcp needs the MCP SDK: pip install 'sleuth[mcp]'") from None

from ..probes import builtin_probes, load_config
from ..probes.broker import BrokerClient
from ..sessions import (
    CheckAsk,
    CircularRetest,
    Investigation,
    Workspace,
    request_for_check,
    resolve_check,
    run_fleet,
    run_probe,
)
from ..sessions.store import STREAMS
from .errors import HypothesisError, ProbesError, ReachError, SessionError
from .excerpt import DEFAULT_BUDGET, excerpt
from .mcp_answers import Events, Hypotheses, Known, OutputPage, Remedy, RunAnswer, Status, Written, render
from .timeline import event_sentence, run_changes, run_findings
from .views import investigation_next_step

__all__ = ["build_server", "cmd_mcp", "serve_http"]

PAGE_LINES = 200  # run_output's default page
PAGE_BYTES = 64_000  # and its most bytes of text per page
INSTRUCTIONS = """\
sleuth keeps the hypotheses of a failure hunt on remote GPU training, runs checks on the real
target (ssh, jump hosts, containers), keeps every byte of their output, and says what each
result means for each hypothesis in the state the target was in.
Start with `status` (it suggests the next step). Run checks with `probe_run` (a built-in
`probe`, a `script` path or a `shell` command; `params` as an object). Its answer holds a
bounded excerpt of the output; read the rest with `run_output` (line ranges, grep).
A check repeated in the same state is refused with the earlier answer: change something
first, or pass force=true with a reason. Record what you see with `symptom_add` and `note`.
"""


class _Failed(Exception):
    """A tool's one-line refusal (bad input, not reached); becomes an MCP tool error."""


def _author(ctx: Context | None) -> str:
    """mcp:<the client's name from its handshake>, else mcp."""
    try:
        params = ctx.session.client_params if ctx is not None else None
        name = params.client_info.name if params is not None and params.client_info is not None else ""
    except (AttributeError, LookupError, RuntimeError):
        name = ""
    return f"mcp:{name}" if name else "mcp"


class Sleuth:
    """The tools' shared work: the workspace, its config, the session they write to."""

    def __init__(self, workspace: Workspace, session: str | None = None, no_agent: bool = False) -> None:
        self.ws = workspace
        self.session = session
        self.no_agent = no_agent

    @contextmanager
    def open(self, ctx: Context | None) -> Iterator[Investigation]:
        """The investigation for one call, its events said to be this client's."""
        try:
            inv = self.ws.open(self.session)
        except (SessionError, HypothesisError, ProbesError) as exc:
            raise ToolError(str(exc)) from None
        inv.store.author = _author(ctx)
        try:
            yield inv
        except ReachError as exc:  # a transport fault: never evidence
            raise ToolError(f"not reached: {exc}") from None
        except (UsageError, SessionError, ProbesError, HypothesisError) as exc:
            raise ToolError(str(exc)) from None
        finally:
            inv.close()

    def config(self):
        try:
            return load_config(self.ws.config_path)
        except (ProbesError, SessionError) as exc:
            raise ToolError(str(exc)) from None

    def runner(self) -> BrokerClient | None:
        return None if self.no_agent else BrokerClient(self.ws.dir)


def state_said(inv: Investigation, target: str) -> dict[str, Any]:
    """The state an answer speaks of: *target*'s last known state (its key, the run or read
    that told it, the versions in it) and the session's last event. "unknown" when a shell
    command may have changed anything since, or nothing was read yet."""
    st = inv.state
    out: dict[str, Any] = {"target": target, "as_of_event": st.last_seq}
    known = st.known_state(target)
    if known is None:
        out["known"] = False
        out["said"] = (f"the state of {target} is unknown (never read, or a shell command ran since): "
                       "the next probe_run reads it before it runs")
        return out
    state, _parts = known
    env: dict[str, Any] = state.get("env") or {}
    torch = env.get("torch")
    dists: dict[str, Any] = env.get("distributions") or {}
    versions = {"python": env.get("python"),
                "torch": torch.get("version") if isinstance(torch, dict) else torch or dists.get("torch"),
                "triton": dists.get("triton")}
    out.update({"known": True, "key": st.expected_state(target),
                "versions": {k: v for k, v in versions.items() if v},
                "remedies_active": [f"{a.remedy} #{a.id}" for a in st.applications.values()
                                    if a.active and a.target == target],
                "said": f"as last read of {target} (event {st.known_state_seq(target) or st.last_seq})"})
    return out


def run_answer(inv: Investigation, run: int, *, budget: int = DEFAULT_BUDGET, grep: str | None = None,
               report: Any = None) -> dict[str, Any]:
    """A run as an agent reads it: what it was, how it ended, what it means, and the output
    that matters within *budget* bytes."""
    st = inv.state
    info = st.runs[run]
    summary = inv.store.output_summary(run)
    data: dict[str, Any] = report.to_json(inv) if report is not None else {
        "run_id": run, "probe": info.probe, "target": info.target, "classification": info.classification,
        "reason": info.reason, "records": info.records, "state_key": info.state_key, "lines": summary["lines"],
        "bytes": summary["bytes"], "retest_of": info.retest_of,
        "evidence": [{"hypothesis": e.hypothesis, "verdict": e.verdict, "why": e.why()} for e in st.verdict_per_hypothesis(run)],
    }
    data.pop("output", None)  # a path on this machine: run_output reads it
    data["lines"] = summary["lines"]  # the store's count: a last line without a newline is a line, as shown
    if info.kind == "shell":
        data["command"] = info.params.get("cmd", "")
    elif info.params:
        data["params"] = info.params
    data["findings"] = run_findings(st, run)
    data.update(run_changes(st, run))
    data["flags"] = [{"flag": f.kind, "message": f.message, **({"earlier": f.earlier} if f.earlier else {})}
                     for f in st.flags if f.run == run]
    data["verified"] = list(st.verified_by(run))
    data["by"] = st.author(info.started_seq)
    data["records"], left = bounded_records(data.get("records") or [], run)
    if left:
        data["records_left_out"] = left
    data["output"] = excerpt(inv.store, run, budget, grep)
    return data


RECORDS_BUDGET = 48_000  # bytes of the records' JSON an answer carries whole
FIELD_CAP = 2_000  # past the budget: a record keeps its fields up to this size each


def bounded_records(records: list[dict[str, Any]], run: int) -> tuple[list[dict[str, Any]], str | None]:
    """The run's records, whole when they fit :data:`RECORDS_BUDGET`; else each record keeps
    its small fields (the verdict, the sentences, the counts) and names the ones left out —
    a stacks reading of 64 ranks is hundreds of KB of frames. Never silently: the words say
    which fields of which record went, and where they are whole."""
    size = len(json.dumps(records, default=str))
    if size <= RECORDS_BUDGET:
        return records, None
    out, dropped = [], []
    for rec in records:
        kept: dict[str, Any] = {}
        gone = []
        for key, value in rec.items():
            if len(json.dumps(value, default=str)) <= FIELD_CAP or key == "kind":
                kept[key] = value
            else:
                gone.append(key)
        if gone:
            kept["left_out"] = gone
            dropped.append(f"{rec.get('kind', 'record')}: {', '.join(gone)}")
        out.append(kept)
    return out, (f"the records are {size:,} bytes of JSON: left out of this answer — {'; '.join(dropped)}; "
                 f"every record is whole in the stored output: run_output(run={run}, grep='^@@sleuth:')")


def _hints(*, read_only: bool = False, destructive: bool = False, idempotent: bool = False,
           open_world: bool = False) -> ToolAnnotations:
    return ToolAnnotations(read_only_hint=read_only, destructive_hint=destructive, idempotent_hint=idempotent,
                           open_world_hint=open_world)


READS = _hints(read_only=True, idempotent=True)  # the session only
WRITES = _hints()  # appends to the session, changes nothing else

Fn = TypeVar("Fn", bound=Callable[..., Any])


def _description(doc: str | None) -> str:
    """A docstring as one paragraph: no indentation, no line breaks of the source."""
    return re.sub(r"\s*\n\s*", " ", inspect.cleandoc(doc or "")).strip()


def _described(fn: Callable[..., Any], params: dict[str, str], returns: Any) -> None:
    """Give *fn*'s signature a description per parameter and its typed answer, as
    ``Annotated[T, Field(description=…)]``: the SDK builds the tool's schemas from it. A
    parameter without a description is a mistake made here, said at start."""
    sig = inspect.signature(fn, eval_str=True)
    out = []
    for name, p in sig.parameters.items():
        if name == "ctx":
            out.append(p)
            continue
        if name not in params:
            raise TypeError(f"tool {fn.__name__}: parameter {name!r} has no description")
        out.append(p.replace(annotation=Annotated[p.annotation, Field(description=params[name])]))
    unused = set(params) - set(sig.parameters)
    if unused:
        raise TypeError(f"tool {fn.__name__}: descriptions of no parameter: {', '.join(sorted(unused))}")
    fn.__signature__ = sig.replace(parameters=out, return_annotation=returns)  # type: ignore[attr-defined]


class _Server(MCPServer):
    """The SDK's server, with what a client nobody here wrote needs from every tool: an unknown
    argument refused with the nearest real one, a bad argument said in one line, and a text
    block that is what a model reads (the data is once, in structuredContent)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            _refuse_unknown(tool.name, list(tool.parameters.get("properties") or {}), arguments)
        try:
            result = await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            raise ToolError(f"Error executing tool {name}: {_one_line(exc.__cause__)}") from None
        if isinstance(result, CallToolResult) and not result.is_error and isinstance(result.structured_content, dict):
            result = result.model_copy(update={"content": [TextContent(type="text",
                                                                       text=render(name, result.structured_content))]})
        return result


def _refuse_unknown(tool: str, known: list[str], arguments: dict[str, Any]) -> None:
    for key in arguments:
        if key not in known:
            near = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ToolError(f"Error executing tool {tool}: unknown argument {key!r}{hint} "
                            f"({tool} takes {', '.join(known) or 'no arguments'})")


def _one_line(exc: ValidationError) -> str:
    """pydantic's errors as one line, in the tool's own names: 'missing argument 'text''."""
    said = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        if err["type"] == "missing":
            said.append(f"missing argument {where!r}")
            continue
        got = repr(err.get("input"))
        got = got if len(got) <= 60 else got[:57] + "..."
        said.append(f"argument {where!r}: {err['msg'][:1].lower()}{err['msg'][1:]} (got {got})")
    return "; ".join(said) or "bad arguments"


def build_server(workspace: Workspace | None = None, *, session: str | None = None, no_agent: bool = False) -> MCPServer:
    """The MCP server over *workspace*'s investigation (default: the one found from here)."""
    sl = Sleuth(workspace or Workspace.find(), session, no_agent)
    server = _Server("sleuth", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    def tool(hints: ToolAnnotations, returns: Any, **params: str) -> Callable[[Fn], Fn]:
        """Register a tool: its docstring as one paragraph, each parameter described, its answer typed."""
        def register(fn: Fn) -> Fn:
            _described(fn, params, returns)
            server.add_tool(fn, description=_description(fn.__doc__), annotations=hints)
            return fn
        return register

    target_said = "the target's name in sleuth.toml ('local' is this machine); an unknown name is refused"
    force_said = "run it even though it repeats an earlier check in the same state (needs `reason`)"
    reason_said = "why a repeat is run anyway (with force=true); recorded with the run"

    # ------------------------------------------------------------ runs

    @tool(_hints(destructive=True, open_world=True), RunAnswer,
          probe="a built-in probe's id (see `status`'s probes); exactly one of probe, script, shell",
          script="the path of a Python file that speaks the probe protocol",
          shell="a shell command, run as `bash -c` at the far end, sent byte for byte through every hop",
          target=target_said + "; a fleet runs a probe on every member",
          params="the probe's parameters, as an object (never a string to quote)",
          trials="repetitions, where the probe has them",
          timeout="seconds before the run is stopped",
          force=force_said, reason=reason_said,
          budget="the excerpt's most bytes (default 12000; 1000 to 200000)",
          grep="a regex: the lines matching it come first in the excerpt",
          poll="a shell command meant to repeat (nvidia-smi, the tail of a log): said once, its repeats are never "
               "refused",
          sample="a shell command that is one sample of a flaky failure: its runs in the same state pool as trials "
                 "(the answer's `samples`: how many failed of how many), never refused")
    async def probe_run(
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
        says a shell command is one sample of a flaky failure, its runs in one state pooled. The answer: the run's id, classification and reason, verdicts, flags,
        findings, records, line counts and `output`, an excerpt of at most `budget` bytes
        (default 12000) that says how many lines it left out; `grep` (a regex) puts the lines
        you look for first. Read the rest with run_output."""
        if grep:
            _regex(grep)
        config = sl.config()
        asked = dict(params or {})
        if trials is not None:
            asked["trials"] = trials
        ask = CheckAsk(probe=probe, script=script, shell=shell, target=target, params=asked, force=force,
                       reason=reason, poll=poll, sample=sample)
        try:
            resolved = resolve_check(ask, config, root=sl.ws.root, reason_needed=True)
        except (ProbesError, SessionError) as exc:
            raise ToolError(str(exc)) from None
        tgt = resolved.target
        if resolved.fleet:
            assert resolved.probe is not None
            return await _fleet(sl, ctx, config, tgt, resolved.probe, asked, force, reason)
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
                report = await run_probe(inv, tgt, request, force=force, timeout=timeout, runner=runner,
                                         reason=reason if force else None, on_output=counted, on_start=started)
            except CircularRetest as flag:
                inv.decline_run(request.probe, request.params, tgt.name, flag.check)
                earlier = flag.check.retest_of
                answer: dict[str, Any] = {
                    "refused": "circular-retest",
                    "message": str(flag),
                    "earlier_run": earlier.id if earlier is not None else None,
                    "how_to_run_anyway": "change something first (a remedy, an upgrade, the code), or pass force=true "
                                         "with a reason",
                    "state": state_said(inv, tgt.name),
                }
                if earlier is not None:
                    answer["earlier"] = run_answer(inv, earlier.id, budget=budget, grep=grep)
                return answer
            finally:
                progress.cancel()
                if runner is not None:
                    await runner.close()
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

    @tool(_hints(open_world=True), RunAnswer, target=target_said,
          job="a launcher or a process whose job to read", pid="a process id", match="a pattern of the command line",
          samples="how many readings per rank", force=force_said, reason=reason_said)
    async def stacks(
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
        answer = await probe_run(probe="stacks", target=target, params=params, force=force, reason=reason, ctx=ctx)
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
        pattern = _regex(grep, ignore_case) if grep else None
        with sl.open(ctx) as inv:
            if run not in inv.state.runs:
                raise ToolError(f"no run #{run}; runs: {', '.join(f'#{r}' for r in inv.state.runs) or 'none yet'}")
            store = inv.store
            summary = store.output_summary(run)
            total = summary["lines"][stream] if stream else sum(summary["lines"].values())
            lines: list[dict[str, Any]] = []
            used = 0
            matched = 0
            odd = 0
            next_start: int | None = None
            n = start - 1
            while n < total:
                block = store.lines(run, n, 10_000, stream=stream)
                if not block:
                    break
                for ln in block:
                    n = ln.number + 1 if stream is None else n + 1
                    text = ln.text.rstrip("\n")
                    if pattern is not None and not pattern.search(text):
                        continue
                    matched += 1
                    if next_start is not None:
                        continue  # counting the matches past this page
                    number = ln.number + 1 if stream is None else n
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
                if pattern is None and next_start is not None:
                    break
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
                out["grep"] = grep
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

    # ------------------------------------------------------------ the investigation

    @tool(READS, Status, target=target_said)
    def status(target: str = "local", ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
        """The investigation in brief: its hypotheses and their status, the runs and flags, the
        state of `target`, and the one suggested next step."""
        config = sl.config()
        _target(sl, target)  # an unknown target is refused here, not by the probe_run it suggests
        with sl.open(ctx) as inv:
            st = inv.state
            probes = builtin_probes()
            step = investigation_next_step(st, probes, target, config.params_for)
            return {
                "session": str(inv.path), "title": st.title, "events": st.last_seq, "runs": len(st.runs),
                "symptoms": [{"id": s.id, "title": s.title} for s in st.symptoms.values()],
                "hypotheses": [{"id": h, "status": st.status(h), **st.evidence_counts(h)} for h in st.hypotheses],
                "flags": [{"flag": f.kind, "run": f.run, "message": f.message} for f in st.flags[-10:]],
                "next_step": {"action": step.action, "said": step.text, "probe": step.probe, "remedy": step.remedy,
                              "hypothesis": step.hypothesis, "params": step.params},
                "probes": {p.id: p.title for p in probes.values()},
                "targets": list(config.targets),
                "state": state_said(inv, target),
            }

    @tool(READS, Hypotheses)
    def hypotheses(ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Every hypothesis with its derived status, evidence counts, probes, remedies, the
        known upstream issues matched, and its refinements nested."""
        with sl.open(ctx) as inv:
            return {"hypotheses": inv.hypotheses_json(), "as_of_event": inv.state.last_seq}

    @tool(READS, Events, after="events after this number (0: from the first)",
          limit="the most events (1 to 1000, default 100)")
    def events(after: int = 0, limit: int = 100, ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
        """The event log after event `after` (at most `limit`), each in words, with who wrote it
        (ui, cli, mcp:<client>)."""
        with sl.open(ctx) as inv:
            from ..hypotheses import InvestigationState

            st = InvestigationState()
            out = []
            for e in inv.store.events():
                st.apply(e)
                if e.seq > after and len(out) < max(1, min(limit, 1000)):
                    out.append({"seq": e.seq, "ts": e.ts, "kind": e.kind, "by": e.author, "said": event_sentence(e, st)})
            return {"events": out, "last_event": st.last_seq, "more": st.last_seq > (out[-1]["seq"] if out else after)}

    @tool(WRITES, Written, text="the note", about="a hypothesis id or a run (#N)")
    def note(text: str, about: str | None = None, ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Add a note to the timeline; `about` a hypothesis id or a run (#N)."""
        with sl.open(ctx) as inv:
            inv.add_note(text, about)
            return {"noted": text, "about": about, "event": inv.state.last_seq}

    @tool(WRITES, Written, id="the symptom's id (a catalog id such as fx-trace-error fills in the text)",
          title="its title (default: the catalog's, else the id)", text="what was seen, in words")
    def symptom_add(id: str, title: str | None = None, text: str | None = None,
                    ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Record what was observed (a catalog id such as fx-trace-error fills in the text);
        the catalog's hypotheses that explain it join the investigation."""
        with sl.open(ctx) as inv:
            before = set(inv.state.hypotheses)
            inv.add_symptom(id, title or "", text or "")
            st = inv.state
            return {"added": id, "title": st.symptoms[id].title,
                    "explained_by": [h for h, hyp in st.hypotheses.items() if id in hyp.explains],
                    "hypotheses_joined": [h for h in st.hypotheses if h not in before], "event": st.last_seq}

    @tool(WRITES, Written, id="the hypothesis's id", title="its title (default: the id)", claim="what it claims",
          explains="ids of the symptoms it explains", refines="ids of the hypotheses it refines",
          competes="ids of the hypotheses it competes with", exposes="ids of the hypotheses it exposes")
    def hypothesis_add(
        id: str, title: str | None = None, claim: str | None = None, explains: list[str] | None = None,
        refines: list[str] | None = None, competes: list[str] | None = None, exposes: list[str] | None = None,
        ctx: Context = None,  # type: ignore[assignment]
    ) -> dict[str, Any]:
        """Add your own hypothesis, linked to the symptoms it explains and the hypotheses it
        refines, competes with or exposes."""
        links = [("refines", h) for h in refines or []] + [("competes", h) for h in competes or []]
        links += [("exposes", h) for h in exposes or []]
        with sl.open(ctx) as inv:
            inv.add_hypothesis(id, title or id, claim or "", explains or [], links)
            return {"added": id, "status": inv.state.status(id), "event": inv.state.last_seq}

    @tool(WRITES, Written, src="the hypothesis linked from",
          kind="refines, competes, exposes (to a hypothesis) or explains (to a symptom)",
          dst="the hypothesis or symptom linked to")
    def link(src: str, kind: str, dst: str, ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Link hypothesis `src` to `dst`: refines, competes or exposes another hypothesis, or
        explains a symptom."""
        with sl.open(ctx) as inv:
            inv.link(src, kind, dst)
            return {"linked": [src, kind, dst], "event": inv.state.last_seq}

    @tool(_hints(idempotent=True), Written, run="the id of a completed run")
    def baseline(run: int, ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Mark a completed run as its target's baseline (env-fingerprint compares against it)."""
        with sl.open(ctx) as inv:
            inv.mark_baseline(run)
            return {"baseline": run, "target": inv.state.runs[run].target, "event": inv.state.last_seq}

    @tool(_hints(read_only=True, idempotent=True, open_world=True), Known, target=target_said,
          all="list the whole catalog instead (nothing read on the target)")
    async def known(target: str = "local", all: bool = False, ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
        """The known upstream issues that apply to what `target` has now (its versions read
        now), with what this session measured of each fix; `all` lists the whole catalog."""
        from ..hypotheses.known import load_known
        from ..sessions import measure_state
        from .known_cli import known_rows

        try:
            entries = load_known([sl.ws.dir / "known"])
        except (HypothesisError, SessionError) as exc:
            raise ToolError(str(exc)) from None
        tgt = _target(sl, target)
        if all:
            return {"catalog": [e.to_dict() for e in entries.values()]}
        runner = sl.runner()
        try:
            measured = await measure_state(tgt, runner=runner)
        finally:
            if runner is not None:
                await runner.close()
        if measured.state is None:
            raise ToolError(f"not reached: {measured.unknown}")
        versions = (measured.state.get("env") or {}).get("distributions") or {}
        return {"target": tgt.name, "distributions_read": len(versions),
                "applies": known_rows(sl.ws, entries, tgt.name, versions)}

    # ------------------------------------------------------------ remedies

    @tool(_hints(read_only=True, idempotent=True, open_world=True), Remedy, remedy="lock or precompile",
          path="a file or a code tree (default: the target's code tree)", target=target_said)
    def remedy_preview(remedy: str, path: str | None = None, target: str = "local",
                       ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
        """The diff a remedy (lock or precompile) would make to a file or a code tree (default:
        the target's code tree), what it found, and whether it can apply as it stands; a file of
        an installed package (site-packages) is said to be one (``installed``): remedy_apply
        writes there only with into_installed_package=true."""
        from ..sessions import RemedyError
        from .remedy_cli import for_mcp, one_line

        with sl.open(ctx) as inv:
            try:
                with one_line(path):
                    plan, where = _plan(sl, inv, remedy, path, target)
            except RemedyError as exc:
                raise ToolError(for_mcp(str(exc))) from None
            answer = {**_plan_json(plan), "path": where, "applicable": not plan.blocked}
            answer["blocked"] = [for_mcp(b) for b in answer["blocked"]]
            for f in answer.get("files") or []:
                f["blocked"] = [for_mcp(b) for b in f["blocked"]]
            plans = getattr(plan, "plans", [plan])
            answer["installed"] = [p.installed.said for p in plans if p.installed is not None]
            return answer

    @tool(_hints(destructive=True, idempotent=True, open_world=True), Remedy, remedy="lock or precompile",
          path="a file or a code tree (default: the target's code tree)", target=target_said,
          hypothesis="the hypothesis the remedy is for",
          into_installed_package="allow changing a file of an installed package (site-packages)")
    def remedy_apply(remedy: str, path: str | None = None, target: str = "local", hypothesis: str | None = None,
                     into_installed_package: bool = False,
                     ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Apply a remedy (atomic, recorded, revertible to the exact original bytes); the next
        probe_run of the check that showed the failure verifies it. A file of an installed
        package (site-packages) is changed only with into_installed_package=true."""
        from ..sessions import RemedyError, TreePlan, apply_remedy, apply_tree
        from .remedy_cli import for_mcp, installed_changed, one_line

        with sl.open(ctx) as inv:
            try:
                with one_line(path):
                    plan, where = _plan(sl, inv, remedy, path, target)
                    if plan.blocked:
                        raise ToolError(f"{remedy} not applied to {where}: " + "; ".join(for_mcp(b) for b in plan.blocked))
                    tgt = _target(sl, target)
                    app = (apply_tree(inv, plan, tgt, hypothesis, into_installed_package=into_installed_package)
                           if isinstance(plan, TreePlan)
                           else apply_remedy(inv, plan, tgt, hypothesis, into_installed_package=into_installed_package))
            except RemedyError as exc:
                raise ToolError(for_mcp(str(exc))) from None
            records = inv.state.applications[app].files if app is not None else []
            changed = installed_changed(records, "remedy_revert")
            said = (f"applied {remedy} (application #{app}); remedy_revert puts the original bytes back"
                    if app is not None else f"{remedy} is already applied; nothing changed")
            return {"applied": app is not None, "application": app, "path": where, "diff": plan.diff,
                    "said": "; ".join([said, *changed]),
                    "installed_packages": [r["installed_package"] for r in records if r.get("installed_package")]}

    @tool(_hints(destructive=True, open_world=True), Remedy,
          path="the remedied file or code tree (default: the target's code tree)", target=target_said)
    def remedy_revert(path: str | None = None, target: str = "local", ctx: Context = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Restore the exact original bytes of a remedied file or code tree (recorded)."""
        from ..sessions import RemedyError, revert_remedy, revert_tree
        from .remedy_cli import _is_tree, _where, for_mcp, installed_restored, one_line

        tgt = _target(sl, target)
        with sl.open(ctx) as inv:
            try:
                with one_line(path):
                    where = _rooted(sl, tgt, _where(sl.ws, tgt, path))
                    app = revert_tree(inv, where, tgt) if _is_tree(tgt, where) else revert_remedy(inv, where, tgt)
            except RemedyError as exc:
                raise ToolError(for_mcp(str(exc))) from None
            records = inv.state.applications[app].files
            answer: dict[str, Any] = {"reverted": app, "path": where, "files": len(records)}
            restored = installed_restored(records)
            if restored:
                answer["said"] = "; ".join(restored)
            return answer

    return server


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


def _regex(pattern: str | None, ignore_case: bool = False) -> re.Pattern[str]:
    try:
        return re.compile(pattern or "", re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"grep {pattern!r}: not a regular expression ({exc})") from None


def _target(sl: Sleuth, name: str):
    try:
        return sl.config().target(name)
    except (ProbesError, SessionError) as exc:
        raise ToolError(str(exc)) from None


def _rooted(sl: Sleuth, target: Any, path: str) -> str:
    """A relative local path is the project's (the server may have been started elsewhere);
    a remote one stays relative to the target's code tree."""
    if target.is_local and not Path(path).is_absolute():
        return str(sl.ws.root / path)
    return path


def _plan(sl: Sleuth, inv: Investigation, remedy: str, path: str | None, target: str):
    from ..probes.remedies import REMEDIES
    from .remedy_cli import _plan as plan_of
    from .remedy_cli import _where

    if remedy not in REMEDIES:
        raise ToolError(f"unknown remedy {remedy!r}; remedies: {', '.join(sorted(REMEDIES))}")
    config = sl.config()
    tgt = _target(sl, target)
    where = _rooted(sl, tgt, _where(sl.ws, tgt, path))
    return plan_of(inv, argparse.Namespace(name=remedy, shapes=None), tgt, where, config), where


def _plan_json(plan: Any) -> dict[str, Any]:
    from ..sessions import TreePlan

    if isinstance(plan, TreePlan):
        return {"remedy": plan.remedy, "files": [p.to_dict() for p in plan.plans], "skipped": plan.skipped,
                "blocked": plan.blocked, "diff": plan.diff}
    return plan.to_dict()


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
        comparison = report.comparison
        out: dict[str, Any] = {
            "fleet": fleet.name, "members": [m.name for m in report.members],
            "runs": {m: r.run for m, r in report.reports.items()},
            "not_run_again": {m: {"earlier_run": r, "said": "the same state as then; its answer stands"}
                              for m, r in report.reused.items()},
            "headline": comparison.headline() if comparison else None,
            "sentences": [s.sentence(len(comparison.runs)) for s in comparison.spreads] if comparison else [],
            "answers": {m: run_answer(inv, r.run, budget=4_000) for m, r in report.reports.items()},
        }
        if report.hang is not None:
            out["hang"] = report.hang
        if force and reason:
            out["forced_because"] = reason
        return out


# ---------------------------------------------------------------- serving


class _BearerAuth:
    """ASGI middleware: a request without ``Authorization: Bearer <token>`` gets 401 and
    reaches nothing (compared in constant time; the token is never logged)."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            given = headers.get(b"authorization", b"")
            scheme, _, value = given.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(value.strip(), self.token):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": b"sleuth mcp: a bearer token is needed\n"})
                return
        await self.app(scope, receive, send)


LOOPBACK = ("127.0.0.1", "::1", "localhost")


def token_for(workspace: Workspace, given: str | None = None) -> tuple[str, Path | None]:
    """The HTTP server's bearer token: SLEUTH_MCP_TOKEN when set, else a new random one written
    to ``.sleuth/mcp-token`` (mode 0600) for the client's config to read."""
    token = given or os.environ.get("SLEUTH_MCP_TOKEN") or ""
    if token:
        return token, None
    token = secrets.token_urlsafe(32)
    workspace.dir.mkdir(parents=True, exist_ok=True)
    path = workspace.dir / "mcp-token"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    os.chmod(path, 0o600)
    return token, path


async def serve_http(server: MCPServer, host: str, port: int, token: str) -> None:
    """Streamable HTTP at http://HOST:PORT/mcp, loopback only, every request's token checked."""
    import uvicorn

    if host not in LOOPBACK:
        raise UsageError(f"--host {host}: sleuth mcp serves loopback only (127.0.0.1 or ::1); reach it from "
                         "elsewhere through an ssh tunnel")
    app = _BearerAuth(server.streamable_http_app(host=host), token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on")
    await uvicorn.Server(config).serve()


def cmd_mcp(args: argparse.Namespace) -> int:
    """`sleuth mcp`: serve the current investigation to an MCP client."""
    from ..sessions.store import set_author

    if args.project is not None and not Path(args.project).is_dir():
        raise UsageError(f"--project {args.project}: no such directory")
    ws = Workspace.find(args.project or ".")
    if args.project is not None:
        os.chdir(ws.root)  # as if started there: relative paths of sleuth.toml and of probes are the project's
    try:
        load_config(ws.config_path)  # a broken sleuth.toml: exit 2 before the client connects
        ws.resolve(args.session)  # no investigation: said now, not at the first call
    except (ProbesError, SessionError) as exc:
        raise UsageError(str(exc)) from None
    set_author("mcp")  # each call names its client; this covers anything else the server writes
    server = build_server(ws, session=args.session, no_agent=args.no_agent)
    if not args.http:
        asyncio.run(server.run_stdio_async())
        return 0
    token, path = token_for(ws)
    where = f"the token is in {path} (mode 0600)" if path else "the token is SLEUTH_MCP_TOKEN's"
    print(f"sleuth mcp: http://{args.host}:{args.port}/mcp (Authorization: Bearer <token>; {where})", file=sys.stderr)
    asyncio.run(serve_http(server, args.host, args.port, token))
    return 0

"""`sleuth probe …` and `sleuth target …`: run probes on real targets from the shell."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from ..probes import AgentPool, build_program, builtin_probes, load_config, new_nonce
from ..probes.broker import BrokerClient
from ..probes.runner import chain_for
from ..sessions import (
    CheckAsk,
    CircularRetest,
    Investigation,
    Workspace,
    request_for_check,
    request_for_probe,
    resolve_check,
    run_fleet,
    run_probe,
)
from ..sessions.checks import Declined, run_resolved
from ..sessions.findings import ENV_FINDINGS, known_env_line
from ..sessions.runs import RunReport
from .errors import UsageError
from .outline import record_line
from .timeline import run_changes, run_findings

__all__ = ["cmd_probe_list", "cmd_probe_run", "cmd_target_check", "cmd_target_show"]

from .cli import EXIT_RETEST


def _params(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--param {pair!r}: expected KEY=VALUE")
        try:
            out[key] = json.loads(value)  # 4 → int, true → bool, "x" → str
        except ValueError:
            out[key] = value
    return out


def cmd_probe_list(args: argparse.Namespace) -> int:
    probes = builtin_probes()
    catalog = Workspace.find().catalog()
    rows = []
    for p in probes.values():
        tests = [h.id for h in catalog.hypotheses.values() if any(t.probe == p.id for t in h.probes)]
        rows.append({"id": p.id, "title": p.title, "timeout": p.timeout, "cost_s": p.cost, "tests": tests,
                     "params": p.params, "required": list(p.required), "reports": list(p.reports), "file": str(p.path)})
    ws = Workspace.find()
    config = load_config(ws.config_path) if ws.config_path.is_file() else None
    for r in rows:
        ours = config.probe_params.get(r["id"], {}) if config is not None else {}
        r["configured"] = ours
        if args.json:
            continue
        print(f"{r['id']:<18} {r['title']}")
        print(f"{'':<18} tests: {', '.join(r['tests']) or '-'}; ~{r['cost_s']:g} s; timeout {r['timeout']:g} s")
        params = []
        for name in [*r["params"], *(k for k in ours if k not in r["params"])]:
            default = json.dumps(r["params"][name]) if name in r["params"] and name not in r["required"] else None
            if name in ours:
                params.append(f"{name} = {json.dumps(ours[name])} (sleuth.toml" + (f"; default {default})" if default else ")"))
            elif name in r["required"]:
                params.append(f"{name} = (yours to set: required)")
            else:
                params.append(f"{name} = {default}")
        print(f"{'':<18} params: {'; '.join(params) or 'none'}")
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


def _confirm(message: str) -> bool:
    if not sys.stdin.isatty():
        return False
    sys.stderr.write(f"sleuth: {message}\nRun it anyway? [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _cli_name(arg: str) -> str:
    """An input as the CLI calls it."""
    return {"probe": "ID", "script": "--script", "shell": "--shell"}.get(arg, f"--{arg}")


def cmd_probe_run(args: argparse.Namespace) -> int:
    ws = Workspace.find()
    config = load_config(ws.config_path)
    ask = CheckAsk(probe=args.id, script=args.script, shell=args.shell, target=args.target, params=_params(args.param),
                   force=args.force, reason=args.reason, hook=args.hook, poll=args.poll,
                   sample=args.sample)
    resolved = resolve_check(ask, config, root=Path.cwd(), name=_cli_name)
    target = resolved.target
    if resolved.fleet:
        assert resolved.probe is not None
        return _run_fleet(ws, config, target, resolved.probe, _params(args.param), args)
    with ws.open(args.session) as inv:
        request = request_for_check(inv, resolved, config)
        echo = None if args.json or args.quiet else _Echo({f.id for f in ENV_FINDINGS if inv.has_finding(target.name, f.id)})
        # through the broker's resident agent (kept between commands), unless --no-agent
        agents = None if args.no_agent else BrokerClient(ws.dir)

        async def confirm(flag: CircularRetest) -> bool:
            return _confirm(str(flag))

        async def go() -> RunReport | Declined:
            try:
                return await run_resolved(inv, resolved, config, on_retest=confirm, request=request,
                                          timeout=args.timeout, on_output=echo, runner=agents)
            finally:
                if agents is not None:
                    await agents.close()

        report = asyncio.run(go())
        if isinstance(report, Declined):
            print(f"sleuth: circular retest: {report.flag}; not run (pass --force to run it anyway)", file=sys.stderr)
            return EXIT_RETEST
        if echo is not None:
            echo.finish(report.run)
        return _report(inv, report, args.json)


def _run_fleet(ws: Workspace, config, fleet, probe, params: dict, args: argparse.Namespace) -> int:
    """One probe on every member at once; the comparison, the odd ones named."""
    async def go():
        agents: AgentPool | BrokerClient = AgentPool() if args.no_agent else BrokerClient(ws.dir)
        try:
            return await run_fleet(inv, config, fleet, probe, params, runner=agents, force=args.force)
        finally:
            await agents.close()

    with ws.open(args.session) as inv:
        report = asyncio.run(go())
        comparison = report.comparison
        assert comparison is not None
        if args.json:
            print(json.dumps(report.to_json(), indent=2, default=str))
        else:
            print(f"{fleet.name}: {len(report.members)} members ({fleet.fleet.describe()}) · {probe.id}")
            for member in report.members:
                if member.name in report.reports:
                    r = inv.state.runs[report.reports[member.name].run]
                    print(f"  #{r.id:<4} {member.name:<28} {r.classification}" + (f" — {r.reason}" if r.classification != "completed" else ""))
                elif member.name in report.reused:
                    print(f"  #{report.reused[member.name]:<4} {member.name:<28} not run again: the same state as then; its answer stands")
            if report.reused:
                print("  (--force runs them again)")
            print(f"\n{comparison.headline()}")
            for spread in comparison.spreads[:30]:
                print(f"  {'⚠' if spread.drift else ' '} {spread.sentence(len(comparison.runs))}")
            if len(comparison.spreads) > 30:
                print(f"  … and {len(comparison.spreads) - 30} more (--json has them all)")
            for member, run in report.evidence:
                print(f"  supports version-drift: {member} (#{run}) differs in what the code runs on")
            if report.hang is not None:  # every member's ranks read together
                print(f"\nthe job's ranks across {len(report.members)} members: {report.hang['verdict']}")
                for said in report.hang["sentences"]:
                    print(f"  {said}")
    answered = len(comparison.runs)
    return 0 if answered and not comparison.unreachable else 1


def _echo(stream: str, data: bytes) -> None:
    out = sys.stdout if stream == "stdout" else sys.stderr
    out.buffer.write(data)
    out.flush()


_MARKER = b"@@sleuth:"
RECORD_SHOWN = 240  # characters of a record's JSON the live echo shows


def _shown_record(line: bytes) -> bytes:
    """A probe's record line as the terminal shows it: ``⟨record⟩`` and the start of its JSON
    (a stacks run's rank record is kilobytes of frames); the store and `sleuth output` keep it whole."""
    body = record_line(line.decode("utf-8", "replace").rstrip("\n"))
    if body is None:
        return line
    progress = _progress_said(body)
    if progress is not None:  # a long run's step as it goes: "trial 2 of 5 passed in 41 s · 3 of 6 runs done …"
        return f"⟨progress⟩ {progress}\n".encode()
    if len(body) > RECORD_SHOWN:
        body = f"{body[:RECORD_SHOWN]}… (+{len(body) - RECORD_SHOWN} chars: `sleuth output` has it whole)"
    return f"⟨record⟩ {body}\n".encode()


def _progress_said(body: str) -> str | None:
    """A ``progress`` record's sentence, or None for any other record."""
    if '"progress"' not in body:
        return None
    try:
        rec = json.loads(body)
    except ValueError:
        return None
    if not isinstance(rec, dict) or rec.get("kind") != "progress" or not rec.get("said"):
        return None
    return str(rec["said"])


class _Echo:
    """The run's output, live, as it arrives — except the lines of a warning about the
    target's environment that an earlier run already showed (a finding, said once: the numpy
    warning of every torch import), how many were left out said at the end; and a probe's
    record lines, shown short. The store keeps every byte."""

    def __init__(self, known: set[str]) -> None:
        self.known = known
        self.left_out: dict[str, int] = {}
        self._partial = b""
        self._held = b""  # the start of a stdout line that may be a record
        self._mid_line = False  # the start of the current stdout line is already shown

    def _stdout(self, data: bytes) -> None:
        buf, self._held = self._held + data, b""
        while buf:
            end = buf.find(b"\n")
            if self._mid_line:
                if end < 0:
                    _echo("stdout", buf)
                    return
                _echo("stdout", buf[:end + 1])
                buf, self._mid_line = buf[end + 1:], False
                continue
            if end < 0:
                if buf.startswith(_MARKER) or _MARKER.startswith(buf):
                    self._held = buf  # wait for the rest of the line
                else:
                    _echo("stdout", buf)  # a progress bar, a prompt: shown as it comes
                    self._mid_line = True
                return
            _echo("stdout", _shown_record(buf[:end + 1]) if buf.startswith(_MARKER) else buf[:end + 1])
            buf = buf[end + 1:]

    def __call__(self, stream: str, data: bytes) -> None:
        if stream == "stdout":
            self._stdout(data)
            return
        if not self.known:
            _echo(stream, data)
            return
        data, self._partial = self._partial + data, b""
        lines = data.split(b"\n")
        self._partial = lines.pop()  # an unfinished line waits for the rest
        shown = []
        for line in lines:
            finding = known_env_line(line)
            if finding is not None and finding.id in self.known:
                self.left_out[finding.id] = self.left_out.get(finding.id, 0) + 1
            else:
                shown.append(line + b"\n")
        if shown:
            _echo(stream, b"".join(shown))

    def finish(self, run: int) -> None:
        if self._held:
            _echo("stdout", self._held)
            self._held = b""
        if self._partial:
            _echo("stderr", self._partial)
            self._partial = b""
        if self.left_out:
            what = ", ".join(f"{n} line(s) of {fid}" for fid, n in self.left_out.items())
            print(f"(left out {what}: a finding about this target said once already; "
                  f"`sleuth output {run} --stream stderr` has every byte)", file=sys.stderr)


def _report(inv: Investigation, report, as_json: bool) -> int:
    data = report.to_json(inv)
    data["findings"] = run_findings(inv.state, report.run)  # what the UI's timeline says of it
    data.update(run_changes(inv.state, report.run))  # the same changes as data: drift, state_changes
    # what this run verified of an applied remedy, as the UI's timeline says it (fixed, strong or weak)
    data["verified"] = inv.state.verified_by(report.run)
    samples = inv.state.shell_samples(report.run)
    if samples is not None:  # a sample of a flaky failure: pooled with the earlier ones in this state
        data["samples"] = samples
    if as_json:
        print(json.dumps(data, indent=2, default=str))
    else:
        print(f"\n#{data['run_id']} {data['probe']} on {data['target']}: {data['classification']} — {data['reason']}")
        for ev in data["evidence"]:
            print(f"  {ev['verdict']} {ev['hypothesis']}" + (f": {ev['why']}" if ev.get("why") else ""))
        for said in data["verified"]:
            print(f"  ✔ {said}")
        if "samples" in data:
            print(f"  ∑ {data['samples']['said']}")
        for found in data["findings"]:
            print(f"  ⓚ {found['text']}" if found["kind"] == "known" else f"  ⚑ {found['kind']}: {found['text']}")
        if report.check.unknown:
            print(f"  before it ran, {report.check.unknown}: its state is unknown, so nothing was flagged")
        print(f"  full output: sleuth output {data['run_id']}  ({data['lines']['stdout']:,} + {data['lines']['stderr']:,} "
              f"lines, stored in {data['output']})")
    return 0 if data["classification"] == "completed" else 1


def cmd_target_show(args: argparse.Namespace) -> int:
    ws = Workspace.find()
    target = load_config(ws.config_path).target(args.name)
    chain = chain_for(target)
    if args.shell:
        note = f"the sleuth prelude on stdin, which runs argv ['bash', '-c', {args.shell!r}]"
    else:
        probes = builtin_probes()
        if args.probe and args.probe not in probes:
            raise UsageError(f"unknown probe {args.probe!r}; probes: {', '.join(probes)}")
        pid = args.probe or "target-check"
        from ..probes import ProgramSpec

        program = build_program(ProgramSpec(probe=pid, source=probes[pid].source, parts=probes[pid].part_sources), new_nonce())
        note = f"the program on stdin: prelude + probe {pid} ({len(program):,} bytes, never quoted)"
    print(f"target {target.name}: {target.describe()}  ({target.origin})")
    for i, hop in enumerate(chain.hops(note), 1):
        print(f"  {i}. {hop.name}")
        print(f"       receives: {hop.receives}")
    if target.is_local:
        extras = []
        if target.workdir:
            extras.append(f"cwd {target.workdir}")
        if target.env:
            extras.append("env " + " ".join(f"{k}=…" for k in target.env))
        if extras:
            print("  (local: " + ", ".join(extras) + " set by the subprocess call, not a shell)")
    return 0


def cmd_target_check(args: argparse.Namespace) -> int:
    """Round-trip a tiny probe; if it fails, find the hop that broke by trying each prefix."""
    ws = Workspace.find()
    target = load_config(ws.config_path).target(args.name)
    probe = builtin_probes()["target-check"]
    with ws.open(args.session) as inv:
        request = request_for_probe(inv, probe, target, {"echo": ["it's", '"quoted"', "$HOME", "`id`", "a\\b", "ü"]})
        report = asyncio.run(run_probe(inv, target, request, force=True))
        data = report.to_json(inv)
        result = next((r for r in data["records"] if r["kind"] == "result"), None)
        if args.json:
            print(json.dumps({"ok": result is not None, "classification": data["classification"],
                              "reason": data["reason"], "far_end": result, "run_id": data["run_id"]}, indent=2))
        print(f"target {target.name}: {target.describe()}", file=sys.stderr if args.json else sys.stdout)
        if result is None:
            hop = report.outcome.failed_hop
            chain = chain_for(target)
            hops = chain.hops()
            where = f"hop {hop}: {hops[hop - 1].name}" if hop and hop <= len(hops) else _guess_hop(target, data)
            print(f"  BROKEN at {where}\n  {data['classification']}: {data['reason']}", file=sys.stderr)
            return 1
        if args.json:
            return 0
        echo_ok = result.get("echo") == request.params["echo"]
        print(f"  far end: user {result['user']} (uid {result['uid']}) on {result['host']}, cwd {result['cwd']}")
        print(f"  interpreter: {result['executable']} (Python {result['python']}, venv: {result['in_venv']})")
        print(f"  {_hops_line(target, result.get('container'))}")
        print(f"  argv {result['argv']}")
        print(f"  parameters came back {'byte for byte' if echo_ok else 'CHANGED: ' + repr(result.get('echo'))}")
        shown = {k: v for k, v in result["env"].items() if k in target.env or k in ("PATH", "HOME", "VIRTUAL_ENV")}
        for k, v in shown.items():
            print(f"  env {k}={v}")
        print(f"  round trip: {data['seconds']:.2f} s (run #{data['run_id']})")
        return 0 if echo_ok else 1


def _hops_line(target, seen: str | None) -> str:
    """What was configured and what the far end said of itself, each named as such: a target
    with no container hop may still run inside one (a Docker container, detected)."""
    hops = [f"ssh {j} (jump)" for j in target.jump] + ([f"ssh {target.ssh}"] if target.ssh else [])
    if target.container is not None and target.container.kind != "none":
        hops.append(f"container {target.container.kind} {target.container.id}".strip())
    configured = f"hops: {', '.join(hops)} (configured)" if hops else "hops: none configured"
    detected = (f"the far end runs inside a {seen.capitalize() if seen == 'docker' else seen} container, detected"
                if seen else "the far end shows no sign of a container")
    return f"{configured}; {detected}"


def _guess_hop(target, data: dict[str, Any]) -> str:
    reason = data["reason"]
    if target.container and ("not found" in reason or "No such" in reason or data["classification"] == "no_result"):
        return f"the container hop ({target.container.kind} {target.container.id}) or the interpreter {target.python}"
    return f"the interpreter {target.python}"

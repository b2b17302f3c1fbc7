"""Fleets: a target that stands for many members — its members found (and recorded), one
probe run on every member at once, and the answers compared.

Each member's run is an ordinary run (its own state read first, its own output, its own
classification); a member that cannot be reached is a ``transport`` run and no evidence. A
member whose state is the same as at its last run of this check is not run again: its
earlier answer stands in the comparison (named as such). The comparison is recorded, and
disagreement on what the code runs on is evidence for version drift, the members named.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..hypotheses import Comparison, PreRunCheck, compare
from ..hypotheses.hang import analyze_stacks
from ..probes import Config, Container, HopChain, ProbeDef, Runner, SessionRunner, SshPool, Target
from ..probes.transports import run_chain
from .errors import InvestigationError
from .investigation import Investigation
from .runs import RunReport, check_run, request_for_probe, run_probe

__all__ = ["FleetReport", "expand_fleet", "read_ssh_config", "run_fleet"]


@dataclass
class FleetReport:
    fleet: str
    members: list[Target]
    reports: dict[str, RunReport] = field(default_factory=dict)  # member -> its run now
    reused: dict[str, int] = field(default_factory=dict)  # member -> its earlier run (same state)
    comparison: Comparison | None = None
    evidence: list[tuple[str, int]] = field(default_factory=list)  # (odd member, run) that support drift
    hang: dict[str, Any] | None = None  # a stacks fan-out: every member's ranks read together (hypotheses/hang/)

    def to_json(self) -> dict[str, Any]:
        """The fleet run as `sleuth probe run --json` prints it; the MCP answer is this plus
        each member's run answer (``answers``) and ``not_run_again`` in words."""
        comparison = self.comparison
        out: dict[str, Any] = {
            "fleet": self.fleet, "members": [m.name for m in self.members],
            "runs": {m: r.run for m, r in self.reports.items()}, "reused": self.reused,
            "comparison": comparison.to_dict() if comparison else None,
            "headline": comparison.headline() if comparison else None,
            "sentences": [s.sentence(len(comparison.runs)) for s in comparison.spreads] if comparison else [],
            "evidence": [{"member": m, "run": r, "verdict": "supports", "hypothesis": "version-drift"}
                         for m, r in self.evidence],
        }
        if self.hang is not None:
            out["hang"] = self.hang
        return out


# ---------------------------------------------------------------- members


def read_ssh_config(path: Path) -> dict[str, dict[str, str]]:
    """Host alias → its options (lower-case keys) from an OpenSSH client config; aliases
    with wildcards are patterns, not hosts, and are left out (their options still apply)."""
    hosts: dict[str, dict[str, str]] = {}
    patterns: list[tuple[list[str], dict[str, str]]] = []
    current: list[tuple[list[str], dict[str, str]]] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, _, value = line.partition(" ") if " " in line else line.partition("=")
        key, value = key.strip().lower(), value.strip().lstrip("=").strip().strip('"')
        if key == "host":
            names = value.split()
            block: dict[str, str] = {}
            patterns.append((names, block))
            current = [(names, block)]
        elif key == "match":
            current = []
        else:
            for _names, block in current:
                block.setdefault(key, value)  # ssh: the first value given wins
    for names, _block in patterns:
        for name in names:
            if not any(ch in name for ch in "*?!") and name not in hosts:
                merged: dict[str, str] = {}
                for pats, block in patterns:
                    if any(fnmatch.fnmatch(name, p) for p in pats if not p.startswith("!")):
                        for k, v in block.items():
                            merged.setdefault(k, v)
                hosts[name] = merged
    return hosts


async def _lines(target: Target, argv: list[str], pool: SshPool | None, what: str) -> list[str]:
    out: list[bytes] = []
    err: list[bytes] = []

    def collect(stream: str, data: bytes) -> None:
        (out if stream == "stdout" else err).append(data)

    info = await run_chain(HopChain.for_program(target, argv), b"", collect, pool=pool, timeout=60)
    if info.transport_error:
        raise InvestigationError(f"{what}: {target.name} could not be reached: {info.transport_error}")
    if info.exit_status != 0:
        said = b"".join(err).decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {info.exit_status}"]
        raise InvestigationError(f"{what}: `{' '.join(argv)}` on {target.name} failed: {said[0]}")
    return [ln.strip() for ln in b"".join(out).decode(errors="replace").splitlines() if ln.strip()]


def _member(fleet: Target, suffix: str, **changes: Any) -> Target:
    return replace(fleet, name=f"{fleet.name}/{suffix}", fleet=None, **changes)


async def expand_fleet(config: Config, fleet: Target, pool: SshPool | None = None) -> list[Target]:
    """The members of *fleet*, found now: listed targets, ssh config hosts, the nodes of a
    Slurm job (squeue/scontrol where the fleet's own hops lead), the pods of a label
    selector (kubectl), or the GPUs of the host (nvidia-smi)."""
    spec = fleet.fleet
    if spec is None:
        return [fleet]
    base = replace(fleet, fleet=None)
    if spec.kind == "list":
        members = []
        for name in spec.names:
            member = config.target(name)
            if member.fleet is not None:
                raise InvestigationError(f"{fleet.name}: member {name} is a fleet itself; list its members instead")
            members.append(member)
        return members
    if spec.kind == "ssh_config":
        path = Path(os.path.expanduser(spec.file))
        if not path.is_file():
            raise InvestigationError(f"{fleet.name}: no ssh config at {path}")
        hosts = read_ssh_config(path)
        chosen = [h for h in hosts if fnmatch.fnmatch(h, spec.pattern)]
        if not chosen:
            raise InvestigationError(f"{fleet.name}: no Host in {path} matches {spec.pattern!r}; hosts: {', '.join(hosts) or 'none'}")
        members = []
        for alias in chosen:
            o = hosts[alias]
            port = o.get("port")
            jump = tuple(j for j in o.get("proxyjump", "").split(",") if j and j.lower() != "none") or fleet.jump
            members.append(_member(
                base, alias, ssh=o.get("hostname", alias), port=int(port) if port and port.isdigit() else fleet.port,
                user=o.get("user") or fleet.user, identity=o.get("identityfile") or fleet.identity,
                known_hosts=o.get("userknownhostsfile") or fleet.known_hosts, jump=jump,
            ))
        return members
    if spec.kind == "slurm":
        listed = await _lines(base, ["squeue", "--jobs", spec.job, "--noheader", "--format", "%T %N"], pool,
                              f"the nodes of Slurm job {spec.job}")
        if not listed:
            raise InvestigationError(f"{fleet.name}: Slurm job {spec.job} is not in the queue (finished, or another cluster)")
        status, _, nodelist = listed[0].partition(" ")
        if status != "RUNNING" or not nodelist:
            raise InvestigationError(f"{fleet.name}: Slurm job {spec.job} is {status.lower()}, so it has no nodes to run on")
        nodes = await _lines(base, ["scontrol", "show", "hostnames", nodelist], pool, f"the nodes of Slurm job {spec.job}")
        user = fleet.container.user if fleet.container else ""
        return [_member(base, node, container=Container("srun", spec.job, user, node=node)) for node in nodes]
    if spec.kind == "kubernetes":
        ns = ["-n", spec.namespace] if spec.namespace else []
        pods = await _lines(base, ["kubectl", "get", "pods", "-l", spec.selector, *ns, "--field-selector=status.phase=Running",
                                   "-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}"], pool,
                            f"the pods -l {spec.selector}")
        if not pods:
            raise InvestigationError(f"{fleet.name}: no running pod matches -l {spec.selector}")
        ctr = fleet.container.user if fleet.container else ""
        return [_member(base, pod, container=Container("kubectl", pod, ctr, spec.namespace)) for pod in pods]
    if spec.kind == "gpus":
        indices = list(spec.gpus)
        if not indices:
            found = await _lines(base, ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], pool, "the GPUs")
            indices = [int(i) for i in found if re.fullmatch(r"\d+", i)]
        if not indices:
            raise InvestigationError(f"{fleet.name}: nvidia-smi lists no GPU on {fleet.describe()}")
        return [_member(base, f"gpu{i}", env={**fleet.env, "CUDA_VISIBLE_DEVICES": str(i)}) for i in indices]
    raise InvestigationError(f"{fleet.name}: unknown kind of fleet {spec.kind!r}")


# ---------------------------------------------------------------- fan-out


async def run_fleet(
    inv: Investigation,
    config: Config,
    fleet: Target,
    probe: ProbeDef,
    params: dict[str, Any],
    *,
    runner: Runner | None = None,
    pool: SshPool | None = None,
    force: bool = False,
    members: list[Target] | None = None,
    ask: Callable[[dict[str, PreRunCheck]], Awaitable[bool]] | None = None,
) -> FleetReport:
    """Run *probe* on every member of *fleet* at once and record the comparison.

    Every member's state is read first (all at once); members in the same state as their
    last run of this check keep that run's answer — unless *force*, or *ask* (given those
    members and their checks) says to run them again."""
    # finding the members needs a connection of our own (a broker client keeps its in the broker)
    pool = pool or getattr(runner, "ssh", None) or SshPool()
    runner = runner if runner is not None else SessionRunner(pool)
    if members is None:
        members = await expand_fleet(config, fleet, pool)
    inv.record_fleet(fleet.name, fleet.fleet.describe() if fleet.fleet else fleet.name,
                     [{"name": m.name, "definition": m.definition()} for m in members])
    report = FleetReport(fleet.name, members)
    checks: dict[str, tuple[Any, PreRunCheck]] = {}

    async def check(member: Target) -> None:
        request = request_for_probe(inv, probe, member, config.params_for(probe.id, params))
        checks[member.name] = (request, await check_run(inv, member, request, runner=runner))

    await asyncio.gather(*(check(m) for m in members))
    same = {name: c for name, (_r, c) in checks.items() if c.retest_of is not None and not c.stochastic}
    again = force or (bool(same) and ask is not None and await ask(same))
    if not again:
        # the same state: its answer stands
        report.reused = {name: c.retest_of.id for name, c in same.items() if c.retest_of is not None}

    async def run_member(member: Target) -> None:
        request, pre = checks[member.name]
        report.reports[member.name] = await run_probe(inv, member, request, force=True, runner=runner,
                                                      check=pre)

    await asyncio.gather(*(run_member(m) for m in members if m.name not in report.reused))
    st = inv.state
    answers, unreachable = {}, {}
    for member in members:  # in the fleet's order
        run_id = report.reports[member.name].run if member.name in report.reports else report.reused.get(member.name)
        run = st.runs.get(run_id) if run_id is not None else None
        if run is None:
            continue
        if run.classification == "transport":
            unreachable[member.name] = run.reason
        elif run.classification == "completed":
            answers[member.name] = run
        else:
            unreachable[member.name] = f"{run.classification}: {run.reason}"
    report.comparison = compare(fleet.name, probe.id, answers, unreachable)
    report.evidence = inv.record_comparison(report.comparison)
    if probe.analysis == "stacks" and answers:
        # each member sees its own node's ranks; the job's ranks are read together, members named
        records: list[dict[str, Any]] = []
        member_of: dict[int, str] = {}
        for name, run in answers.items():
            for rec in run.records:
                if rec.get("kind") == "rank":
                    member_of[len(records)] = name
                    records.append(rec)
        # the window each member read over (the busy guard weighs CPU time against it)
        window = max((float(r.get("window_s") or 0) for run in answers.values() for r in run.records
                      if r.get("kind") == "result"), default=0.0)
        report.hang = analyze_stacks(records, member_of, window=window)
        inv.record_fleet_hang(fleet.name, {name: run.id for name, run in answers.items()}, report.hang)
    return report

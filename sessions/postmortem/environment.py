"""The postmortem's environment across runs: what each run measured of its target (a
fingerprint, else the state it reported), one table row per state a target was measured in,
and what changed, package by package."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...hypotheses import Change, InvestigationState, RunInfo, state_changes
from ...hypotheses.records import Observation
from ...hypotheses.results import Fingerprint
from .text import cell

__all__ = ["changes_said", "environment_section", "observed_change"]

_FIELDS = {"torch": "torch", "cuda": "CUDA", "triton": "triton", "driver": "driver", "python": "Python"}
_NOTHING_MEASURED = Fingerprint.from_dict({})


def environment_section(st: InvestigationState) -> list[str]:
    out = ["## Environment across runs", "", *_table(st), "",
           "One row per state each target was measured in; (#N): the run that measured the value; "
           "bold: changed since the previous state of that target; —: no run in that state measured it.", ""]
    changed = _changes(st)
    if changed:
        out += ["What changed, package by package:", ""] + [f"- {cell(c)}" for c in changed] + [""]
    return out


def changes_said(changes: Iterable[Mapping[str, Any]]) -> str:
    """Stored changes (name, before, after) in words, "; " between them."""
    return "; ".join(str(Change(c["name"], c.get("before"), c.get("after"))) for c in changes)


def observed_change(seen: Observation) -> tuple[str, str] | None:
    """A state read that saw changes: who changed the target and what changed; None where it saw none."""
    read = seen.read
    if not read.changes:
        return None
    return f"changed by {read.by}" if read.by else "changed outside sleuth", changes_said(read.changes)


def _measured(run: RunInfo, fp: Fingerprint) -> dict[str, str]:
    """What *run* measured of the environment, field by field; a field it did not measure is
    absent (never a guess). Absence that was measured is said: "not installed", "none found"."""
    read = run.read  # the run's state, typed (hypotheses/payloads.py: StateRead)
    env = (read.env if read is not None else None) or {}
    dists = read.distributions if read is not None and read.measured_distributions else None
    version = fp.torch or (read.torch_reported if read is not None else None)
    cuda = fp.cuda or (read.torch_cuda if read is not None else None) or env.get("cuda")
    triton = fp.triton or (dists or {}).get("triton")
    python = fp.python or env.get("python")
    out: dict[str, str] = {}
    if version:
        out["torch"] = str(version)
    elif dists is not None:
        out["torch"] = "not installed"
    if cuda:
        out["cuda"] = str(cuda)
    elif fp.has("torch.cuda") or (version and str(version).endswith("+cpu")):
        out["cuda"] = "none (a CPU build of torch)"
    if triton:
        out["triton"] = str(triton)
    elif fp.has("triton") or dists is not None:
        out["triton"] = "not installed"
    if fp.has("driver") or "driver" in env:
        driver = fp.driver or env.get("driver")
        out["driver"] = str(driver) if driver else "none found"
    if python:
        out["python"] = str(python)
    return out


@dataclass
class _InState:
    """The runs on one target in one state, and each value the first of them to measure it measured."""

    runs: list[int] = field(default_factory=list)
    values: dict[str, tuple[str, int]] = field(default_factory=dict)  # field -> (value, run)


def _table(st: InvestigationState) -> list[str]:
    """One row per state a target was measured in (in the order first seen), each value with
    the run that measured it; "—" only for what no run in that state measured."""
    groups: dict[tuple[str, str], _InState] = {}
    for run in st.runs.values():
        fp = Fingerprint.of_result(run.result)
        if run.state is None and fp is None:
            continue
        group = groups.setdefault((run.target, run.state_key or f"run {run.id}"), _InState())
        group.runs.append(run.id)
        for name, value in _measured(run, fp or _NOTHING_MEASURED).items():
            group.values.setdefault(name, (value, run.id))
    out = ["| target | runs in this state | " + " | ".join(_FIELDS.values()) + " |",
           "|---|---|" + "---|" * len(_FIELDS)]
    previous: dict[str, dict[str, tuple[str, int]]] = {}
    for (target, _key), group in groups.items():
        values, before = group.values, previous.get(target)
        cells = []
        for name in _FIELDS:
            if name not in values:
                cells.append("—")
                continue
            value, rid = values[name]
            changed = before is not None and name in before and before[name][0] != value
            cells.append(f"{'**' + cell(value) + '**' if changed else cell(value)} (#{rid})")
        previous[target] = values
        out.append(f"| {target} | " + ", ".join(f"#{r}" for r in group.runs) + " | " + " | ".join(cells) + " |")
    return out


def _changes(st: InvestigationState) -> list[str]:
    """Sentences: each run's environment against the previous run on its target, each
    fingerprint against its baseline, and changes seen by a state read before a run."""
    out: list[tuple[int, str]] = []
    previous: dict[str, RunInfo] = {}
    for run in st.runs.values():
        if run.state is None:
            continue
        before = previous.get(run.target)
        if before is not None:
            found = state_changes(before.state, run.state)
            if found:
                out.append((run.started_seq, f"#{run.id} on {run.target}, since #{before.id}: " + "; ".join(map(str, found))))
        previous[run.target] = run
        drift = run.result.get("changes")
        if run.result.get("has_baseline") and isinstance(drift, list) and drift:
            out.append((run.finished_seq or run.started_seq, f"#{run.id} {run.probe} against the baseline "
                        f"#{run.params.get('baseline_run', '?')}: {changes_said(drift)}"))
    for seen in st.observations:
        change = observed_change(seen)
        if change is not None:
            how, said = change
            out.append((seen.seq, f"read before a run on {seen.read.target}, {how}: {said}"))
    return [text for _seq, text in sorted(out)]

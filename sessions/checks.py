"""What to run, resolved once for every front end (the CLI, the MCP server, the UI).

A front end parses its own input (flags, a tool's arguments, a dialog) into a :class:`CheckAsk`
and calls :func:`resolve_check`: the rules that decide what may run live here alone — exactly
one of a probe, a script or a shell command; a hook or a poll only with a shell command; a
reason only with force (and, where the front end's policy says so, force only with a reason);
a fleet only with a probe; an unknown probe or a missing script said with what exists. The
refusal is a :class:`CheckError`, one line, worded in the front end's own names for its inputs
(``--force`` in the CLI, ``force`` in MCP), so the rule cannot drift between them.
:func:`request_for_check` then builds the run request (a probe's required params checked there),
and :func:`run_resolved` runs it under the front end's retest policy: a run that would repeat
an earlier one in the same measured state is put to *on_retest* (the CLI asks on a terminal and
refuses elsewhere, MCP refuses with the earlier answer, the UI asks in a dialog); declined, it
is recorded as declined and nothing runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..probes import ProbeDef, Target, builtin_probes, probe_from_file
from .errors import CircularRetest, SessionError
from .investigation import Investigation
from .runs import RunReport, RunRequest, request_for_probe, request_for_shell, run_probe

__all__ = ["CheckAsk", "CheckError", "Declined", "ResolvedCheck", "refuse", "request_for_check", "resolve_check",
           "run_resolved"]


class CheckError(SessionError):
    """What was asked cannot run as asked: one line, in the front end's names; nothing ran."""


@dataclass(frozen=True)
class CheckAsk:
    """One check as a front end was asked for it."""

    probe: str | None = None
    script: str | None = None
    shell: str | None = None
    target: str = "local"
    params: Mapping[str, Any] = field(default_factory=dict)
    force: bool = False
    reason: str | None = None
    hook: bool = False
    poll: bool = False
    sample: bool = False


@dataclass(frozen=True)
class ResolvedCheck:
    """What will run: the target, the probe (None for a shell command) and the params asked."""

    ask: CheckAsk
    target: Target
    probe: ProbeDef | None

    @property
    def fleet(self) -> bool:
        return self.target.fleet is not None

    @property
    def reason(self) -> str | None:
        """The reason kept with a forced run (none without force)."""
        return (self.ask.reason or "").strip() or None if self.ask.force else None


def resolve_check(
    ask: CheckAsk,
    config: Any,
    *,
    root: Path,
    name: Callable[[str], str] = lambda arg: arg,
    reason_needed: bool = False,
) -> ResolvedCheck:
    """Resolve *ask* against *config* (sleuth.toml): the target, the probe or script. *name*
    says an input as the front end calls it ("force" -> "--force"); *reason_needed*: force
    without a reason is refused (an agent's repeat must say why). A relative script path is
    *root*'s. Raises :class:`CheckError` (or the config's own error for an unknown target)."""
    chosen = [x for x in (ask.probe, ask.script, ask.shell) if x]
    if len(chosen) != 1:
        raise CheckError(f"give exactly one of: {name('probe')} (a built-in probe id), {name('script')} (a file path), "
                         f"{name('shell')} (a command)")
    for extra, what in (("hook", "is how a command you start through sleuth gets the stack-dump hook"),
                        ("poll", "declares a command meant to repeat (nvidia-smi, a log's tail)"),
                        ("sample", "says the command is one sample of a flaky failure (its runs pool as trials)")):
        if getattr(ask, extra) and not ask.shell:
            raise CheckError(f"{name(extra)} goes with {name('shell')}: it {what}")
    if ask.reason is not None and not ask.force:
        raise CheckError(f"{name('reason')} goes with {name('force')}: it says why a check already answered in this "
                         "state is run again")
    if reason_needed and ask.force and not (ask.reason or "").strip():
        raise CheckError(f"{name('force')} needs a {name('reason')}: why run again what was already answered in this "
                         "same state (it is recorded with the run)")
    target = config.target(ask.target)
    probe: ProbeDef | None = None
    if ask.script:
        path = Path(ask.script)
        if not path.is_absolute():
            path = root / path
        if not path.is_file():
            raise CheckError(f"{name('script')} {ask.script}: no such file")
        probe = probe_from_file(path, default_id=f"script:{path.name}")
    elif ask.probe:
        probes = builtin_probes()
        if ask.probe not in probes:
            raise CheckError(f"unknown probe {ask.probe!r}; probes: {', '.join(probes)}")
        probe = probes[ask.probe]
    if target.fleet is not None and probe is None:
        raise CheckError(f"{target.name} is a fleet: give a probe (a shell command runs on one target)")
    return ResolvedCheck(ask, target, probe)


def request_for_check(inv: Investigation, check: ResolvedCheck, config: Any) -> RunRequest:
    """The run request of a resolved check on one target (a fleet's members each get their own)."""
    if check.ask.shell:
        return request_for_shell(check.ask.shell, hook=check.ask.hook, poll=check.ask.poll, sample=check.ask.sample)
    assert check.probe is not None
    return request_for_probe(inv, check.probe, check.target, config.params_for(check.probe.id, dict(check.ask.params)))


@dataclass(frozen=True)
class Declined:
    """A circular retest the front end's policy declined: recorded as declined, nothing ran."""

    flag: CircularRetest
    request: RunRequest


RetestPolicy = Callable[[CircularRetest], Awaitable[bool]]
"""Asked when a run would repeat an earlier one in the same state: True runs it anyway."""


async def refuse(_flag: CircularRetest) -> bool:
    """The policy that never runs a circular retest (MCP; the CLI off a terminal)."""
    return False


async def run_resolved(inv: Investigation, check: ResolvedCheck, config: Any, *, on_retest: RetestPolicy = refuse,
                       request: RunRequest | None = None, **run: Any) -> RunReport | Declined:
    """Run a resolved check on its one target (not a fleet) and record it. The target's state
    is read first; a circular retest is put to *on_retest* unless the ask was forced: declined,
    it is recorded as declined and :class:`Declined` comes back; accepted, it runs forced in
    the state just read. *request*: made already (else :func:`request_for_check`); *run*: the
    rest of :func:`~sessions.runs.run_probe`'s keywords (runner, timeout, on_output, …)."""
    if request is None:
        request = request_for_check(inv, check, config)
    try:
        return await run_probe(inv, check.target, request, force=check.ask.force, reason=check.reason, **run)
    except CircularRetest as flag:
        if not await on_retest(flag):
            inv.decline_run(request.probe, request.params, check.target.name, flag.check)
            return Declined(flag, request)
        return await run_probe(inv, check.target, request, force=True, check=flag.check, **run)

"""Trying upstream's fix without touching the user's environment: the ``upgrade`` remedy.

For a known upstream issue (hypotheses/known.py) sleuth makes an overlay at the far end — a
directory under the user's cache where ``pip install --target`` puts ``package==fixed_in``
(probes/far/overlay.py) — and records it as an application of the remedy ``upgrade``. While
it is active, every run on that target puts the overlay first on ``sys.path`` and
``PYTHONPATH`` and starts a fresh interpreter (never forked from an agent whose imports would
hide the overlay), so its state says the versions it imported: a different state. A run of
the check that showed the issue before, under the overlay, is its verification, judged with
the same strength rules as any remedy (sessions/judging.py). Removing the overlay is the
revert; the user's environment is never written.

The install is recorded as a run (kind ``overlay``, probe ``upgrade``): pip's every byte is
kept. An index that cannot be reached is a ``transport`` classification, never evidence.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from packaging.version import InvalidVersion, Version

from ..hypotheses import PreRunCheck, check_key
from ..hypotheses.known import KnownIssue, version_of
from ..hypotheses.stored import Overlay
from ..probes import ProgramSpec, Runner, Target, execute
from ..probes.far import program
from ..probes.far.common import canonical
from .errors import InvestigationError
from .investigation import Investigation
from .redact import Redactor

__all__ = ["OVERLAY_PROBE", "UpgradeResult", "active_upgrade", "describe_contents", "describe_plan", "overlay_prefix",
           "remove_upgrade", "try_upgrade", "with_overlay"]

OVERLAY_PROBE = "upgrade"


def _source() -> str:
    return program("overlay")


def overlay_prefix(inv: Investigation, target: str) -> tuple[str, ...]:
    """The active overlays' site directories on *target*, newest first."""
    apps = [a for a in inv.state.applications.values() if a.active and a.target == target]
    return tuple(a.upgrade.site for a in reversed(apps) if a.upgrade is not None)


def with_overlay(spec: ProgramSpec, prefix: tuple[str, ...]) -> ProgramSpec:
    """*spec* run under the overlays *prefix*: first on the path, in a fresh interpreter."""
    return replace(spec, path_prefix=prefix, fork=False) if prefix else spec


def _size(n: int | None) -> str:
    if n is None:
        return "size unknown"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _names(dists: list[dict[str, Any]], shown: int = 8) -> str:
    def one(d: dict[str, Any]) -> str:
        env = d.get("environment")
        was = f" over the environment's {env}" if env and env != d.get("version") else (
            " (the environment has the same)" if env else "")
        return f"{d['name']} {d.get('version') or '?'}{was}"

    # what replaces another version the environment has first (that is what changes behaviour),
    # then what is new (largest first), the same versions as the environment's last
    def rank(d: dict[str, Any]) -> int:
        env = d.get("environment")
        return 0 if env and env != d.get("version") else (1 if not env else 2)

    ordered = sorted(dists, key=lambda d: (rank(d), -(d.get("bytes") or 0), d["name"].lower()))
    text = ", ".join(one(d) for d in ordered[:shown])
    return text + (f" and {len(ordered) - shown} more" if len(ordered) > shown else "")


def _kinds(others: list[dict[str, Any]]) -> str:
    """"3 replace another version the environment has, 20 are new, 6 the same version as its own"."""
    changed = sum(1 for d in others if d.get("environment") and d["environment"] != d.get("version"))
    new = sum(1 for d in others if not d.get("environment"))
    same = len(others) - changed - new
    return (f"{changed} replace another version the environment has, {new} are not in it, {same} are the version "
            "it has")


def _split(dists: list[dict[str, Any]], package: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    asked = [d for d in dists if canonical(d["name"]) == canonical(package)]
    return asked, [d for d in dists if canonical(d["name"]) != canonical(package)]


def describe_plan(plan: dict[str, Any], package: str) -> str:
    """What pip will put in the overlay, said before the install."""
    if not plan.get("known"):
        return f"what pip will put in the overlay besides {package} is not known beforehand: {plan.get('reason')}"
    _asked, others = _split(plan.get("distributions") or [], package)
    if not others:
        return f"pip will put {package} alone in the overlay"
    return (f"pip will put {len(others)} more distribution(s) in the overlay besides {package} ({_kinds(others)}): "
            f"{_names(others)}")


def describe_contents(overlay: Overlay, *, short: bool = False) -> str:
    """What the overlay holds besides the package asked for: count, size, names (*short*: count
    and size only); '' where the install said nothing of it (an overlay made before sleuth
    listed them)."""
    dists = overlay.distributions
    if dists is None:
        return ""
    package = overlay.package
    asked, others = _split(dists, package)
    total = overlay.bytes
    version = asked[0].get("version") if asked else overlay.version
    if not others:
        return f"{package} {version} alone ({_size(total)})" if short else \
            f"the overlay holds {package} {version} alone ({_size(total)})"
    other_bytes = sum(d.get("bytes") or 0 for d in others)
    whole = f"{package} {version} and {len(others)} more distribution(s), {_size(other_bytes)} of {_size(total)}"
    if short:
        return whole
    return (f"the overlay holds {whole} ({_kinds(others)}): {_names(others)}; what is tried is all of them, not "
            f"{package} alone")


def active_upgrade(inv: Investigation, target: str, issue: str) -> Any:
    for app in inv.state.applications.values():
        if app.active and app.target == target and app.upgrade is not None and app.upgrade.issue == issue:
            return app
    return None


@dataclass
class UpgradeResult:
    run: int  # the recorded install run
    classification: str  # completed | failed | transport | …
    reason: str
    application: int | None = None
    overlay: dict[str, Any] | None = None
    installed_before: str | None = None


async def try_upgrade(
    inv: Investigation,
    target: Target,
    entry: KnownIssue,
    *,
    version: str | None = None,
    no_deps: bool = False,
    index_url: str | None = None,
    find_links: list[str] | None = None,
    no_index: bool = False,
    runner: Runner | None = None,
    timeout: float = 900.0,
    on_plan: Callable[[dict[str, Any]], None] | None = None,
) -> UpgradeResult:
    """Make the overlay with ``entry.package==version`` (default: the entry's fixed_in) on
    *target* and record it as an application of ``upgrade``; a pip that fails or an index
    that cannot be reached is said (the run's classification and reason), nothing applied.
    *on_plan* hears, before pip installs, what it will put in the overlay (a dry run's list)."""
    want = version or (str(entry.fixed_in) if entry.fixed_in else None)
    if want is None:
        raise InvestigationError(f"{entry.id} has no fixed-in release known (checked {entry.checked}): give the "
                                 "version to try with --version (a nightly, a release candidate)")
    try:
        Version(want)
    except InvalidVersion:
        raise InvestigationError(f"--version {want!r} is not a version") from None
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", entry.package):
        raise InvestigationError(f"{entry.id}: package {entry.package!r} is not a distribution name pip takes")
    already = active_upgrade(inv, target.name, entry.id)
    if already is not None:
        raise InvestigationError(f"{entry.id} is already being tried on {target.name} (application #{already.id}, "
                                 f"{already.upgrade.package}=={already.upgrade.version}); revert it first: "
                                 f"sleuth upgrade --revert {entry.id}")
    hypotheses = [h for h in entry.explains if h in inv.state.hypotheses]
    params = {"action": "make", "issue": entry.id, "package": entry.package, "version": want, "no_deps": no_deps,
              "index_url": index_url, "find_links": list(find_links or []), "no_index": no_index}
    shown = {k: v for k, v in params.items() if v not in (None, False, [])}
    check = PreRunCheck(check_key(OVERLAY_PROBE, shown, target.name, target.definition()), None)
    start = inv.begin_run(OVERLAY_PROBE, shown, target.name, kind="overlay", check=check)
    capture = inv.capture(start.run)
    spec = ProgramSpec(probe=OVERLAY_PROBE, source=_source(), filename="overlay.py", params=params, fork=False)
    done = False
    try:
        def heard(record: dict[str, Any]) -> None:
            if record.get("kind") == "plan" and on_plan is not None:
                on_plan(record)

        outcome = await execute(target, spec, capture, runner=runner, timeout=timeout, on_record=heard)
        done = True
    finally:
        capture.close(complete=done)
        if not done:
            inv.finish_run(start.run, "killed", "sleuth itself was interrupted while the overlay was being made", [],
                           None, capture.lines)
    result = next((r for r in outcome.records if r.get("kind") == "result"), None)
    before = version_of(((outcome.state or {}).get("env") or {}).get("distributions") or {}, entry.package)
    classification, reason = outcome.classification, outcome.reason
    if classification == "completed" and (result is None or not result.get("ok")):
        cause = (result or {}).get("cause")
        said = (result or {}).get("reason") or "the overlay script said nothing"
        if cause == "index-unreachable":
            where = Redactor().redact_text(index_url) if index_url else "the package index pip is configured with"
            classification, reason = "transport", f"pip could not reach {where} from {target.name}: {said}"
        elif cause == "not-found":
            classification, reason = "failed", f"{entry.package}=={want} is not on the index pip read: {said}"
        elif cause == "no-pip":
            classification, reason = "failed", (f"no pip in {target.name}'s environment ({said}): install pip there "
                                                "(python -m ensurepip), or make the overlay by hand")
        else:
            classification, reason = "failed", f"pip failed: {said}"
    elif classification == "completed":
        reason = f"{entry.package}=={want} installed in an overlay at {result['path'] if result else '?'}"
    inv.finish_run(start.run, classification, reason, outcome.records, outcome.state, outcome.lines,
                   exit_status=outcome.exit_status, signal=outcome.signal)
    if classification != "completed" or result is None:
        return UpgradeResult(start.run, classification, reason, installed_before=before)
    overlay = {"issue": entry.id, "package": entry.package, "version": want, "path": result["path"],
               "site": result["site"], "explains": hypotheses, "affected": str(entry.affected),
               "installed_before": before, "install_run": start.run}
    if isinstance(result.get("distributions"), list):
        overlay["distributions"] = result["distributions"]
        overlay["bytes"] = result.get("bytes")
    app = inv.record_application(OVERLAY_PROBE, target.name, [], hypotheses[0] if hypotheses else None,
                                 overlay=overlay)
    return UpgradeResult(start.run, classification, reason, app, overlay, before)


async def remove_upgrade(inv: Investigation, target: Target, issue: str, *, runner: Runner | None = None) -> int:
    """Remove the overlay of the active upgrade for *issue* on *target* and record the revert;
    a target that cannot be reached reverts nothing (the overlay is still there, said)."""
    app = active_upgrade(inv, target.name, issue)
    if app is None:
        raise InvestigationError(f"no active upgrade for {issue} on {target.name} (sleuth remedy list; "
                                 "sleuth replay --json lists the applications)")
    spec = ProgramSpec(probe=OVERLAY_PROBE, source=_source(), filename="overlay.py",
                       params={"action": "remove", "path": app.upgrade.path}, fork=False)

    class _Keep:
        def __init__(self) -> None:
            self.data: list[bytes] = []

        def write(self, stream: str, data: bytes) -> None:
            self.data.append(data)

        def flush(self) -> None:
            pass

    outcome = await execute(target, spec, _Keep(), runner=runner, timeout=300.0)
    result = next((r for r in outcome.records if r.get("kind") == "result"), None)
    if outcome.classification != "completed" or result is None or not result.get("ok"):
        why = (result or {}).get("reason") or f"{outcome.classification}: {outcome.reason}"
        raise InvestigationError(f"the overlay of application #{app.id} at {app.upgrade.path} on {target.name} was "
                                 f"not removed ({why}); nothing recorded, the upgrade is still active")
    inv.record_revert(app.id)
    return app.id

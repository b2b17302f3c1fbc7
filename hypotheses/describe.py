"""The sentences sleuth says about a check before it runs, in one wording everywhere: the
CLI's refusal, the UI's modal, the flag recorded in the session and the postmortem."""

from __future__ import annotations

import time

from .drift import state_changes
from .model import InvestigationState
from .records import PreRunCheck, RunInfo
from .state import component_keys

__all__ = ["ago", "describe_check", "describe_retest", "describe_revisit", "same_state", "what_differed"]


def ago(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def same_state(run: RunInfo) -> str:
    """"same torch 2.13.0+cpu, same code, same caches, same remedies" for *run*'s state."""
    torch = run.read.torch_version if run.read is not None else None
    env = f"same torch {torch}" if torch else "same environment"
    return f"{env}, same code, same caches, same remedies"


def what_differed(first: RunInfo, other: RunInfo) -> str:
    """What *other* saw that *first* did not: "torch 2.11.0+cu130", "other code", …"""
    seen = [f"{c.name} {c.after}" if c.after is not None else f"no {c.name}" for c in state_changes(first.state, other.state)]
    if first.state is not None and other.state is not None:
        a, b = component_keys(first.state), component_keys(other.state)
        seen += [f"other {part}" for part in ("code", "caches") if a[part] != b[part]]
        if not seen and a["env"] != b["env"]:
            seen.append("another environment")
    if set(first.remedies) != set(other.remedies):
        seen.append("other remedies")
    return ", ".join(seen[:3]) + (f" and {len(seen) - 3} more" if len(seen) > 3 else "") if seen else "another state"


def describe_retest(state: InvestigationState, check: PreRunCheck, now: float | None = None) -> str:
    """"this repeats #3 (env-fingerprint on ct200, 12 min ago) in the same state …: it was
    completed — refutes version-drift", or, when the world went back to an earlier run's
    state, "back to the state of #1 after #2 saw torch 2.11.0+cu130; #1 already answered
    this: …"; empty when the check repeats nothing."""
    earlier = check.retest_of
    if earlier is None:
        return ""
    now = time.time() if now is None else now
    verdicts = state.verdicts_for(earlier.id)
    said = "; ".join(str(e) for e in verdicts) if verdicts else earlier.reason or "no evidence"
    answered = f"it was {earlier.classification} — {said}"
    if check.back_from is not None:
        back = check.back_from
        return (
            f"back to the state of #{earlier.id} ({earlier.probe} on {earlier.target}, {ago(now - earlier.started_ts)}) "
            f"after #{back.id} saw {what_differed(earlier, back)}; #{earlier.id} already answered this: {answered}"
        )
    how = "measured just now" if check.measured else "as last reported"
    what = f"`{earlier.params.get('cmd')}`" if earlier.kind == "shell" else earlier.probe
    return (
        f"this repeats #{earlier.id} ({what} on {earlier.target}, {ago(now - earlier.started_ts)}) "
        f"in the same state ({how}: {same_state(earlier)}): {answered}"
    )


def describe_revisit(hypothesis: str) -> str:
    return f"{hypothesis} was refuted in this same state and nothing new has been learned since"


def describe_check(state: InvestigationState, check: PreRunCheck, now: float | None = None) -> str:
    """Everything that is flagged about *check*, as one sentence ("" when nothing is)."""
    parts = [describe_retest(state, check, now)] if check.retest_of else []
    parts += [describe_revisit(h) for h in check.revisits]
    return "; ".join(parts)

"""The sentences sleuth says about a check before it runs, in one wording everywhere: the
CLI's refusal, the UI's modal, the flag recorded in the session and the postmortem."""

from __future__ import annotations

import time

from .model import InvestigationState
from .records import PreRunCheck

__all__ = ["ago", "describe_check", "describe_retest", "describe_revisit"]


def ago(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def describe_retest(state: InvestigationState, check: PreRunCheck, now: float | None = None) -> str:
    """"this repeats #3 (env-fingerprint on ct200, 12 min ago) in the same state …: it was
    completed — refutes version-drift"; empty when the check repeats nothing."""
    earlier = check.retest_of
    if earlier is None:
        return ""
    now = time.time() if now is None else now
    verdicts = state.verdicts_for(earlier.id)
    said = "; ".join(str(e) for e in verdicts) if verdicts else earlier.reason or "no evidence"
    return (
        f"this repeats #{earlier.id} ({earlier.probe} on {earlier.target}, {ago(now - earlier.started_ts)}) "
        f"in the same state (same environment, code, caches and remedies): it was {earlier.classification} — {said}"
    )


def describe_revisit(hypothesis: str) -> str:
    return f"{hypothesis} was refuted in this same state and nothing new has been learned since"


def describe_check(state: InvestigationState, check: PreRunCheck, now: float | None = None) -> str:
    """Everything that is flagged about *check*, as one sentence ("" when nothing is)."""
    parts = [describe_retest(state, check, now)] if check.retest_of else []
    parts += [describe_revisit(h) for h in check.revisits]
    return "; ".join(parts)

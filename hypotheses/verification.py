"""How strong a remedy's verification is, for a stochastic reproduction (a race is a sample).

Before the remedy the reproduction failed ``before_failed`` of ``before_trials`` trials; after
it, ``after_failed`` of ``after_trials``. The failure rate before is estimated with Laplace's
rule of succession, ``(failed + 1) / (trials + 2)`` — never 1 or 0 on a handful of trials —
and the verification's strength is the chance of seeing that many clean trials after if
nothing had changed: ``(1 - rate) ** after_trials``. It is **strong** below ``STRONG``
(0.01): 0 failures in 12 trials after 9 of 10 before is < 0.001; one clean trial after 9 of
10 is 0.17 — not a verification, ask for more trials. A `confirmed` status needs a strong one.

A verification needs a failure to compare with: where the reproduction never failed on that
target before the remedy (0 of N trials), a clean run after it says nothing of a fix. Its
outcome is then ``nothing_to_verify``, never ``fixed``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .stored import Verification

__all__ = ["NOTHING_TO_VERIFY", "STRONG", "Strength", "describe_verifications", "nothing_to_verify", "outcome_words",
           "strength", "trials_needed"]

STRONG = 0.01
NOTHING_TO_VERIFY = "nothing_to_verify"
_WORDS = {"fixed": "fixed", "not_fixed": "not fixed", NOTHING_TO_VERIFY: "nothing to verify"}


def nothing_to_verify(before_trials: int) -> str:
    """Why a clean run after a remedy verifies nothing: the failure was never seen before it."""
    return f"nothing to verify: the failure was not seen before (0 of {before_trials})"


def outcome_words(outcome: object) -> str:
    """"fixed", "not fixed" or "nothing to verify"."""
    return _WORDS.get(str(outcome), str(outcome).replace("_", " "))


def describe_verifications(remedy: str, app: int, verifications: Iterable[Verification]) -> list[str]:
    """One application's verifications by one run, in words, hypotheses with the same finding
    said together: "verified lock #1 for compile-race: fixed (0 of 5 trials failed after; …)", or
    "lock #1 for compile-race: nothing to verify: the failure was not seen before (0 of 1)"."""
    said: dict[tuple[str, str], list[str]] = {}
    for v in verifications:
        if v.outcome == NOTHING_TO_VERIFY:
            why = str(v.strength or nothing_to_verify(int((v.before or [0, 0])[1])))
            how = why  # the reason is the finding
        else:
            how = outcome_words(v.outcome) + (f" ({v.strength})" if v.strength else "")
        names = said.setdefault((str(v.outcome), how), [])
        name = str(v.hypothesis or v.issue or "")
        if name and name not in names:
            names.append(name)
    # a run that could verify nothing is not said to have "verified" anything
    return [f"{'' if outcome == NOTHING_TO_VERIFY else 'verified '}{remedy} #{app}"
            f"{' for ' + ', '.join(names) if names else ''}: {how}"
            for (outcome, how), names in said.items()]


@dataclass(frozen=True)
class Strength:
    before_failed: int
    before_trials: int
    after_failed: int
    after_trials: int
    chance: float  # of these clean trials if nothing had changed (1.0 when some failed)
    strong: bool
    needed: int  # trials after that would make it strong, given the rate before

    def __str__(self) -> str:
        after = f"{self.after_failed} of {self.after_trials} trials failed after"
        before = f"{self.before_failed} of {self.before_trials} before"
        if self.after_failed:
            return f"{after}; {before}: not fixed"
        chance = "< 0.001" if self.chance < 0.001 else f"{self.chance:.3f}"
        verdict = "strong" if self.strong else f"weak: {self.needed} clean trials would make it strong"
        return (f"{after}; {before}; the chance of {self.after_trials} clean trial{'s' * (self.after_trials != 1)} "
                f"if nothing had changed is {chance} — {verdict}")


def _rate(failed: int, trials: int) -> float:
    return (failed + 1) / (trials + 2)


def trials_needed(before_failed: int, before_trials: int, threshold: float = STRONG) -> int:
    """Clean trials after the remedy that make a strong verification, given the rate before."""
    clean = 1.0 - _rate(before_failed, before_trials)
    if clean <= 0.0:
        return 1
    return max(1, math.ceil(math.log(threshold) / math.log(clean) - 1e-9))


def strength(before_failed: int, before_trials: int, after_failed: int, after_trials: int) -> Strength:
    chance = 1.0 if after_failed else (1.0 - _rate(before_failed, before_trials)) ** after_trials
    return Strength(before_failed, before_trials, after_failed, after_trials, chance,
                    after_failed == 0 and after_trials > 0 and chance < STRONG,
                    trials_needed(before_failed, before_trials))

"""How strong a remedy's verification is, for a stochastic reproduction (a race is a sample).

Before the remedy the reproduction failed ``before_failed`` of ``before_trials`` trials; after
it, ``after_failed`` of ``after_trials``. The failure rate before is estimated with Laplace's
rule of succession, ``(failed + 1) / (trials + 2)`` — never 1 or 0 on a handful of trials —
and the verification's strength is the chance of seeing that many clean trials after if
nothing had changed: ``(1 - rate) ** after_trials``. It is **strong** below ``STRONG``
(0.01): 0 failures in 12 trials after 9 of 10 before is < 0.001; one clean trial after 9 of
10 is 0.17 — not a verification, ask for more trials. A `confirmed` status needs a strong one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["STRONG", "Strength", "strength", "trials_needed"]

STRONG = 0.01


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

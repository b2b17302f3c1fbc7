"""The straggler test: a rank that waits far less than the others (by its /proc states over the
window and by its share of samples in a collective) is named where the chance of so few waits,
had it waited like the others, is below the project's strength over the number of tests."""

from __future__ import annotations

import math

from .rank import RankView

STRONG = 0.01  # the project's strength (hypotheses/verification.py): a chance below it is strong


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(0, k + 1))


def _straggler_test(readable: list[RankView]) -> tuple[list[tuple[RankView, str]], bool]:
    """Ranks that wait far less than the others (the others wait for them), each with its
    strength: by the main thread's /proc state over the window's reads (waiting = S or D; a
    rank that computes, is throttled or is stopped now and then is R or T), and by the share of
    py-spy samples in a collective. A rank is named where the chance of so few waits, had it
    waited like the others (their rate by Laplace's rule), is below the project's strength
    (0.01) over the number of ranks and tests; a rank stopped (T) in
    some reads while the others are not is named by that share the same way. Reads are thinned to one per ~50 ms so that
    neighbouring reads of one phase are not counted as independent. Returns the named ranks
    with the sentence part, and whether the test could have named one at all."""
    tests = 3 * max(1, len(readable))
    cut = STRONG / tests
    named: list[tuple[RankView, str]] = []
    powered = False
    for v in readable:
        others = [o for o in readable if o is not v]
        if not others:
            continue
        found: list[str] = []
        # by state reads
        n = v.reads() // 5
        if n:
            waits = (v.states.get("S", 0) + v.states.get("D", 0)) // 5
            o_w = sum(o.states.get("S", 0) + o.states.get("D", 0) for o in others) // 5
            o_n = sum(o.reads() for o in others) // 5
            rate = (o_w + 1) / (o_n + 2)
            if (1 - rate) ** n < cut:
                powered = True
            chance = _binom_cdf(waits, n, rate)
            if chance < cut and waits / n < rate:
                stopped = v.states.get("T", 0) + v.states.get("t", 0)
                found.append(f"waiting in {waits} of {n} reads of its state against {o_w} of {o_n} for the others"
                             + (f", stopped (T) in {stopped} of {v.reads()} reads: stopped and continued from outside"
                                if stopped else "")
                             + f"; chance {chance:.1e} if it waited like them")
        # by stops: a rank stopped (T) in some reads while the others are not is being stopped and
        # continued from outside (a duty cycle, a freezer); this holds when every rank is short of
        # CPU and the waiting shares look alike
        if n:
            stops = (v.states.get("T", 0) + v.states.get("t", 0)) // 5
            o_s = sum(o.states.get("T", 0) + o.states.get("t", 0) for o in others) // 5
            o_n = sum(o.reads() for o in others) // 5
            rate = (o_s + 1) / (o_n + 2)
            chance = 1.0 - _binom_cdf(stops - 1, n, rate) if stops else 1.0
            if chance < cut and stops / n > rate and not any("stopped (T)" in f for f in found):
                found.append(f"stopped (T) in {stops} of {n} reads against {o_s} of {o_n} for the others: stopped "
                             f"and continued from outside; chance {chance:.1e}")
        k, m = v.in_collective
        if m:
            o_k = sum(o.in_collective[0] for o in others)
            o_m = sum(o.in_collective[1] for o in others)
            rate = (o_k + 1) / (o_m + 2)
            if (1 - rate) ** m < cut:
                powered = True
            chance = _binom_cdf(k, m, rate)
            if chance < cut and k / m < rate:
                found.append(f"in a collective in {k} of {m} samples against {o_k} of {o_m} for the others; "
                             f"chance {chance:.1e}")
        if found:
            named.append((v, "; ".join(found)))
    return named, powered

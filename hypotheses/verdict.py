"""Turning one probe result into evidence for one hypothesis, by the catalog's rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .catalog import ProbeTest
from .rules import MissingField

__all__ = ["Verdict", "judge", "EVIDENCE_CLASSES"]

# Only these classifications can carry evidence; a transport fault, a timeout, a kill or a
# run that never reported says nothing about any hypothesis.
EVIDENCE_CLASSES = ("completed", "failed")


@dataclass(frozen=True)
class Verdict:
    verdict: str  # "supports" | "refutes" | "inconclusive"
    rule: str  # the rule that decided, or why none did
    fields: dict[str, Any]  # the result fields the rules read


def judge(test: ProbeTest, classification: str, result: Mapping[str, Any]) -> Verdict | None:
    """The verdict of *result* on the hypothesis *test* belongs to; None if no evidence.

    A ``failed`` run only counts when the probe test says so (``counts_failed``): then the
    error record's fields (``error_type``, ``message``) are in *result*.
    """
    if classification not in EVIDENCE_CLASSES:
        return None
    if classification == "failed" and not test.counts_failed:
        return None
    read = {}
    missing: list[str] = []
    for which, rule in (("supports", test.supports), ("refutes", test.refutes)):
        if rule is None:
            continue
        read.update({n: result[n] for n in rule.names if n in result})
        try:
            if rule.evaluate(result):
                return Verdict(which, rule.source, read)
        except MissingField as exc:
            missing.append(str(exc))
        except TypeError as exc:  # e.g. a string compared with a number
            return Verdict("inconclusive", f"{rule.source}: {exc}", read)
    why = "neither rule matched" if not missing else f"result lacks {', '.join(sorted(set(missing)))}"
    return Verdict("inconclusive", why, read)

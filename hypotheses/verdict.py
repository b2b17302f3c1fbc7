"""Turning one probe result into evidence for one hypothesis, by the catalog's rules."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .catalog import ProbeTest
from .rules import MissingField

__all__ = ["EVIDENCE_CLASSES", "Verdict", "judge", "result_fields"]

# Only these classifications can carry evidence; a transport fault, a timeout, a kill or a
# run that never reported says nothing about any hypothesis.
EVIDENCE_CLASSES = ("completed", "failed")


def result_fields(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The fields rules read: every ``result`` record merged in order, plus the error's."""
    fields: dict[str, Any] = {}
    for rec in records:
        if rec.get("kind") == "result":
            fields.update({k: v for k, v in rec.items() if k != "kind"})
        elif rec.get("kind") == "error":
            fields.setdefault("error_type", rec.get("type"))
            fields.setdefault("message", rec.get("message"))
    return fields


@dataclass(frozen=True)
class Verdict:
    verdict: str  # "supports" | "refutes" | "inconclusive"
    rule: str  # the rule that decided, or why none did
    fields: dict[str, Any]  # the result fields the rules read


def judge(test: ProbeTest, classification: str, result: Mapping[str, Any]) -> Verdict | None:
    """The verdict of *result* on the hypothesis *test* belongs to; None if no evidence.

    A run the test's ``applies`` rule excludes (another face of the race, say) gives no
    evidence at all. A rule (``applies`` included) that compares values of different types
    (a string with a number) makes the verdict inconclusive and says so. A ``failed`` run only counts when the probe test says so (``counts_failed``): then the
    error record's fields (``error_type``, ``message``) are in *result*.
    """
    if classification not in EVIDENCE_CLASSES:
        return None
    if classification == "failed" and not test.counts_failed:
        return None
    if test.applies is not None:
        try:
            if not test.applies.evaluate(result):
                return None
        except MissingField:  # the run does not report what the test is about
            return None
        except TypeError as exc:  # as in the rules below: a type mismatch is said, never dropped
            return Verdict("inconclusive", f"{test.applies.source}: {exc}", {n: result[n] for n in test.applies.names if n in result})
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
    rules = [r for r in (test.supports, test.refutes) if r is not None]
    if missing:
        why = f"result lacks {', '.join(sorted(set(missing)))}"
    elif len(rules) == 1:  # a test with one rule: it did not match, and it is named
        why = f"{'supports' if rules[0] is test.supports else 'refutes'} rule did not match: {rules[0].source}"
    else:
        why = "neither rule matched"
    if test.settle:
        why += f"; what would settle it: {test.settle}"
    return Verdict("inconclusive", why, read)

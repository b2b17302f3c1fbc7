"""Pure domain of sleuth: the hypothesis graph, the catalog, verdict rules, retest detection.

Imports nothing from probes/, sessions/ or app/, and does no I/O beyond reading catalog files.

Errors (hypotheses/errors.py; catch the root at a boundary)::

    HypothesisError
     ├── CatalogError       a catalog file cannot be used (file:line:col)
     ├── RuleError          a rule outside the safe whitelist, or one that does not parse
     └── MissingField       a result lacks a field a rule reads (judging turns it into
                            "inconclusive"; it never reaches a user)
"""

from __future__ import annotations

from .catalog import (
    BUILTIN_DIR,
    LINK_KINDS,
    Catalog,
    HypothesisDef,
    ProbeTest,
    SymptomDef,
    load_catalog,
)
from .describe import ago, describe_check, describe_retest, describe_revisit, same_state, what_differed
from .drift import Change, fingerprint_changes, state_changes
from .errors import CatalogError, HypothesisError, MissingField, RuleError
from .fleet import Comparison, Spread, compare, member_fields
from .model import InvestigationState
from .records import (
    STATUS_GLYPHS,
    STATUS_LEGEND,
    STATUSES,
    VERDICTS,
    Event,
    EventKind,
    Evidence,
    Flag,
    PreRunCheck,
    RemedyApplication,
    RunInfo,
)
from .rules import Rule, compile_rule
from .state import STATE_COMPONENTS, canonical, check_key, component_keys, state_key, state_key_of_parts, target_parts
from .verdict import EVIDENCE_CLASSES, Verdict, judge, result_fields
from .verification import (
    NOTHING_TO_VERIFY,
    STRONG,
    Strength,
    describe_verifications,
    nothing_to_verify,
    outcome_words,
    strength,
    trials_needed,
)

__all__ = [
    "RemedyApplication",
    "BUILTIN_DIR",
    "Catalog",
    "Change",
    "Comparison",
    "Spread",
    "compare",
    "member_fields",
    "CatalogError",
    "EVIDENCE_CLASSES",
    "Event",
    "EventKind",
    "Evidence",
    "Flag",
    "HypothesisDef",
    "HypothesisError",
    "InvestigationState",
    "LINK_KINDS",
    "MissingField",
    "PreRunCheck",
    "ProbeTest",
    "Rule",
    "RuleError",
    "RunInfo",
    "STATE_COMPONENTS",
    "STATUSES",
    "STRONG",
    "Strength",
    "STATUS_GLYPHS",
    "STATUS_LEGEND",
    "VERDICTS",
    "SymptomDef",
    "Verdict",
    "ago",
    "canonical",
    "check_key",
    "compile_rule",
    "component_keys",
    "target_parts",
    "describe_check",
    "describe_retest",
    "describe_revisit",
    "fingerprint_changes",
    "same_state",
    "state_changes",
    "what_differed",
    "judge",
    "load_catalog",
    "result_fields",
    "state_key",
    "state_key_of_parts",
    "strength",
    "describe_verifications",
    "nothing_to_verify",
    "outcome_words",
    "NOTHING_TO_VERIFY",
    "trials_needed",
]

"""Remedies inside an investigation: the recorded preview, one apply and one revert path for
a local or a remote file, each an event with the file's before and after bytes, tied to the
hypothesis the catalog says the remedy addresses; and which run verifies an application.

The names the rest of sleuth uses, from three modules: state.py (what the state says of
remedies), files.py (one file), trees.py (a whole code tree); use.py is the use-case the front
ends call (where a remedy goes, its plan, apply and revert)."""

from __future__ import annotations

from ...probes.remedies import RemedyError
from .files import (
    apply_remedy,
    plan_remedy,
    record_remedy,
    restore_application,
    revert_application,
    revert_remedy,
    write_remedy,
)
from .state import (
    active_application,
    addressed_hypothesis,
    applied_file,
    compile_sites,
    latest_shapes,
    nothing_to_change,
    remedy_inputs,
    run_to_verify,
    verify_params,
)
from .trees import TreePlan, apply_tree, find_remedy_file, plan_tree, revert_tree, tree_files

__all__ = [
    "RemedyError",
    "active_application",
    "addressed_hypothesis",
    "applied_file",
    "apply_remedy",
    "compile_sites",
    "find_remedy_file",
    "latest_shapes",
    "nothing_to_change",
    "plan_remedy",
    "record_remedy",
    "restore_application",
    "remedy_inputs",
    "TreePlan",
    "apply_tree",
    "plan_tree",
    "revert_application",
    "revert_remedy",
    "revert_tree",
    "tree_files",
    "run_to_verify",
    "verify_params",
    "write_remedy",
]

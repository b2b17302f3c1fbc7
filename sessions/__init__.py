"""The live investigation: the event store (SQLite), replay, redaction and exports.

The UI and the CLI go through :class:`Investigation`; nothing else writes a session.

Errors (sessions/errors.py; catch the root at a boundary)::

    SessionError
     ├── StoreError         a session file that cannot be used (missing, corrupt, newer)
     ├── InvestigationError a request names something unknown or is not allowed; nothing written
     ├── ExchangeError      an export that cannot be imported; nothing written
     └── CircularRetest     not a fault: the run would repeat an earlier one in the same
                            state (``check``); the caller asks the user

Errors of the layers below pass through: ``probes.ProbesError``, ``hypotheses.HypothesisError``.
"""

from __future__ import annotations

from .capture import CaptureWriter
from .checks import CheckAsk, CheckError, ResolvedCheck, request_for_check, resolve_check
from .errors import CircularRetest, ExchangeError, InvestigationError, SessionError, StoreError
from .exchange import dump_export, export_session, import_session, run_cast
from .fleet import FleetReport, expand_fleet, read_ssh_config, run_fleet
from .investigation import Investigation, RunStart, result_fields
from .output_index import STREAMS, OutputLine
from .postmortem import postmortem_markdown, write_postmortem
from .redact import Redactor, is_secret_name
from .remedies import (
    RemedyError,
    TreePlan,
    active_application,
    addressed_hypothesis,
    applied_file,
    apply_remedy,
    apply_tree,
    find_remedy_file,
    latest_shapes,
    plan_remedy,
    plan_tree,
    record_remedy,
    remedy_inputs,
    restore_application,
    revert_application,
    revert_remedy,
    revert_tree,
    run_to_verify,
    verify_params,
    write_remedy,
)
from .runs import (
    Measured,
    RunReport,
    RunRequest,
    check_run,
    measure_state,
    request_for_probe,
    request_for_shell,
    run_probe,
)
from .steps import NextStep, StepKind, investigation_next_step, next_step
from .store import Store
from .workspace import Workspace

__all__ = [
    "CheckAsk",
    "NextStep",
    "StepKind",
    "investigation_next_step",
    "next_step",
    "CheckError",
    "ResolvedCheck",
    "request_for_check",
    "resolve_check",
    "FleetReport",
    "expand_fleet",
    "read_ssh_config",
    "run_fleet",
    "ExchangeError",
    "dump_export",
    "export_session",
    "import_session",
    "run_cast",
    "CaptureWriter",
    "CircularRetest",
    "RemedyError",
    "addressed_hypothesis",
    "apply_remedy",
    "TreePlan",
    "active_application",
    "apply_tree",
    "plan_tree",
    "restore_application",
    "revert_application",
    "revert_tree",
    "applied_file",
    "find_remedy_file",
    "record_remedy",
    "remedy_inputs",
    "write_remedy",
    "run_to_verify",
    "verify_params",
    "latest_shapes",
    "plan_remedy",
    "revert_remedy",
    "Measured",
    "RunReport",
    "check_run",
    "measure_state",
    "RunRequest",
    "request_for_probe",
    "request_for_shell",
    "run_probe",
    "Investigation",
    "SessionError",
    "InvestigationError",
    "OutputLine",
    "Redactor",
    "RunStart",
    "STREAMS",
    "Store",
    "StoreError",
    "Workspace",
    "is_secret_name",
    "postmortem_markdown",
    "write_postmortem",
    "result_fields",
]

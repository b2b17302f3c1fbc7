"""Everything that touches a target: configuration, hop chains, command building,
transports, capture, the built-in probe scripts and the remedies.

Imports nothing from hypotheses/, sessions/ or app/.

Errors (probes/errors.py; catch the root at a boundary)::

    ProbesError
     ├── ConfigError        sleuth.toml does not parse or a target is malformed (file:line:col)
     ├── ProbeError         unknown probe id, a probe file without a valid PROBE literal, or a required param unset
     ├── RemedyError        a remedy cannot be previewed, applied or reverted
     └── ReachError         a fault on the way to the target (exit status 1, never bad input)
          ├── TransportError  a hop could not be reached (``hop``); raised by connection set-up and
          │                   file transfer — a *run* returns it as its ``transport`` classification
          ├── AgentError      the resident agent could not start or broke its protocol
          └── BrokerError     the agent broker (shared by the CLI and the UI) cannot be reached or started
"""

from __future__ import annotations

from .agent import AGENT_VERSION, Agent, AgentPool
from .catalog import ProbeDef, builtin_probes, probe_from_file
from .classify import CLASSIFICATIONS, RunFacts, classify
from .config import CONTAINER_KINDS, TEMPLATE, Config, Container, Fleet, Target, load_config
from .errors import (
    AgentError,
    BrokerError,
    ConfigError,
    ProbeError,
    ProbesError,
    ReachError,
    RemedyError,
    TransportError,
)
from .hops import CD_SCRIPT, Hop, HopChain, container_prefix
from .protocol import ProgramSpec, RecordParser, build_program, new_nonce
from .runner import OutputSink, Runner, RunOutcome, SessionRunner, chain_for, execute
from .transports import (
    ExitInfo,
    LocalTransport,
    MockTransport,
    Process,
    Reply,
    SshPool,
    SshTransport,
    Transport,
    probe_reply,
    run_chain,
    run_process,
    split_host,
    transport_for,
)

__all__ = [
    "AGENT_VERSION",
    "Agent",
    "AgentError",
    "AgentPool",
    "BrokerError",
    "CD_SCRIPT",
    "CLASSIFICATIONS",
    "CONTAINER_KINDS",
    "Config",
    "ConfigError",
    "Container",
    "Fleet",
    "ExitInfo",
    "Hop",
    "HopChain",
    "LocalTransport",
    "MockTransport",
    "OutputSink",
    "ProbeDef",
    "ProbeError",
    "ProbesError",
    "ReachError",
    "Process",
    "ProgramSpec",
    "RecordParser",
    "RemedyError",
    "Reply",
    "RunFacts",
    "RunOutcome",
    "Runner",
    "SessionRunner",
    "SshPool",
    "SshTransport",
    "TEMPLATE",
    "Target",
    "Transport",
    "TransportError",
    "build_program",
    "builtin_probes",
    "chain_for",
    "classify",
    "container_prefix",
    "execute",
    "load_config",
    "new_nonce",
    "probe_from_file",
    "probe_reply",
    "run_chain",
    "run_process",
    "split_host",
    "transport_for",
]

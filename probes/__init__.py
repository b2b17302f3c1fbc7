"""Everything that touches a target: configuration, hop chains, command building,
transports, capture, the built-in probe scripts and the remedies.

Imports nothing from hypotheses/, sessions/ or app/.
"""

from __future__ import annotations

from .agent import AGENT_VERSION, Agent, AgentError, AgentPool
from .catalog import ProbeDef, ProbeError, builtin_probes, probe_from_file
from .classify import CLASSIFICATIONS, RunFacts, classify
from .config import CONTAINER_KINDS, TEMPLATE, Config, ConfigError, Container, Target, load_config
from .hops import CD_SCRIPT, Hop, HopChain, container_prefix
from .protocol import ProgramSpec, RecordParser, build_program, new_nonce
from .runner import OutputSink, RunOutcome, chain_for, execute
from .transport import ExitInfo, SshPool, TransportError, run_chain, split_host

__all__ = [
    "AGENT_VERSION",
    "Agent",
    "AgentError",
    "AgentPool",
    "CD_SCRIPT",
    "CLASSIFICATIONS",
    "CONTAINER_KINDS",
    "Config",
    "ConfigError",
    "Container",
    "ExitInfo",
    "Hop",
    "HopChain",
    "OutputSink",
    "ProbeDef",
    "ProbeError",
    "ProgramSpec",
    "RecordParser",
    "RunFacts",
    "RunOutcome",
    "SshPool",
    "TEMPLATE",
    "Target",
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
    "run_chain",
    "split_host",
]

"""Every error the probes package raises, under one root.

::

    ProbesError                 anything probes/ refuses or cannot do; str() says what and where
     ├── ConfigError            sleuth.toml does not parse or a target is malformed (file:line:col)
     ├── ProbeError             an unknown probe id, or a probe file without a valid PROBE literal
     ├── RemedyError            a remedy cannot be previewed, applied or reverted (says why, where)
     └── ReachError             a fault between here and the target, never the user's input
          ├── TransportError    a hop could not be reached; ``hop`` names it (1-based)
          ├── AgentError        the resident agent could not start or broke its protocol
          │                     (the pool then runs probes in a session each and says why)
          └── BrokerError       the agent broker cannot be reached or started

The command line maps the two kinds once (app/cli.py): ReachError is exit status 1, as a run
whose transport failed; every other ProbesError is bad input, exit status 2.

A run never raises for a fault of the far end: the transport layer *returns* it as the
run's ``transport`` classification (probes.transports.run_process). TransportError is
raised only by what sets a connection up, and by file transfers (remedies on a target).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["AgentError", "BrokerError", "ConfigError", "ProbeError", "ProbesError", "ReachError", "RemedyError",
           "TransportError"]


class ProbesError(Exception):
    """Root of the errors of probes/: catch this one at a boundary."""


class ConfigError(ProbesError):
    """sleuth.toml cannot be used; ``path``, ``line``, ``col`` say where."""

    def __init__(self, path: Path | str | None, line: int | None, col: int | None, message: str) -> None:
        where = f"{path}:{line}:{col}: " if path is not None and line is not None else f"{path}: " if path else ""
        super().__init__(where + message)
        self.path, self.line, self.col, self.message = (str(path) if path else None), line, col, message


class ProbeError(ProbesError):
    """An unknown probe id, or a probe file without a valid PROBE literal."""


class RemedyError(ProbesError):
    """The remedy cannot be previewed, applied or reverted; says why and where."""


class ReachError(ProbesError):
    """The target, its agent or the broker could not be reached or broke off: a transport
    fault (exit status 1), never evidence and never the user's bad input."""


class TransportError(ReachError):
    """A hop could not be reached; ``hop`` says which (1-based), ``str()`` why."""

    def __init__(self, message: str, hop: int | None = None) -> None:
        super().__init__(message)
        self.hop = hop


class AgentError(ReachError):
    """The agent could not be started, or broke its protocol."""


class BrokerError(ReachError):
    """The agent broker (the process the CLI and the UI share agents through) cannot be
    reached or started; ``untrusted`` when something listens where it should that is not
    this user's broker in a private folder (it was sent nothing)."""

    def __init__(self, message: str, untrusted: bool = False) -> None:
        super().__init__(message)
        self.untrusted = untrusted

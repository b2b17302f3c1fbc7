"""The front ends' own error, and the roots they catch.

``UsageError`` is bad input on the command line (a run number that is not one, a missing
file, two exclusive options). At the boundary — ``app.cli.main`` and each UI action —
sleuth catches the four roots and nothing finer::

    UsageError                  app/: the command line was wrong
    sessions.SessionError       the session refused (StoreError, InvestigationError, ExchangeError)
    probes.ProbesError          a target, probe, remedy or transport refused
    hypotheses.HypothesisError  a catalog file or rule refused

Each is one line on stderr and exit status 2 from the CLI — but probes.ReachError (a target,
agent or broker not reached: TransportError, AgentError, BrokerError), exit status 1 — and
a notification in the UI;
``sessions.CircularRetest`` (a SessionError) is caught first where a run is asked for, since
it is a question for the user, not a fault.
"""

from __future__ import annotations

from ..hypotheses import HypothesisError
from ..probes import ProbesError, ReachError
from ..sessions import SessionError

__all__ = ["HypothesisError", "ProbesError", "ReachError", "SessionError", "UsageError"]


class UsageError(Exception):
    """The command line asked for something that cannot be: says what, and what to give."""

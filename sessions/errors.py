"""Every error the sessions package raises, under one root.

::

    SessionError                anything sessions/ refuses; str() says what and what to do
     ├── StoreError             a session file that cannot be used (missing, corrupt, newer)
     ├── InvestigationError     a request names something unknown or is not allowed now;
     │                          nothing was written
     ├── ExchangeError          an export that cannot be imported (the path inside the
     │                          document, line:col for broken JSON); nothing was written
     └── CircularRetest         not a fault: the run would repeat an earlier one in the same
                                state; ``check`` holds the details, the caller decides

Errors of the layers below pass through unchanged: ``probes.ProbesError`` (a bad
sleuth.toml, a remedy that cannot apply, a target that cannot be reached for a file) and
``hypotheses.HypothesisError`` (a bad catalog file or rule).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..hypotheses import PreRunCheck

__all__ = ["CircularRetest", "ExchangeError", "InvestigationError", "SessionError", "StoreError"]


class SessionError(Exception):
    """Root of the errors of sessions/: catch this one at a boundary."""


class StoreError(SessionError):
    """A session file that cannot be used; the message names it and what to do."""


class InvestigationError(SessionError):
    """A request that cannot be carried out; nothing was written."""


class ExchangeError(SessionError):
    """An export that cannot be imported; nothing was written."""


class CircularRetest(SessionError):
    """The run would repeat an earlier one in the same state; the caller decides."""

    def __init__(self, message: str, check: PreRunCheck) -> None:
        super().__init__(message)
        self.check = check

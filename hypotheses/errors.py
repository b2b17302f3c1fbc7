"""Every error the hypotheses package raises, under one root.

::

    HypothesisError             anything the domain refuses; str() says what and where
     ├── CatalogError           a catalog file cannot be used (file:line:col)
     ├── RuleError              a rule uses syntax outside the safe whitelist, or does not parse
     └── MissingField           a result lacks a field a rule reads (raised while judging;
                                the verdict code turns it into "inconclusive", never a crash)
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CatalogError", "HypothesisError", "MissingField", "RuleError"]


class HypothesisError(Exception):
    """Root of the errors of hypotheses/: catch this one at a boundary."""


class CatalogError(HypothesisError):
    """A catalog file cannot be used; says which file, line and column."""

    def __init__(self, path: Path | str, line: int, col: int, message: str) -> None:
        super().__init__(f"{path}:{line}:{col}: {message}")
        self.path, self.line, self.col, self.message = str(path), line, col, message


class RuleError(HypothesisError):
    """A rule expression uses syntax outside the whitelist, or does not parse. ``column``
    (1-based, within the rule's text) says where, when it is known; ``reason`` is the message
    without the rule, for a caller that says where itself (the catalog: file:line:col)."""

    def __init__(self, source: str, reason: str, column: int | None = None) -> None:
        where = f" at column {column}" if column else ""
        super().__init__(f"rule {source!r}{where}: {reason}")
        self.source, self.reason, self.column = source, reason, column


class MissingField(HypothesisError, LookupError):
    """The result lacks a field the rule reads."""

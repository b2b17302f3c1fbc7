"""Verdict rules: small expressions over a probe result's fields, checked without eval.

A rule is a Python-syntax expression limited to names, numbers, strings, booleans,
comparisons (including ``in`` / ``not in`` on strings) and ``and`` / ``or`` / ``not``.
Anything else — calls, attribute access, subscripts, lambdas, ``__import__`` — is refused
when the rule is compiled, so a catalog file with such a rule fails at load time.

Exceptions:
    RuleError           the expression is not allowed (raised by :func:`compile_rule`)
    MissingField        a name the rule needs is not in the result (raised on evaluation;
                        callers treat the verdict as inconclusive)
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import MissingField, RuleError

__all__ = ["Rule", "RuleError", "MissingField", "compile_rule"]


_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: operator.contains(b, a),
    ast.NotIn: lambda a, b: not operator.contains(b, a),
}
_ALLOWED = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.Compare,
    ast.Name,
    ast.Load,
    ast.Constant,
    *_COMPARE,
)


def _describe(node: ast.AST) -> str:
    kinds = {
        ast.Call: "a call",
        ast.Attribute: "attribute access",
        ast.Subscript: "a subscript",
        ast.Lambda: "a lambda",
        ast.BinOp: "arithmetic",
    }
    for kind, words in kinds.items():
        if isinstance(node, kind):
            return words
    return type(node).__name__


@dataclass(frozen=True)
class Rule:
    """A compiled, whitelisted rule expression."""

    source: str
    tree: ast.Expression = field(repr=False, compare=False)
    names: frozenset[str] = field(default_factory=frozenset, compare=False)

    def evaluate(self, fields: Mapping[str, Any]) -> bool:
        """True or False for these result fields; MissingField if a name is absent."""
        return bool(_eval(self.tree.body, fields))


def compile_rule(source: str) -> Rule:
    """Parse and check *source*; raise RuleError naming the first disallowed part."""
    lead = len(source) - len(source.lstrip())  # columns count in the rule as written
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        # one position: the column in the rule (Python's "(detected at line 1)" says another)
        msg = re.sub(r"\s*\(detected at line \d+\)", "", exc.msg or "invalid syntax")
        end = len(source.strip()) + 1  # Python says offset 0 when the rule ends too soon: the end is where
        column = min(exc.offset or end, end) + lead
        if not exc.offset:
            msg += " (the rule ends where more is needed)"
        raise RuleError(source, f"does not parse: {msg}", column) from None
    names: set[str] = set()
    for node in ast.walk(tree):
        column = getattr(node, "col_offset", -1) + 1 + lead or None
        if not isinstance(node, _ALLOWED):
            raise RuleError(source, f"uses {_describe(node)}; rules may only use names, "
                            "numbers, strings, comparisons and and/or/not", column)
        if isinstance(node, ast.Name):
            if node.id.startswith("__"):
                raise RuleError(source, f"uses the dunder name {node.id!r}", column)
            names.add(node.id)
        if isinstance(node, ast.Constant) and not isinstance(
            node.value, (int, float, str, bool, type(None))
        ):
            raise RuleError(source, f"uses a {type(node.value).__name__} constant", column)
    return Rule(source=source, tree=tree, names=frozenset(names))


_CONSTANT_NAMES = {"true": True, "false": False, "none": None}


def _eval(node: ast.AST, fields: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in fields:
            return fields[node.id]
        if node.id in _CONSTANT_NAMES:
            return _CONSTANT_NAMES[node.id]
        raise MissingField(node.id)
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            return all(_eval(v, fields) for v in node.values)
        return any(_eval(v, fields) for v in node.values)
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, fields)
        return (not value) if isinstance(node.op, ast.Not) else -value
    if isinstance(node, ast.Compare):
        left = _eval(node.left, fields)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, fields)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    raise RuleError(ast.unparse(node), f"unexpected node {type(node).__name__}")  # compile_rule refused it

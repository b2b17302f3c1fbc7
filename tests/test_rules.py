"""The safe rule evaluator: what it allows, what it refuses, how it treats missing fields."""

from __future__ import annotations

import pytest
from sleuth.hypotheses import MissingField, RuleError, compile_rule


@pytest.mark.parametrize(
    ("source", "fields", "expected"),
    [
        ("fx_trace_errors > 0", {"fx_trace_errors": 3}, True),
        ("fx_trace_errors > 0", {"fx_trace_errors": 0}, False),
        ("threads > 1 and fx_trace_errors == 0", {"threads": 4, "fx_trace_errors": 0}, True),
        ("not cold and keys_match", {"cold": False, "keys_match": True}, True),
        ("cold or not keys_match", {"cold": False, "keys_match": True}, False),
        ("race == 'fx-trace'", {"race": "fx-trace"}, True),
        ("'custom' in message", {"message": "KeyError: 'custom'"}, True),
        ("1 < threads <= 8", {"threads": 8}, True),
        ("slowdown > -1.5", {"slowdown": 0}, True),
        ("fallback == true", {"fallback": True}, True),
    ],
)
def test_allowed_rules_evaluate(source, fields, expected):
    assert compile_rule(source).evaluate(fields) is expected


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("__import__('os').system('true')", "a call"),
        ("os.system", "attribute access"),
        ("len(errors) > 0", "a call"),
        ("errors['RuntimeError'] > 0", "a subscript"),
        ("(lambda: 1)()", "a call"),
        ("threads * 2 > 1", "arithmetic"),
        ("__builtins__", "dunder"),
        ("[x for x in y]", "ListComp"),
    ],
)
def test_disallowed_rules_are_refused_at_compile(source, words):
    with pytest.raises(RuleError) as err:
        compile_rule(source)
    assert words in str(err.value)


def test_rule_that_does_not_parse_is_refused():
    with pytest.raises(RuleError, match="does not parse"):
        compile_rule("threads >")


def test_missing_field_is_reported_not_guessed():
    rule = compile_rule("threads > 1 and fx_trace_errors > 0")
    with pytest.raises(MissingField, match="fx_trace_errors"):
        rule.evaluate({"threads": 4})
    assert rule.names == {"threads", "fx_trace_errors"}

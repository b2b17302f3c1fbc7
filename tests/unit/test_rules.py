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


@pytest.mark.parametrize(
    ("rule", "column"),
    [("threads >", 10), ("threads > 1 and", 16), ("a > > 1", 5), ("a == 'x", 6), ("a > 1 )", 7),
     ("a > 1 and b.c", 11), ("  foo(1)", 3)],
)
def test_a_rule_error_names_one_position_the_right_one(rule, column):
    """Issue 25 (friction): the column of the fault in the rule — the end, where the rule stops
    too soon (Python says 0 there) — and no second position (Python's 'detected at line 1')."""
    with pytest.raises(RuleError) as err:
        compile_rule(rule)
    assert err.value.column == column, str(err.value)
    assert "line" not in str(err.value) and str(err.value).count("column") == 1


def test_a_rule_error_in_a_catalog_file_points_at_the_fault_in_the_file(tmp_path):
    from sleuth.hypotheses import CatalogError, load_catalog

    path = tmp_path / "mine.toml"
    path.write_text('[[hypothesis]]\nid = "h"\ntitle = "h"\n\n  [[hypothesis.probe]]\n  id = "p"\n'
                    '  supports = "threads > 1 and"\n')
    with pytest.raises(CatalogError) as err:
        load_catalog([tmp_path])
    line = '  supports = "threads > 1 and"'
    assert str(err.value).startswith(f"{path}:7:{line.index('threads') + 1 + len('threads > 1 and')}: "), str(err.value)
    assert "(detected at line" not in str(err.value)

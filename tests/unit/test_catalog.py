"""The catalog: built-in hypotheses, a user's own files, and load-time errors with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest
from sleuth.hypotheses import CatalogError, load_catalog


def test_builtin_catalog_has_the_four_hypotheses_and_refinements():
    cat = load_catalog()
    top = {h.id for h in cat.hypotheses.values() if not any(k == "refines" for k, _ in h.links)}
    assert top == {"compile-race", "version-drift", "cache-invalidation", "dense-fallback", "hang"}
    race = cat.hypotheses["compile-race"]
    assert [t.probe for t in race.probes] == ["compile-race", "fx-trace-state"]
    assert race.remedies == ("lock", "precompile")
    assert ("exposes", "compile-race") in cat.hypotheses["cache-invalidation"].links
    assert cat.hypotheses["concurrent-fx-trace"].remedies == ("lock",)  # precompile cannot help
    probes = {t.probe for h in cat.hypotheses.values() for t in h.probes}
    assert probes == {"compile-race", "fx-trace-state", "env-fingerprint", "cache-inventory", "compile-cache", "dense-fallback",
                      "stacks"}
    hang = {h.id for h in cat.hypotheses.values() if ("refines", "hang") in h.links}
    assert hang == {"collective-mismatch", "deadlock", "straggler"} and cat.symptoms["job-stopped"].opt_in


def test_the_hang_family_joins_a_session_with_its_symptom_or_its_probe_not_before(tmp_path: Path):
    """A race hunt is not shown four hang hypotheses; `symptom add job-stopped` (or a stacks
    run) brings the family in, each refinement after the hypothesis it refines."""
    from sleuth.sessions import Investigation

    cat = load_catalog()
    inv = Investigation.create(tmp_path / "a.sleuth", "race", cat)
    assert "hang" not in inv.state.hypotheses and "compile-race" in inv.state.hypotheses
    inv.add_symptom("job-stopped")
    order = [h for h in inv.state.hypotheses if h in ("hang", "collective-mismatch", "deadlock", "straggler")]
    assert order[0] == "hang" and set(order) == {"hang", "collective-mismatch", "deadlock", "straggler"}
    assert inv.state.symptoms["job-stopped"].title == "the job stopped making progress"
    other = Investigation.create(tmp_path / "b.sleuth", "stacks first", cat)
    assert other.adopt_probe("stacks")[0] == "hang" and "straggler" in other.state.hypotheses
    assert other.adopt_probe("stacks") == []  # once
    inv.close()
    other.close()


def _user(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "hyps"
    d.mkdir(exist_ok=True)
    (d / "mine.toml").write_text(text)
    return d


GOOD = """\
[[hypothesis]]
id = "nccl-timeout"
title = "NCCL timeout"
claim = "a rank stalls in allreduce"

  [[hypothesis.probe]]
  id = "env-fingerprint"
  supports = "nccl_async_error == 1"
"""


def test_user_hypotheses_load_with_the_same_schema(tmp_path):
    cat = load_catalog([_user(tmp_path, GOOD)])
    hyp = cat.hypotheses["nccl-timeout"]
    assert hyp.source == "user"
    assert hyp.probes[0].supports.evaluate({"nccl_async_error": 1})


@pytest.mark.parametrize(
    ("rule", "what"),
    [
        ("__import__('os').system('id')", "a call"),
        ("errors.RuntimeError > 0", "attribute access"),
        ("max(1, 2) > 0", "a call"),
    ],
)
def test_unsafe_rule_is_a_load_error_naming_file_and_line(tmp_path, rule, what):
    text = GOOD.replace('supports = "nccl_async_error == 1"', f'supports = "{rule}"')
    d = _user(tmp_path, text)
    with pytest.raises(CatalogError) as err:
        load_catalog([d])
    assert err.value.path == str(d / "mine.toml")
    assert err.value.line == 8  # the line of the supports = ... key
    assert what in str(err.value)
    assert str(err.value).startswith(f"{d / 'mine.toml'}:8:")


def test_toml_syntax_error_names_line_and_column(tmp_path):
    d = _user(tmp_path, GOOD.replace('title = "NCCL timeout"', 'title = "NCCL timeout'))
    with pytest.raises(CatalogError) as err:
        load_catalog([d])
    assert err.value.line == 3
    assert err.value.col > 1


def test_unknown_key_and_unknown_link_are_errors(tmp_path):
    d = _user(tmp_path, GOOD.replace("claim =", "claym ="))
    with pytest.raises(CatalogError, match="unknown key 'claym'"):
        load_catalog([d])
    d = _user(tmp_path, GOOD + '\n[[hypothesis.link]]\nkind = "exposes"\nto = "no-such"\n')
    with pytest.raises(CatalogError, match="unknown hypothesis 'no-such'"):
        load_catalog([d])


def test_duplicate_id_names_the_first_definition(tmp_path):
    d = _user(tmp_path, GOOD.replace("nccl-timeout", "compile-race"))
    with pytest.raises(CatalogError, match="already defined in .*10_compile_race.toml"):
        load_catalog([d])

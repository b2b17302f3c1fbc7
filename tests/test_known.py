"""Known upstream issues as data (hypotheses/known.py): the shipped entries and a user's, which
apply to a measured version, which signature a text shows, and malformed entries refused with
path:line:col."""

from __future__ import annotations

from pathlib import Path

import pytest
from sleuth.hypotheses import CatalogError, load_catalog
from sleuth.hypotheses.known import applying, load_known

SEED_ERROR = ("RuntimeError: Detected that you are using FX to symbolically trace a dynamo-optimized function. "
              "This is not supported at the moment.")


def test_the_shipped_thread_safety_entry_applies_to_the_builds_that_still_have_the_race():
    known = load_known()
    entry = known["pytorch#126024"]
    assert entry.package == "torch" and entry.fixed_in is None  # open: no release names a fix
    assert entry.source == "https://github.com/pytorch/pytorch/issues/126024" and entry.checked.year >= 2026
    for version in ("2.13.0+cpu", "2.11.0+cu128", "2.11.0+cu130", "2.4.0.dev20240417+cpu"):
        assert entry.applies_to(version), version
    assert not entry.applies_to("1.13.1") and not entry.applies_to(None) and not entry.applies_to("not a version")
    assert entry.seen_in(SEED_ERROR) and not entry.seen_in("CUDA out of memory")
    assert [e.id for e in applying(known, {"Torch": "2.11.0+cu128", "triton": "3.5.0"})] == ["pytorch#126024"]
    assert applying(known, {"triton": "3.5.0"}) == []


def test_what_an_entry_names_exists():
    from sleuth.probes.remedies import REMEDIES

    hypotheses = load_catalog().hypotheses
    for entry in load_known().values():
        assert set(entry.explains) <= set(hypotheses), entry.id
        assert set(entry.workarounds) <= set(REMEDIES), entry.id


def _user(tmp_path: Path, body: str) -> Path:
    d = tmp_path / "known"
    d.mkdir(exist_ok=True)
    (d / "mine.toml").write_text(body)
    return d


def test_a_users_entry_applies_inside_its_range_only(tmp_path: Path):
    d = _user(tmp_path, '[[issue]]\nid = "acme/demo#7"\ntitle = "demo pkg 1.x leaks"\npackage = "sleuth-demo-pkg"\n'
                        'affected = ">=1.0,<2.0"\nfixed_in = "2.0"\nsource = "https://example.invalid/7"\n'
                        'checked = 2026-12-01\n')
    known = load_known([d])
    assert [e.id for e in applying(known, {"sleuth_demo_pkg": "1.0"})] == ["acme/demo#7"]  # names compare as pip does
    assert applying(known, {"sleuth-demo-pkg": "2.0"}) == []
    assert str(known["acme/demo#7"].fixed_in) == "2.0" and "pytorch#126024" in known


@pytest.mark.parametrize(
    ("body", "line", "words"),
    [
        ('[[issue]]\nid = "x#1"\ntitle = "t"\npackage = "p"\naffected = ">>2"\nsource = "s"\nchecked = "2026-01-01"\n',
         5, "not a PEP 440 specifier"),
        ('# a comment\n\n[[issue]]\nid = "x#1"\ntitle = "t"\npackage = "p"\naffected = ">=1"\nsource = "s"\n', 3,
         "needs checked"),
        ('[[issue]]\nid = "x#1"\ntitle = "t"\npackage = "p"\naffected = ">=1"\nsource = "s"\nchecked = "2026-01-01"\n'
         'fixd_in = "2"\n', 8, "unknown key 'fixd_in'"),
        ('[[issue]]\nid = "no number"\ntitle = "t"\npackage = "p"\naffected = ">=1"\nsource = "s"\nchecked = "2026-01-01"\n',
         2, "expected PROJECT#NUMBER"),
        ('[[issue]]\nid = "x#1"\ntitle = "t"\npackage = "p"\naffected = ">=1"\nsource = "s"\nchecked = "2026-01-01"\n'
         'signature = ["(unclosed"]\n', 8, "not a regular expression"),
    ],
)
def test_a_malformed_entry_is_refused_with_its_file_and_line(tmp_path: Path, body: str, line: int, words: str):
    d = _user(tmp_path, body)
    with pytest.raises(CatalogError) as err:
        load_known([d])
    assert str(err.value).startswith(f"{d / 'mine.toml'}:{line}:"), str(err.value)
    assert words in str(err.value)


def test_sleuth_known_lists_what_applies_to_the_targets_measured_versions(tmp_path: Path):
    """`sleuth known --target local --json`: the thread-safety entry with the torch measured now;
    a user's entry for an installed package listed when its range holds the version, not
    otherwise; a malformed one is exit 2 with file:line."""
    import json
    from importlib.metadata import version

    import torch
    from test_cli import sleuth

    d = tmp_path / "proj"
    d.mkdir()
    sleuth(d, "init")
    pytest_version = version("pytest")
    (d / ".sleuth" / "known").mkdir()
    (d / ".sleuth" / "known" / "mine.toml").write_text(
        f'[[issue]]\nid = "acme/tools#1"\ntitle = "in range"\npackage = "pytest"\naffected = "=={pytest_version}"\n'
        'source = "https://example.invalid/1"\nchecked = 2026-12-01\n\n'
        '[[issue]]\nid = "acme/tools#2"\ntitle = "out of range"\npackage = "pytest"\naffected = "<1.0"\n'
        'source = "https://example.invalid/2"\nchecked = 2026-12-01\n')
    rows = {r["id"]: r for r in json.loads(sleuth(d, "known", "--target", "local", "--json").stdout)}
    assert rows["pytorch#126024"]["measured"] == torch.__version__ and rows["pytorch#126024"]["fixed_in"] is None
    assert rows["pytorch#126024"]["source"].endswith("/issues/126024")
    assert rows["acme/tools#1"]["measured"] == pytest_version and "acme/tools#2" not in rows
    text = sleuth(d, "known").stdout
    assert f"local: torch {torch.__version__} is in >=2.0; no fixed-in release known" in text
    assert {r["id"] for r in json.loads(sleuth(d, "known", "--all", "--json").stdout)} >= {"acme/tools#2", "pytorch#126024"}
    (d / ".sleuth" / "known" / "bad.toml").write_text('[[issue]]\nid = "x#1"\naffected = "=>1"\n')
    bad = sleuth(d, "known", check=2)
    assert bad.stderr.startswith(f"sleuth: error: {d / '.sleuth' / 'known' / 'bad.toml'}:1:") and "needs title" in bad.stderr

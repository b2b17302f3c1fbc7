"""Known upstream issues as data (hypotheses/known.py): the shipped entries and a user's, which
apply to a measured version, which signature a text shows, and malformed entries refused with
path:line:col."""

from __future__ import annotations

from pathlib import Path

import pytest
from sleuth.hypotheses import CatalogError, load_catalog
from sleuth.hypotheses.known import applying, load_known
from support.known import SEED_ERROR, entry_toml


def test_the_shipped_thread_safety_entry_applies_to_the_builds_that_still_have_the_race():
    known = load_known()
    entry = known["pytorch#126024"]
    assert entry.package == "torch" and str(entry.fixed_in) == "2.14.0"  # read in the 2.14.0 wheel (issue 33)
    assert entry.source == "https://github.com/pytorch/pytorch/issues/126024" and entry.checked.year >= 2026
    for version in ("2.13.0+cpu", "2.11.0+cu128", "2.11.0+cu130", "2.4.0.dev20240417+cpu"):
        assert entry.applies_to(version), version
    for version in ("2.14.0", "2.14.1+cu130", "1.13.1", None, "not a version"):
        assert not entry.applies_to(version), version
    assert entry.seen_in(SEED_ERROR) and not entry.seen_in("CUDA out of memory")
    assert all(r["claim"] and r["source"] and r["on"] for r in entry.read) and len(entry.read) >= 3
    assert any("CURRENT_PATCHER" in r["claim"] and "still open" in r["claim"] for r in entry.read), entry.read
    face = known["pytorch#184917"]  # 2.14's face, seen on 2.14.1 (the drafter's --race compile)
    tail = '  File ".../torch/fx/traceback.py", line 363, in annotate\n    del current_meta["custom"]\nKeyError: \'custom\''
    assert face.applies_to("2.14.1+cu130") and face.applies_to("2.13.0+cpu") and face.fixed_in is None
    assert face.seen_in(tail) and not face.seen_in("KeyError: 'custom_op'") and not face.seen_in(SEED_ERROR)
    assert {e.id for e in applying(known, {"Torch": "2.11.0+cu128", "triton": "3.5.0"})} == {
        "pytorch#126024", "pytorch#136261", "pytorch#101027"}  # in range; each still needs its signature or rule
    assert {e.id for e in applying(known, {"torch": "2.14.1+cu130"})} == {
        "pytorch#184917", "pytorch#136833", "pytorch#136261", "pytorch#101027"}
    assert applying(known, {"triton": "3.5.0"}) == []
    # the is_compiling face (issue 42): the kernels wrapper's errors, on both torches read
    flag = known["pytorch#136833"]
    assert flag.applies_to("2.13.0+cpu") and flag.applies_to("2.14.1+cu130") and flag.fixed_in is None
    for died in ("TypeError: expected an instance of Token, got {1: (Func(), <function f>)}",
                 "TypeError: '_contextvars.Token' object is not iterable",
                 "AttributeError: '_contextvars.Token' object has no attribute 'get'"):
        assert flag.seen_in(died), died
    assert not flag.seen_in(SEED_ERROR) and not flag.seen_in("ValueError: <Token var=<ContextVar name='x'>>")
    assert {"compile-race", "concurrent-compile"} <= set(flag.explains) and "pytorch/pytorch/issues/136833" in flag.source


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
        # issue 33: a bare string was read a character at a time (one-letter regexes match anything)
        ('[[issue]]\nid = "x#1"\ntitle = "t"\npackage = "p"\naffected = ">=1"\nsource = "s"\nchecked = "2026-01-01"\n'
         'signature = "KeyError: .custom."\n', 8, "signature must be a list of regular expressions"),
    ],
)
def test_a_malformed_entry_is_refused_with_its_file_and_line(tmp_path: Path, body: str, line: int, words: str):
    d = _user(tmp_path, body)
    with pytest.raises(CatalogError) as err:
        load_known([d])
    assert str(err.value).startswith(f"{d / 'mine.toml'}:{line}:"), str(err.value)
    assert words in str(err.value)


# ------------------------------------------------------------------ matching runs (evidence)


def _finish(inv, state, seen=None, probe="script:mine.py", target="local") -> int:
    start = inv.begin_run(probe, {}, target)
    inv.finish_run(start.run, "completed", "done", [{"kind": "done"}], state, {"stdout": 1, "stderr": 0}, seen=seen)
    return start.run


def _state(**dists: str) -> dict:
    return {"env": {"python": "3.11.7", "distributions": dict(dists)}, "code": "c0", "caches": {}}


def test_a_match_is_evidence_of_its_own_kind_in_its_state_and_stops_applying_when_the_versions_leave(tmp_path: Path):
    """A run whose measured version is in range and whose output shows the signature records a
    match for the hypotheses the entry explains; it never changes a status (no experiment
    ran); an entry with a signature the output did not show is no match; when the versions
    leave the range (an upgrade) the entry stops applying, said once, and a replay says the
    same."""
    from sleuth.hypotheses.known import SignatureWatch
    from sleuth.sessions import Investigation

    d = _user(tmp_path, entry_toml("acme/demo#7", "demo-pkg", ">=1.0,<2.0", signature=r"LeakError: \d+ handles",
                                    fixed_in="2.0")
              + entry_toml("acme/demo#8", "demo-pkg", ">=1.0", explains="version-drift"))
    known = load_known([d])
    inv = Investigation.create(tmp_path / "s.sleuth", "t", load_catalog())
    inv.known = known
    watch = SignatureWatch(known)
    for chunk in (b"step 1 ok\nLeakErr", b"or: 3 handles open at exit\nstep 2\n"):  # the line split across chunks
        watch.feed("stderr", chunk)
    assert watch.seen == {"acme/demo#7": "LeakError: 3 handles open at exit"}

    quiet = _finish(inv, _state(**{"demo_pkg": "1.4"}))  # no signature in its output: only the signature-less entry
    assert [m.id for m in inv.state.known_for_run(quiet)["matches"]] == ["acme/demo#8"]
    first = _finish(inv, _state(**{"demo_pkg": "1.4"}), seen=watch.seen)
    matched = {m.id: m for m in inv.state.known_for_run(first)["matches"]}
    assert set(matched) == {"acme/demo#7", "acme/demo#8"}
    leak = matched["acme/demo#7"]
    assert leak.measured == "1.4" and leak.seen is not None and leak.seen.startswith("LeakError: 3")
    assert leak.state_key == inv.state.runs[first].state_key
    assert inv.state.status("compile-race") == "open"  # a match is not an experiment
    summary = inv.state.hypothesis_summary("compile-race")
    assert [k["id"] for k in summary["known"]] == ["acme/demo#7"] and summary["known"][0]["applies_now"]
    assert inv.state.evidence_counts("compile-race") == {"supports": 0, "refutes": 0, "inconclusive": 0}

    upgraded = _finish(inv, _state(**{"demo-pkg": "2.0"}), seen=watch.seen)  # the same text, a fixed version
    said = inv.state.known_for_run(upgraded)
    assert [m.id for m in said["matches"]] == ["acme/demo#8"]
    assert [(m.id, m.why) for m in said["left"]] == [("acme/demo#7", "demo-pkg 2.0 is outside <2.0,>=1.0")]
    assert [k.applies_now for k in inv.state.known_for("compile-race")] == [False]
    again = _finish(inv, _state(**{"demo-pkg": "2.0"}))
    assert inv.state.known_for_run(again)["left"] == []  # said once, at the run where it left
    unknown = _finish(inv, None)  # nothing measured: no match, no leaving, never a guess
    assert inv.state.known_for_run(unknown) == {"matches": [], "left": []}
    inv.close()
    replayed = Investigation.replay(tmp_path / "s.sleuth")
    assert replayed.state.known_for("compile-race") == inv.state.known_for("compile-race")
    replayed.close()


def test_a_secret_in_the_line_that_showed_a_signature_never_reaches_the_store(tmp_path: Path):
    import sqlite3

    from sleuth.sessions import Investigation, Redactor

    secret = "hf_Zq8mWk3vTn5rLp2sXc7yBd4fGh6jKm9a"
    d = _user(tmp_path, entry_toml("acme/demo#7", "demo-pkg", ">=1.0", signature=r"LeakError: \d+ handles"))
    inv = Investigation.create(tmp_path / "s.sleuth", "t", load_catalog(), Redactor({"HF_TOKEN": secret}))
    inv.known = load_known([d])
    run = _finish(inv, _state(**{"demo-pkg": "1.0"}), seen={"acme/demo#7": f"LeakError: 3 handles (token {secret})"})
    [m] = inv.state.known_for_run(run)["matches"]
    assert m.seen is not None and secret not in m.seen and m.seen.startswith("LeakError: 3 handles (token ")
    inv.close()
    rows = sqlite3.connect(tmp_path / "s.sleuth").execute("SELECT data FROM events").fetchall()
    assert not any(secret in r[0] for r in rows), rows


def test_an_entry_with_a_rule_matches_the_runs_of_its_probe_where_the_rule_holds(tmp_path: Path):
    """The shipped cache entry is said of a compile-cache run whose miss inductor's key explains
    by torch (issue 34: measured, "torch" in changed), not of one where another part changed,
    nor of a cache-inventory run on file times, nor of another probe's run; a rule without its
    probe, or one the rule language refuses, is a file:line error."""
    from sleuth.sessions import Investigation

    known = load_known()
    entry = known["pytorch#101027"]
    assert entry.rule is not None and entry.probe == "compile-cache" and entry.fixed_in is None
    inv = Investigation.create(tmp_path / "s.sleuth", "t", load_catalog())
    inv.known = known

    def run(probe: str, result: dict) -> list[str]:
        start = inv.begin_run(probe, {}, "local")
        inv.finish_run(start.run, "completed", "done", [{"kind": "result", **result}, {"kind": "done"}],
                       _state(torch="2.11.0+cu128"), {"stdout": 1, "stderr": 0})
        return [m.id for m in inv.state.known_for_run(start.run)["matches"]]

    assert run("compile-cache", {"misses": 1, "changed": ["torch", "triton"]}) == ["pytorch#101027"]
    assert run("compile-cache", {"misses": 1, "changed": ["inductor config"]}) == []
    assert run("compile-cache", {"misses": 1, "changed": []}) == []  # cold, or the entry wiped: not torch's doing
    assert run("cache-inventory", {"cold": False, "keys_match": False}) == []  # file times say it no more
    assert run("env-fingerprint", {"changed": ["torch"]}) == []
    [k] = inv.state.known_for("cache-invalidation")
    assert k.match.seen == 'compile-cache: "torch" in changed' and k.match.measured == "2.11.0+cu128"
    assert inv.state.status("cache-invalidation") != "confirmed"
    inv.close()
    for body, words in (
        ('[[issue]]\nid = "x#1"\ntitle = "t"\npackage = "p"\naffected = ">=1"\nsource = "s"\nchecked = "2026-01-01"\n'
         'rule = "not cold"\n', "names the probe"),
        ('[[issue]]\nid = "x#1"\ntitle = "t"\npackage = "p"\naffected = ">=1"\nsource = "s"\nchecked = "2026-01-01"\n'
         'rule = "__import__(1)"\nprobe = "cache-inventory"\n', "rule '__import__(1)'"),
    ):
        (tmp_path / words.split()[0]).mkdir()
        d = _user(tmp_path / words.split()[0], body)
        with pytest.raises(CatalogError) as err:
            load_known([d])
        assert str(err.value).startswith(f"{d / 'mine.toml'}:8:") and words in str(err.value), str(err.value)



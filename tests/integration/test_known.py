"""Known upstream issues as data (hypotheses/known.py): the shipped entries and a user's, which
apply to a measured version, which signature a text shows, and malformed entries refused with
path:line:col."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version
from sleuth.hypotheses import CatalogError, load_catalog
from sleuth.hypotheses.known import applying, load_known

SEED_ERROR = ("RuntimeError: Detected that you are using FX to symbolically trace a dynamo-optimized function. "
              "This is not supported at the moment.")


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


def test_the_dense_fallback_entry_matches_the_warning_this_torch_prints_when_flex_attention_runs_uncompiled():
    """The signature is what torch itself says (2.13 here): flex_attention called eagerly
    warns, and the shipped entry sees that text; a compiled call's output would not."""
    import warnings

    import torch
    from torch.nn.attention.flex_attention import flex_attention

    entry = load_known()["pytorch#136261"]
    assert entry.fixed_in is None and entry.explains == ("dense-fallback",) and entry.applies_to(torch.__version__)
    import torch.nn.attention.flex_attention as module

    getattr(module, "_WARNINGS_SHOWN", set()).discard("flex_attention_performance")  # torch says it once per process
    q = torch.randn(1, 1, 16, 8)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        flex_attention(q, q, q)
    text = "\n".join(str(w.message) for w in seen)
    assert entry.seen_in(text), text
    assert not entry.seen_in(SEED_ERROR)


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


def test_sleuth_known_lists_what_applies_to_the_targets_measured_versions(tmp_path: Path):
    """`sleuth known --target local --json`: the thread-safety entry with the torch measured now;
    a user's entry for an installed package listed when its range holds the version, not
    otherwise; a malformed one is exit 2 with file:line."""
    import json
    from importlib.metadata import version

    from support.cli import sleuth

    torch_version = version("torch")  # what pip installed: 2.14.1 for the wheel whose torch.__version__ is 2.14.1+cu130

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
    text = sleuth(d, "known").stdout
    # every torch from 2.13 has fx traceback's global metadata (2.14's face of the race)
    assert rows["pytorch#184917"]["measured"] == torch_version and rows["pytorch#184917"]["fixed_in"] is None
    assert f"local: torch {torch_version} is in >=2.13; no fixed-in release known" in text
    if Version(torch_version) < Version("2.14"):  # the seed's face: fixed in 2.14.0, read in its wheel
        assert rows["pytorch#126024"]["measured"] == torch_version and rows["pytorch#126024"]["fixed_in"] == "2.14.0"
        assert rows["pytorch#126024"]["source"].endswith("/issues/126024")
        assert f"local: torch {torch_version} is in <2.14,>=2.0; fixed in 2.14.0" in text
        assert "· fixed in 2.14.0: the flag is thread-local" in text and "torch-2.14.0 (git 08187d9e)" in text
    else:  # on 2.14: the seed's entry no longer applies
        assert "pytorch#126024" not in rows
    assert rows["acme/tools#1"]["measured"] == pytest_version and "acme/tools#2" not in rows
    assert {r["id"] for r in json.loads(sleuth(d, "known", "--all", "--json").stdout)} >= {"acme/tools#2", "pytorch#126024"}
    (d / ".sleuth" / "known" / "bad.toml").write_text('[[issue]]\nid = "x#1"\naffected = "=>1"\n')
    bad = sleuth(d, "known", check=2)
    assert bad.stderr.startswith(f"sleuth: error: {d / '.sleuth' / 'known' / 'bad.toml'}:1:") and "needs title" in bad.stderr


# ------------------------------------------------------------------ matching runs (evidence)

def _entry_toml(ident: str, package: str, affected: str, *, signature: str | None = None, fixed_in: str | None = None,
                explains: str = "compile-race") -> str:
    return (f'[[issue]]\nid = "{ident}"\ntitle = "{ident} title"\npackage = "{package}"\naffected = "{affected}"\n'
            + (f'fixed_in = "{fixed_in}"\n' if fixed_in else "")
            + (f"signature = ['{signature}']\n" if signature else "")
            + f'explains = ["{explains}"]\nworkarounds = ["lock"]\nsource = "https://example.invalid/{ident}"\n'
              'checked = 2026-12-01\n\n')


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

    d = _user(tmp_path, _entry_toml("acme/demo#7", "demo-pkg", ">=1.0,<2.0", signature=r"LeakError: \d+ handles",
                                    fixed_in="2.0")
              + _entry_toml("acme/demo#8", "demo-pkg", ">=1.0", explains="version-drift"))
    known = load_known([d])
    inv = Investigation.create(tmp_path / "s.sleuth", "t", load_catalog())
    inv.known = known
    watch = SignatureWatch(known)
    for chunk in (b"step 1 ok\nLeakErr", b"or: 3 handles open at exit\nstep 2\n"):  # the line split across chunks
        watch.feed("stderr", chunk)
    assert watch.seen == {"acme/demo#7": "LeakError: 3 handles open at exit"}

    quiet = _finish(inv, _state(**{"demo_pkg": "1.4"}))  # no signature in its output: only the signature-less entry
    assert [m["id"] for m in inv.state.known_for_run(quiet)["matches"]] == ["acme/demo#8"]
    first = _finish(inv, _state(**{"demo_pkg": "1.4"}), seen=watch.seen)
    matched = {m["id"]: m for m in inv.state.known_for_run(first)["matches"]}
    assert set(matched) == {"acme/demo#7", "acme/demo#8"}
    assert matched["acme/demo#7"]["measured"] == "1.4" and matched["acme/demo#7"]["seen"].startswith("LeakError: 3")
    assert matched["acme/demo#7"]["state_key"] == inv.state.runs[first].state_key
    assert inv.state.status("compile-race") == "open"  # a match is not an experiment
    summary = inv.state.hypothesis_summary("compile-race")
    assert [k["id"] for k in summary["known"]] == ["acme/demo#7"] and summary["known"][0]["applies_now"]
    assert inv.state.evidence_counts("compile-race") == {"supports": 0, "refutes": 0, "inconclusive": 0}

    upgraded = _finish(inv, _state(**{"demo-pkg": "2.0"}), seen=watch.seen)  # the same text, a fixed version
    said = inv.state.known_for_run(upgraded)
    assert [m["id"] for m in said["matches"]] == ["acme/demo#8"]
    assert [(m["id"], m["why"]) for m in said["left"]] == [("acme/demo#7", "demo-pkg 2.0 is outside <2.0,>=1.0")]
    assert [k["applies_now"] for k in inv.state.known_for("compile-race")] == [False]
    again = _finish(inv, _state(**{"demo-pkg": "2.0"}))
    assert inv.state.known_for_run(again)["left"] == []  # said once, at the run where it left
    unknown = _finish(inv, None)  # nothing measured: no match, no leaving, never a guess
    assert inv.state.known_for_run(unknown) == {"matches": [], "left": []}
    inv.close()
    replayed = Investigation.replay(tmp_path / "s.sleuth")
    assert replayed.state.known_for("compile-race") == inv.state.known_for("compile-race")
    replayed.close()


def _pytest_entry_project(tmp_path: Path) -> tuple[Path, str]:
    """A project whose user entry covers the pytest installed here (its signature a LeakError line)."""
    from importlib.metadata import version

    from support.project import new_project

    d = new_project(tmp_path / "proj")
    v = version("pytest")
    (d / ".sleuth" / "known").mkdir()
    (d / ".sleuth" / "known" / "mine.toml").write_text(
        _entry_toml("acme/tools#1", "pytest", f"=={v}", signature=r"LeakError: \d+ handles"))
    return d, v


def test_probe_run_says_the_match_in_text_and_json_and_the_postmortem_lists_it_with_its_source(tmp_path: Path):
    """Through the CLI on the local target: a script whose output shows a user entry's
    signature, for a package installed there (pytest): `probe run` says the match (text and
    --json), `hypotheses --json` carries it, the status stays open, and the postmortem has a
    "Known upstream issues" section with the source."""
    import json

    from support.cli import sleuth

    d, v = _pytest_entry_project(tmp_path)
    script = tmp_path / "leaky.py"
    script.write_text("import sys\nprint('LeakError: 3 handles open at exit', file=sys.stderr)\nemit('result', ok=1)\n")
    text = sleuth(d, "probe", "run", "--script", str(script), "--target", "local").stdout
    assert (f"ⓚ known upstream issue acme/tools#1 (pytest {v} is in =={v}; no fixed-in release known as of "
            "2026-12-01): acme/tools#1 title; its signature is in the output; explains compile-race") in text
    assert "https://example.invalid/acme/tools#1" in text
    quiet = tmp_path / "quiet.py"
    quiet.write_text("emit('result', ok=1)\n")
    data = json.loads(sleuth(d, "probe", "run", "--script", str(quiet), "--target", "local", "--json").stdout)
    assert data["known"] == []  # its signature not in this run's output: no match
    data = json.loads(sleuth(d, "probe", "run", "--script", str(script), "--target", "local", "--json",
                             "--force").stdout)
    [m] = data["known"]
    assert (m["status"], m["id"], m["measured"], m["fixed_in"], m["seen"]) == (
        "matched", "acme/tools#1", v, None, "LeakError: 3 handles open at exit")
    assert [f["kind"] for f in data["findings"]].count("known") == 1
    hyps = {h["id"]: h for h in json.loads(sleuth(d, "hypotheses", "--json").stdout)}
    assert hyps["compile-race"]["status"] == "open" and [k["id"] for k in hyps["compile-race"]["known"]] == ["acme/tools#1"]
    out = tmp_path / "pm.md"
    sleuth(d, "export", "--format", "markdown", "-o", str(out))
    md = out.read_text()
    section = md[md.index("## Known upstream issues"):]
    section = section[:section.index("\n## ", 3)]
    assert f"| [acme/tools#1](https://example.invalid/acme/tools#1) | local | pytest {v} | =={v} | none known" in section
    assert "| #1, #3 | yes | compile-race |" in section


def test_a_secret_in_the_line_that_showed_a_signature_never_reaches_the_store(tmp_path: Path):
    import sqlite3

    from sleuth.sessions import Investigation, Redactor

    secret = "hf_Zq8mWk3vTn5rLp2sXc7yBd4fGh6jKm9a"
    d = _user(tmp_path, _entry_toml("acme/demo#7", "demo-pkg", ">=1.0", signature=r"LeakError: \d+ handles"))
    inv = Investigation.create(tmp_path / "s.sleuth", "t", load_catalog(), Redactor({"HF_TOKEN": secret}))
    inv.known = load_known([d])
    run = _finish(inv, _state(**{"demo-pkg": "1.0"}), seen={"acme/demo#7": f"LeakError: 3 handles (token {secret})"})
    [m] = inv.state.known_for_run(run)["matches"]
    assert secret not in m["seen"] and m["seen"].startswith("LeakError: 3 handles (token ")
    inv.close()
    rows = sqlite3.connect(tmp_path / "s.sleuth").execute("SELECT data FROM events").fetchall()
    assert not any(secret in r[0] for r in rows), rows


def test_a_shell_command_that_prints_the_signature_matches_against_the_versions_read_before_it(tmp_path: Path):
    """`probe run --shell 'python train.py'` reports no state of its own; the state read just
    before it gives the versions, and the match says so."""
    import json

    from support.cli import sleuth

    d, v = _pytest_entry_project(tmp_path)
    data = json.loads(sleuth(d, "probe", "run", "--shell", "echo 'LeakError: 3 handles' >&2", "--json").stdout)
    [m] = data["known"]
    assert (m["id"], m["measured"], m["seen"]) == ("acme/tools#1", v, "LeakError: 3 handles")
    assert any("(versions: the state read just before the run)" in f["text"] for f in data["findings"]), data["findings"]
    quiet = json.loads(sleuth(d, "probe", "run", "--shell", "echo fine", "--json").stdout)
    assert quiet["known"] == []


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
        return [m["id"] for m in inv.state.known_for_run(start.run)["matches"]]

    assert run("compile-cache", {"misses": 1, "changed": ["torch", "triton"]}) == ["pytorch#101027"]
    assert run("compile-cache", {"misses": 1, "changed": ["inductor config"]}) == []
    assert run("compile-cache", {"misses": 1, "changed": []}) == []  # cold, or the entry wiped: not torch's doing
    assert run("cache-inventory", {"cold": False, "keys_match": False}) == []  # file times say it no more
    assert run("env-fingerprint", {"changed": ["torch"]}) == []
    [m] = [m for m in inv.state.known_for("cache-invalidation")]
    assert m["seen"] == 'compile-cache: "torch" in changed' and m["measured"] == "2.11.0+cu128"
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


def test_which_torch_wrote_the_caches_is_judged_per_folder_against_the_install_record(tmp_path: Path):
    """Through the CLI on the local target, with a torch folder installed in place as installers
    do (its files, and a dist-info RECORD written anew) and real cache files: each folder is
    judged file by file against the install time RECORD's change time says, and the build that
    wrote older files is the one a state read of sleuth's saw installed. The same build
    reinstalled keeps its keys; another build's files are counted even beside fresh ones (never
    hidden by the newest); a uv-style install whose version.py is a hard link of an old file is
    not read as old; a build sleuth never saw is not guessed; and the default per-user folder is
    shared by the user's environments, so its older files are not said to be this one's."""
    import json
    import os
    import sys
    import time

    from support.cli import sleuth

    site, cache, tmp = tmp_path / "site", tmp_path / "inductor", tmp_path / "tmp"
    (site / "torch").mkdir(parents=True)
    cache.mkdir()
    tmp.mkdir()

    def install(where: Path, version: str, git: str, linked_from: Path | None = None) -> None:
        """As pip/uv do: the package's files (version.py, or a hard link of the installer's
        cached copy), then a new dist-info with its RECORD."""
        (where / "torch").mkdir(exist_ok=True)
        (where / "torch" / "__init__.py").write_text("raise ImportError('a stand-in: only its files are read')\n")
        text = f"__version__ = '{version}'\ngit_version = '{git}'\ncuda = '{version[-3:]}'\n"
        version_py = where / "torch" / "version.py"
        version_py.unlink(missing_ok=True)
        if linked_from is not None:
            linked_from.write_text(text)
            os.utime(linked_from, (time.time() - 365 * 86400,) * 2)  # the wheel's own date, a year ago
            os.link(linked_from, version_py)
        else:
            version_py.write_text(text)
        for old in where.glob("torch-*.dist-info"):
            for f in old.iterdir():
                f.unlink()
            old.rmdir()
        info = where / f"torch-{version}.dist-info"
        info.mkdir()
        (info / "RECORD").write_text("torch/version.py,,\n")
        time.sleep(0.05)

    def target(name: str, ledger: Path, where: Path = site, inductor: Path | None = cache) -> str:
        env = f'PYTHONPATH = "{where}", XDG_CACHE_HOME = "{ledger}", TMPDIR = "{tmp}", TRITON_CACHE_DIR = "{tmp_path / "triton"}"'
        env += f', TORCHINDUCTOR_CACHE_DIR = "{inductor or ""}"'  # empty: inductor's default folder
        return f'[targets.{name}]\npython = "{sys.executable}"\nenv = {{ {env} }}\n'

    d = tmp_path / "proj"
    d.mkdir()
    sleuth(d, "init")
    far, other = tmp_path / "far-cache", tmp_path / "other-cache"
    (d / "sleuth.toml").write_text((d / "sleuth.toml").read_text() + "\n" + target("box", far) + target("unseen", other)
                                   + target("uv", other, tmp_path / "uvsite") + target("venv2", far, tmp_path / "site2")
                                   + target("shared", far, inductor=None))

    def inventory(on: str) -> tuple[dict, list[str], dict[str, str]]:
        data = json.loads(sleuth(d, "probe", "run", "cache-inventory", "--target", on, "--json", "--force",
                                 "--no-agent").stdout)
        res = next(r for r in data["records"] if r["kind"] == "result")
        return res, [k["id"] for k in data["known"]], {e["hypothesis"]: e["verdict"] for e in data["evidence"]}

    def entry(name: str, folder: Path = cache) -> None:
        (folder / "fx").mkdir(parents=True, exist_ok=True)
        (folder / "fx" / name).write_bytes(b"compiled")
        time.sleep(0.05)

    install(site, "2.11.0+cu128", "aaaa1111")
    entry("a.so")  # compiled under that install
    res, known, _ = inventory("box")
    ind = res["caches"]["inductor"]
    assert (res["keys_match"], res["written_by"], ind["stale"]) == (True, "2.11.0+cu128", 0) and known == [], res["keys_said"]
    assert ind["said"] == "all 1 files written since this torch (2.11.0+cu128 (git aaaa1111)) was installed"
    assert ind["scope"] == "set by TORCHINDUCTOR_CACHE_DIR"

    install(site, "2.11.0+cu128", "aaaa1111")  # the same build reinstalled: the keys hold
    res, known, verdict = inventory("box")
    assert (res["keys_match"], res["written_by"], res["stale"], known) == (True, "2.11.0+cu128", 1, [])
    assert "written under an earlier install of the same build" in res["caches"]["inductor"]["said"]
    assert verdict.get("cache-invalidation") == "inconclusive"  # file times refute nothing: compile-cache measures

    install(site, "2.11.0+cu130", "bbbb2222")  # another build: its older files never hit...
    entry("b.so")  # ...and one fresh file written since does not hide them
    res, known, verdict = inventory("box")
    ind = res["caches"]["inductor"]
    assert (res["keys_match"], res["written_by"], ind["stale"], ind["files"]) == (False, "2.11.0+cu128", 1, 2), ind
    assert ind["said"].startswith("1 of 2 files are older than this torch's install (") and ", 1 newer: written under " \
        "torch 2.11.0+cu128 (git aaaa1111), installed " in ind["said"], ind["said"]
    assert "torch is now 2.11.0+cu130 (git bbbb2222): those entries never hit" in ind["said"]
    # supports; pytorch#101027 is said only on compile-cache's measured key (issue 34), not on file times
    assert known == [] and verdict.get("cache-invalidation") == "supports"
    installs = json.loads((far / "sleuth" / "torch-installs.json").read_text())
    assert [e["version"] for e in installs] == ["2.11.0+cu128", "2.11.0+cu128", "2.11.0+cu130"]
    assert [e["installed"] for e in installs] == sorted(e["installed"] for e in installs)

    # a machine where sleuth never saw the install before: not known, and nothing read into it
    res, known, verdict = inventory("unseen")
    assert res["keys_match"] is None and res["written_by"] is None and known == []
    assert "sleuth saw no earlier install here" in res["keys_said"]
    assert verdict["cache-invalidation"] == "inconclusive"  # neither supports nor refutes

    # uv: version.py is a hard link of the installer's cached file, a year old; the install is now
    entry("c.so", tmp_path / "uvcache-entries")
    (tmp_path / "uvsite").mkdir()
    (d / "sleuth.toml").write_text((d / "sleuth.toml").read_text().replace(str(cache), str(tmp_path / "uvcache-entries")))
    install(tmp_path / "uvsite", "2.11.0+cu130", "bbbb2222", linked_from=tmp_path / "uv-archive-version.py")
    res, _known, _v = inventory("uv")
    ind = res["caches"]["inductor"]
    assert (ind["stale"], res["keys_match"]) == (1, None), ind  # older than the install, not than the wheel's file date
    assert ind["said"].startswith("1 of 1 files are older than this torch's install"), ind["said"]

    # the default folder (TMPDIR/torchinductor_USER) is every environment's of the user: sleuth saw another
    (tmp_path / "site2").mkdir()
    install(tmp_path / "site2", "2.13.0+cpu", "cccc3333")
    inventory("venv2")  # its state read: sleuth sees that environment's torch
    user_dir = tmp / f"torchinductor_{__import__('getpass').getuser()}"
    entry("old.so", user_dir)
    os.utime(user_dir / "fx" / "old.so", (time.time() - 86400,) * 2)
    res, _known, verdict = inventory("shared")
    ind = res["caches"]["inductor"]
    assert ind["path"] == str(user_dir) and ind["scope"].startswith("every environment of user "), ind
    assert res["keys_match"] is None and "sleuth saw torch in 1 other (" in ind["said"], ind["said"]
    assert str(tmp_path / "site2" / "torch") in ind["said"] and "the older files may be theirs" in ind["said"]
    assert verdict["cache-invalidation"] == "inconclusive"

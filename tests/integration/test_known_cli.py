"""Known upstream issues through the `sleuth` command and on this torch: `sleuth known` against
the targets' measured versions, a probe run and a shell command whose output shows a signature,
the postmortem's list, which torch wrote the caches, and the dense-fallback entry against the
warning this torch prints. The catalog of entries and its matching are tests/unit/test_known.py."""

from __future__ import annotations

from pathlib import Path

from packaging.version import Version
from sleuth.hypotheses.known import load_known
from support.known import SEED_ERROR, entry_toml


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


def _pytest_entry_project(tmp_path: Path) -> tuple[Path, str]:
    """A project whose user entry covers the pytest installed here (its signature a LeakError line)."""
    from importlib.metadata import version

    from support.project import new_project

    d = new_project(tmp_path / "proj")
    v = version("pytest")
    (d / ".sleuth" / "known").mkdir()
    (d / ".sleuth" / "known" / "mine.toml").write_text(
        entry_toml("acme/tools#1", "pytest", f"=={v}", signature=r"LeakError: \d+ handles"))
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

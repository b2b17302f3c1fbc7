"""Trying upstream's fix without touching the user's venv (`sleuth upgrade`, issue 27), through
the real sshd, jump host and pct stand-in, with a small package at two versions.

The far end's venv has sleuth-demo-pkg 1.0, whose "bug" is a line its check prints; a user's
known-issue entry says 1.x is affected and 2.0 fixes it. sleuth must: match the issue on the
run that shows it; make an overlay with 2.0 at the far end; re-run the check in it as a
verification (a different state: the versions say 2.0); call it fixed with the remedy rules;
never write the venv (pip freeze and every file's hash, during and after); remove the overlay
on revert; and answer an index it cannot reach as a transport fault, recording nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import sleuth
from support.project import new_project
from support.wheels import wheel

ENTRY = """\
[[issue]]
id = "acme/demo#7"
title = "sleuth-demo-pkg 1.x leaks handles at exit"
package = "sleuth-demo-pkg"
affected = "<2.0"
fixed_in = "2.0"
signature = ['LeakError: \\d+ handles']
explains = ["demo-leak"]
source = "https://example.invalid/acme/demo/7"
checked = 2026-12-04
"""

HYPOTHESIS = """\
[[hypothesis]]
id = "demo-leak"
title = "demo package leaks"
claim = "sleuth-demo-pkg 1.x leaks handles at exit"
"""

CHECK = """\
import sys
import sleuth_demo_pkg as pkg
if pkg.VERSION.startswith("1."):
    print("LeakError: 3 handles open at exit", file=sys.stderr)
emit("result", version=pkg.VERSION, file=pkg.__file__)
"""


@pytest.fixture(scope="module")
def far(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The far end's venv (with pip, as `python -m venv` makes it) holding sleuth-demo-pkg 1.0,
    and a folder of wheels pip can read there (the package at 1.0 and 2.0)."""
    root = tmp_path_factory.mktemp("far")
    wheels = root / "wheels"
    wheels.mkdir()
    one = wheel(wheels, "sleuth-demo-pkg", "1.0")
    wheel(wheels, "sleuth-demo-pkg", "2.0")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "-q", "install", "--no-index", str(one)], check=True)
    return {"venv": venv, "wheels": wheels, "cache": root / "cache"}


def venv_print(venv: Path) -> tuple[str, dict[str, str]]:
    """What a user compares: `pip freeze` in the venv and the sha256 of every file in it."""
    freeze = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "freeze", "--all"], capture_output=True,
                            text=True, check=True, env={"PYTHONDONTWRITEBYTECODE": "1"}).stdout
    files = {str(p.relative_to(venv)): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(venv.rglob("*")) if p.is_file() and not p.is_symlink()}
    return freeze, files


def project(tmp_path: Path, sshd, far: dict[str, Path]) -> Path:
    target = sshd.toml("ct200").replace(f'python = "{sshd.python}"', f'python = "{far["venv"] / "bin" / "python"}"')
    d = new_project(tmp_path / "proj", toml=target + f'env = {{ XDG_CACHE_HOME = "{far["cache"]}" }}\n')
    (d / ".sleuth" / "known").mkdir(exist_ok=True)
    (d / ".sleuth" / "known" / "demo.toml").write_text(ENTRY)
    (d / ".sleuth" / "hypotheses").mkdir(exist_ok=True)
    (d / ".sleuth" / "hypotheses" / "leak.toml").write_text(HYPOTHESIS)
    (d / "check.py").write_text(CHECK)
    return d


def overlays(far: dict[str, Path]) -> list[Path]:
    root = far["cache"] / "sleuth" / "overlays"
    return sorted(root.iterdir()) if root.is_dir() else []


@pytest.mark.slow
def test_the_fix_is_tried_in_an_overlay_verified_and_reverted_with_the_venv_byte_identical(tmp_path, sshd, far):
    d = project(tmp_path, sshd, far)
    shown = sleuth(d, "probe", "run", "--script", "check.py", "--target", "ct200").stdout
    assert "ⓚ known upstream issue acme/demo#7 (sleuth-demo-pkg 1.0 is in <2.0; fixed in 2.0)" in shown
    before = venv_print(far["venv"])

    out = json.loads(sleuth(d, "upgrade", "acme/demo#7", "--target", "ct200", "--script", "check.py",
                            "--find-links", str(far["wheels"]), "--no-index", "--json").stdout)
    install = out["install"]
    assert install["classification"] == "completed" and install["installed_before"] == "1.0"
    [made] = overlays(far)
    assert install["overlay"]["path"] == str(made) and install["overlay"]["version"] == "2.0"
    assert (made / "site" / "sleuth_demo_pkg" / "__init__.py").read_text() == "VERSION = '2.0'\n"
    check = out["verification"]
    assert check["classification"] == "completed" and check["state_key"] != json.loads(
        sleuth(d, "replay", "--json").stdout)["runs"][0]["state_key"]  # a different state: the versions say so
    assert [r for r in check["records"] if r["kind"] == "result"][0]["file"].startswith(str(made / "site"))
    [verified] = check["verified"]
    assert (verified["outcome"], verified["hypothesis"], verified["issue"], verified["before"], verified["after"],
            verified["strong"]) == ("fixed", "demo-leak", "acme/demo#7", [1, 1], [0, 1], True)
    assert [k["status"] for k in check["known"]] == ["no longer applies"]
    assert any("changed by upgrade #1 made its overlay (sleuth-demo-pkg==2.0): sleuth-demo-pkg 1.0 → 2.0" in f["text"]
               for f in check["findings"]), check["findings"]
    assert venv_print(far["venv"]) == before  # while the overlay is active, the venv is as it was

    hyps = {h["id"]: h for h in json.loads(sleuth(d, "hypotheses", "--json").stdout)}
    assert [(k["id"], k["applies_now"]) for k in hyps["demo-leak"]["known"]] == [("acme/demo#7", False)]
    md = tmp_path / "pm.md"
    sleuth(d, "export", "--format", "markdown", "-o", str(md))
    text = md.read_text()
    assert "### upgrade (#1, active)" in text and f"`sleuth-demo-pkg==2.0` in an overlay at {made} on ct200" in text
    assert "| no: sleuth-demo-pkg 2.0 is outside <2.0 (#3) |" in text

    again = sleuth(d, "upgrade", "acme/demo#7", "--target", "ct200", "--no-verify", "--find-links",
                   str(far["wheels"]), "--no-index", check=2)
    assert "already being tried on ct200 (application #1" in again.stderr
    said = sleuth(d, "upgrade", "--revert", "acme/demo#7", "--target", "ct200").stdout
    assert f"reverted upgrade #1: the overlay {made} on ct200 is removed" in said
    assert overlays(far) == [] and venv_print(far["venv"]) == before
    back = json.loads(sleuth(d, "probe", "run", "--script", "check.py", "--target", "ct200", "--json",
                             "--force").stdout)
    assert [k["id"] for k in back["known"] if k["status"] == "matched"] == ["acme/demo#7"]
    assert any("changed by upgrade #1 removed its overlay" in f["text"] for f in back["findings"]), back["findings"]


@pytest.mark.slow
def test_an_index_that_cannot_be_reached_is_a_transport_answer_and_records_nothing(tmp_path, sshd, far):
    d = project(tmp_path, sshd, far)
    sleuth(d, "probe", "run", "--script", "check.py", "--target", "ct200")
    before = venv_print(far["venv"])
    proc = sleuth(d, "upgrade", "acme/demo#7", "--target", "ct200", "--script", "check.py",
                  "--index-url", "http://127.0.0.1:9/simple", check=1)
    assert proc.stderr.startswith("sleuth: transport: pip could not reach http://127.0.0.1:9/simple from ct200: "), \
        proc.stderr
    assert "nothing was applied" in proc.stderr
    state = json.loads(sleuth(d, "replay", "--json").stdout)
    assert state["applications"] == [] and [r["classification"] for r in state["runs"]] == ["completed", "transport"]
    assert [h["evidence"] for h in state["hypotheses"] if h["id"] == "demo-leak"] == [
        {"supports": 0, "refutes": 0, "inconclusive": 0}]
    assert overlays(far) == [] and venv_print(far["venv"]) == before
    missing = sleuth(d, "upgrade", "acme/demo#7", "--target", "ct200", "--version", "3.0", "--no-verify",
                     "--find-links", str(far["wheels"]), "--no-index", check=1)
    assert "sleuth: failed: sleuth-demo-pkg==3.0 is not on the index pip read" in missing.stderr
    assert overlays(far) == []


VERSIONS_ONLY = """\
[[issue]]
id = "acme/demo#8"
title = "sleuth-demo-pkg 1.x is slow at import"
package = "sleuth-demo-pkg"
affected = "<2.0"
fixed_in = "2.0"
explains = ["demo-leak"]
source = "https://example.invalid/acme/demo/8"
checked = 2026-12-06
"""


@pytest.fixture(scope="module")
def far_with_deps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """As *far*, but the fixed release is a local build (2.0+cu130, as PyTorch's own index labels
    its wheels) that needs a newer sleuth-demo-dep than the venv has: what pip puts in the overlay
    is more than the package asked for, and it shadows the venv's own dep."""
    root = tmp_path_factory.mktemp("far-deps")
    wheels = root / "wheels"
    wheels.mkdir()
    one = wheel(wheels, "sleuth-demo-pkg", "1.0", requires=("sleuth-demo-dep",))
    dep = wheel(wheels, "sleuth-demo-dep", "1.0")
    wheel(wheels, "sleuth-demo-pkg", "2.0+cu130", requires=("sleuth-demo-dep>=2",))
    wheel(wheels, "sleuth-demo-dep", "2.0")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "-q", "install", "--no-index", str(one), str(dep)],
                   check=True)
    return {"venv": venv, "wheels": wheels, "cache": root / "cache"}


@pytest.mark.slow
def test_an_overlay_says_what_else_it_shadows_a_local_build_takes_and_known_says_the_fix(tmp_path, sshd, far_with_deps):
    """Issue 33: the 2.14.1 overlay was 5.4 GB (triton, every nvidia-*) and nothing said so; a
    build labelled 2.14.1+cu128 read as "did not take"; `sleuth known` said nothing of the fix
    just measured; the revert said "from the environment again" with another overlay of the
    same package still active."""
    far = far_with_deps
    d = project(tmp_path, sshd, far)
    (d / ".sleuth" / "known" / "demo8.toml").write_text(VERSIONS_ONLY)
    sleuth(d, "probe", "run", "--script", "check.py", "--target", "ct200")
    before = venv_print(far["venv"])

    made = sleuth(d, "upgrade", "acme/demo#7", "--target", "ct200", "--script", "check.py",  # no --version: fixed_in
                  "--find-links", str(far["wheels"]), "--no-index")
    assert ("before the install: pip will put 1 more distribution(s) in the overlay besides sleuth-demo-pkg (1 replace "
            "another version the environment has, 0 are not in it, 0 are the version it has): sleuth-demo-dep 2.0 over "
            "the environment's 1.0") in made.stderr
    out = made.stdout
    assert "the overlay holds sleuth-demo-pkg 2.0+cu130 and 1 more distribution(s)" in out, out
    assert "sleuth-demo-dep 2.0 over the environment's 1.0; what is tried is all of them" in out, out
    assert "sleuth-demo-pkg 2.0+cu130 imported" in out and "did not take" not in out, out
    assert "✔ verified upgrade #1 for demo-leak: fixed" in out, out
    assert "(judged under that whole overlay: sleuth-demo-pkg 2.0+cu130 and 1 more distribution(s)" in out, out
    [overlay] = overlays(far)
    assert sorted(p.name for p in (overlay / "site").glob("*.dist-info")) == [
        "sleuth_demo_dep-2.0.dist-info", "sleuth_demo_pkg-2.0+cu130.dist-info"]

    known = sleuth(d, "known", "--target", "ct200").stdout
    assert re.search(r"fixed here by upgrade #1 \(sleuth-demo-pkg 2\.0\+cu130 imported; the overlay: sleuth-demo-pkg "
                     r"2\.0\+cu130 and 1 more distribution\(s\), [0-9.]+ \w?B of [0-9.]+ \w?B\), run #3 for demo-leak: strong",
                     known), known
    rows = {r["id"]: r for r in json.loads(sleuth(d, "known", "--target", "ct200", "--json").stdout)}
    assert rows["acme/demo#7"]["measured_here"] and rows["acme/demo#8"]["measured_here"] == []

    sleuth(d, "upgrade", "acme/demo#8", "--target", "ct200", "--no-verify", "--find-links", str(far["wheels"]),
           "--no-index")
    first = sleuth(d, "upgrade", "--revert", "acme/demo#8", "--target", "ct200").stdout
    assert ("upgrade #1 (acme/demo#7, sleuth-demo-pkg==2.0) is still active there: runs import sleuth-demo-pkg from "
            "its overlay") in first and "from the environment again" not in first, first
    last = sleuth(d, "upgrade", "--revert", "acme/demo#7", "--target", "ct200").stdout
    assert "(sleuth-demo-pkg 2.0+cu130 and 1 more distribution(s)" in last and \
        "runs there import sleuth-demo-pkg from the environment again" in last, last
    assert overlays(far) == [] and venv_print(far["venv"]) == before

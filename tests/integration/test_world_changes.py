"""Verdicts that hold when the world changes outside sleuth, on real venvs changed by hand.

The test makes two virtual environments and installs a small pure-Python package into them
at two versions with pip (plus one package only in the first and one only in the second),
then drives `sleuth probe run env-fingerprint` as a user would, pointing the target at one
venv or the other by editing sleuth.toml, installing by hand between runs, wiping a compile
cache and editing code. sleuth must never call a run a circular retest when the world
changed, must name what changed, and must still refuse the same check in the same state.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import sleuth, verdicts
from support.wheels import pip, wheel

FP = ("probe", "run", "env-fingerprint", "--target", "gpu", "--param", "import_torch=false", "--json")


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("venvs")
    wheels = root / "wheels"
    wheels.mkdir()
    w = {
        "pkg1": wheel(wheels, "sleuth-demo-pkg", "1.0"),
        "pkg2": wheel(wheels, "sleuth-demo-pkg", "2.0"),
        "gone": wheel(wheels, "sleuth-gone", "1.0"),
        "extra": wheel(wheels, "sleuth-extra", "1.0"),
        "late": wheel(wheels, "sleuth-late", "0.1"),
    }
    out = {"wheels": wheels, **w}
    for name, install in (("A", ["pkg1", "gone"]), ("B", ["pkg2", "extra"])):
        venv = root / name
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        pip(venv, "install", "--no-index", "--no-deps", *(str(w[k]) for k in install))
        out[name] = venv
    return out


def project(tmp_path: Path, python: Path, extra: str = "") -> Path:
    d = tmp_path / "proj"
    d.mkdir(exist_ok=True)
    (d / "sleuth.toml").write_text(f'[targets.gpu]\npython = "{python}"\n{extra}')
    if not (d / ".sleuth").exists():
        sleuth(d, "new", "world changes")
    return d


def point(d: Path, python: Path, extra: str = "") -> None:
    """Point the target at another venv, by hand, as the seed's engineer did."""
    (d / "sleuth.toml").write_text(f'[targets.gpu]\npython = "{python}"\n{extra}')


def fingerprint(d: Path, *more: str, code: int | None = None) -> tuple[dict | None, subprocess.CompletedProcess]:
    proc = sleuth(d, *FP, *more, check=False)
    if code is not None:
        assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    return (json.loads(proc.stdout) if proc.stdout.strip() else None), proc


def flags(d: Path) -> list[dict]:
    return [e["data"] for e in json.loads(sleuth(d, "events", "--json").stdout) if e["kind"] == "flag.raised"]


@pytest.mark.slow
def test_a_then_b_is_not_a_retest_and_names_every_change_from_the_baseline(tmp_path, venvs):
    d = project(tmp_path, venvs["A"] / "bin" / "python")
    first, _ = fingerprint(d, code=0)
    sleuth(d, "baseline", f"#{first['run_id']}")
    point(d, venvs["B"] / "bin" / "python")
    second, _ = fingerprint(d, code=0)
    assert second["retest_of"] is None
    (result,) = [r for r in second["records"] if r["kind"] == "result"]
    assert result["has_baseline"] and result["drift"] == len(result["changes"])
    changes = {c["name"]: (c["before"], c["after"]) for c in result["changes"]}
    assert changes["sleuth-demo-pkg"] == ("1.0", "2.0")
    assert changes["sleuth-extra"] == (None, "1.0")   # added
    assert changes["sleuth-gone"] == ("1.0", None)    # removed
    assert verdicts(second) == [{"hypothesis": "version-drift", "verdict": "supports"}]
    # the CLI says what the UI's timeline says of the run: the drift, in words (issue 25, 4)
    drift = [f["text"] for f in second["findings"] if f["kind"] == "drift"]
    assert drift and "sleuth-demo-pkg 1.0 → 2.0" in drift[0], second["findings"]
    # back to A: a question #1 never answered (it had no baseline then) — never a retest
    point(d, venvs["A"] / "bin" / "python")
    third, _ = fingerprint(d, code=0)
    assert third["retest_of"] is None and verdicts(third) == [{"hypothesis": "version-drift", "verdict": "refutes"}]
    assert not [f for f in flags(d) if f["flag"] == "circular-retest"]
    hyps = {h["id"]: h for h in json.loads(sleuth(d, "hypotheses", "--json").stdout)}
    # drift seen at #2 and gone at #3: the world changed, nothing contradicts — refuted now
    assert hyps["version-drift"]["status"] == "refuted"


@pytest.mark.slow
def test_going_back_names_the_first_run_and_what_went_back(tmp_path, venvs):
    d = project(tmp_path, venvs["A"] / "bin" / "python")
    first, _ = fingerprint(d, code=0)
    point(d, venvs["B"] / "bin" / "python")
    second, _ = fingerprint(d, code=0)
    assert second["retest_of"] is None
    point(d, venvs["A"] / "bin" / "python")
    refused, proc = fingerprint(d, code=3)
    said = proc.stderr
    assert f"back to the state of #{first['run_id']}" in said, said
    assert f"after #{second['run_id']} saw" in said and "sleuth-demo-pkg 2.0" in said
    assert f"#{first['run_id']} already answered this" in said
    assert f"repeats #{second['run_id']}" not in said
    observed = [e["data"] for e in json.loads(sleuth(d, "events", "--json").stdout) if e["kind"] == "state.observed"]
    assert observed[-1]["same_as"] == first["run_id"] and observed[-1]["back_from"] == second["run_id"]
    forced, _ = fingerprint(d, "--force", code=0)
    assert forced["retest_of"] == first["run_id"]
    # what the UI flags, the CLI prints too (--json and text): the return and the oscillation
    kinds = {f["kind"]: f["text"] for f in forced["findings"]}
    assert f"back to the state of #{first['run_id']}" in kinds.get("state", ""), forced["findings"]
    assert "oscillation" in kinds and "sleuth-demo-pkg" in kinds["oscillation"], forced["findings"]
    assert forced["state_key"] == first["state_key"]
    # and now the very same check again, right after: a plain circular retest of the forced run
    _none, proc = fingerprint(d, code=3)
    assert f"this repeats #{forced['run_id']}" in proc.stderr and "measured just now" in proc.stderr


@pytest.mark.slow
def test_a_hand_pip_install_between_two_runs_is_not_a_retest(tmp_path, venvs):
    import shutil

    venv = tmp_path / "C"
    shutil.copytree(venvs["A"], venv, symlinks=True)
    d = project(tmp_path, venv / "bin" / "python")
    first, _ = fingerprint(d, code=0)
    pip(venv, "install", "--no-index", "--no-deps", str(venvs["late"]))  # by hand, no sleuth command between
    second, _ = fingerprint(d, code=0)
    assert second["retest_of"] is None and second["state_key"] != first["state_key"]
    observed = [e["data"] for e in json.loads(sleuth(d, "events", "--json").stdout) if e["kind"] == "state.observed"]
    assert {"name": "sleuth-late", "before": None, "after": "0.1"} in observed[-1]["changes"]


@pytest.mark.slow
def test_a_wiped_cache_and_an_edited_file_are_not_retests(tmp_path, venvs):
    cache = tmp_path / "inductor"
    (cache / "fx").mkdir(parents=True)
    (cache / "fx" / "entry.bin").write_bytes(b"x" * 100)
    code = tmp_path / "code"
    code.mkdir()
    (code / "model.py").write_text("W = 1\n")
    extra = f'env = {{ TORCHINDUCTOR_CACHE_DIR = "{cache}" }}\ncode = {{ local = "{code}" }}\n'
    d = project(tmp_path, venvs["A"] / "bin" / "python", extra)
    first, _ = fingerprint(d, code=0)
    _none, proc = fingerprint(d, code=3)  # nothing changed: refused
    import shutil

    shutil.rmtree(cache)  # the cache wiped by hand
    second, _ = fingerprint(d, code=0)
    assert second["retest_of"] is None and second["state_key"] != first["state_key"]
    (code / "model.py").write_text("W = 2\n")  # the code edited by hand
    third, _ = fingerprint(d, code=0)
    assert third["retest_of"] is None and third["state_key"] != second["state_key"]


@pytest.mark.slow
def test_after_a_refused_retest_the_next_runs_findings_are_its_own_and_the_changes_are_data(tmp_path, venvs):
    """Issue 35: after a refused circular retest, the next run's findings still carried the
    refused attempt's read ('the same state as #1') beside its own ('changed outside sleuth').
    Now a run says only what its own read saw, and --json gives every change as data."""
    import shutil

    venv = tmp_path / "C"
    shutil.copytree(venvs["A"], venv, symlinks=True)
    d = project(tmp_path, venv / "bin" / "python")
    first, _ = fingerprint(d, code=0)
    _refused, proc = fingerprint(d, code=3)
    assert f"#{first['run_id']}" in proc.stderr
    sleuth(d, "baseline", f"#{first['run_id']}")
    pip(venv, "install", "--no-index", "--no-deps", str(venvs["pkg2"]))  # by hand: 1.0 → 2.0
    second, _ = fingerprint(d, code=0)
    state = [f["text"] for f in second["findings"] if f["kind"] == "state"]
    assert len(state) == 1 and "changed outside sleuth: sleuth-demo-pkg 1.0 → 2.0" in state[0], second["findings"]
    assert not any("the same state as" in f["text"] for f in second["findings"]), second["findings"]
    assert second["state_changes"] == [{"name": "sleuth-demo-pkg", "before": "1.0", "after": "2.0"}]
    assert second["drift"] == [{"name": "sleuth-demo-pkg", "before": "1.0", "after": "2.0"}]
    (drift,) = [f for f in second["findings"] if f["kind"] == "drift"]
    assert drift["changes"] == second["drift"] and "sleuth-demo-pkg 1.0 → 2.0" in drift["text"]
    # a run whose read told nothing new has no state finding and no state changes
    third, _ = fingerprint(d, "--force", code=0)
    assert third["state_changes"] == [] and third["drift"] == second["drift"]
    assert [f["text"] for f in third["findings"] if f["kind"] == "state"] == [
        f"gpu read before the run: the same state as #{second['run_id']}"]


@pytest.mark.slow
async def test_through_mcp_going_back_is_refused_with_the_first_answer_and_forcing_it_flags_the_oscillation(tmp_path, venvs):
    """The same A → B → A by hand, driven by a coding agent through `sleuth mcp`: the return
    is refused with run 1's answer in the refusal, and the forced run says it oscillates."""
    from mcp import Client
    from mcp.types import Implementation
    from sleuth.app.mcp_server import build_server
    from sleuth.sessions import Workspace

    d = project(tmp_path, venvs["A"] / "bin" / "python")
    args = {"probe": "env-fingerprint", "target": "gpu", "params": {"import_torch": False}}
    async with Client(build_server(Workspace(d), no_agent=True), client_info=Implementation(name="agent", version="0")) as c:
        first = (await c.call_tool("probe_run", args)).structured_content
        point(d, venvs["B"] / "bin" / "python")
        second = (await c.call_tool("probe_run", args)).structured_content
        assert second["classification"] == "completed" and second["retest_of"] is None
        point(d, venvs["A"] / "bin" / "python")
        refused = (await c.call_tool("probe_run", args)).structured_content
        assert refused["refused"] == "circular-retest" and refused["earlier_run"] == first["run_id"]
        assert f"back to the state of #{first['run_id']}" in refused["message"]
        assert refused["earlier"]["run_id"] == first["run_id"]
        assert refused["state"]["known"] is True  # the state it was refused in: read just now
        forced = (await c.call_tool("probe_run", {**args, "force": True, "reason": "checking the flip by hand"})).structured_content
    oscillation = [f for f in forced["flags"] if f["flag"] == "oscillation"]
    assert oscillation and "sleuth-demo-pkg" in oscillation[0]["message"]
    assert forced["state_key"] == first["state_key"] and forced["forced_because"] == "checking the flip by hand"

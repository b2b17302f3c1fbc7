"""The `sleuth` command as a user runs it: a real process in an empty directory."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SLEUTH = shutil.which("sleuth") or str(Path(sys.executable).with_name("sleuth"))


def sleuth(cwd: Path, *args: str, check: bool | int = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the installed `sleuth`; check=True wants exit 0, check=N (an int) wants exit N."""
    proc = subprocess.run([SLEUTH, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if type(check) is int and proc.returncode != check:
        raise AssertionError(f"sleuth {' '.join(args)} exited {proc.returncode}, not {check}\n{proc.stdout}\n{proc.stderr}")
    if check is True and proc.returncode != 0:
        raise AssertionError(f"sleuth {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def here(tmp_path: Path) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    return d


def test_help_lists_the_commands(here):
    out = sleuth(here, "--help").stdout
    for command in ("init", "hypotheses", "hypothesis", "note", "replay", "export", "symptom", "link", "baseline"):
        assert command in out


def test_init_then_hypotheses_json_lists_the_four_builtins_open(here):
    sleuth(here, "init")
    text = (here / "sleuth.toml").read_text()
    assert "[targets.local]" in text and "# [targets.ct200]" in text and '# container = { kind = "pct"' in text
    data = json.loads(sleuth(here, "hypotheses", "--json").stdout)
    assert [h["id"] for h in data] == ["compile-race", "version-drift", "cache-invalidation", "dense-fallback"]
    for h in data:
        assert h["status"] == "open"
        assert h["evidence"] == {"supports": 0, "refutes": 0, "inconclusive": 0}
        assert set(h) >= {"id", "title", "status", "probes", "remedies", "evidence"}
    by_id = {h["id"]: h for h in data}
    assert by_id["compile-race"]["probes"] == ["compile-race", "fx-trace-state"]
    assert by_id["compile-race"]["remedies"] == ["lock", "precompile"]
    assert by_id["version-drift"]["probes"] == ["env-fingerprint"]
    assert by_id["cache-invalidation"]["probes"] == ["cache-inventory"]
    assert by_id["dense-fallback"]["probes"] == ["dense-fallback"]
    assert [r["id"] for r in by_id["compile-race"]["refinements"]] == ["concurrent-compile", "concurrent-fx-trace"]


def test_add_hypothesis_note_link_and_replay(here):
    sleuth(here, "init")
    sleuth(here, "symptom", "add", "fx-trace-error")
    sleuth(here, "hypothesis", "add", "stale-pyc", "--title", "stale bytecode", "--explains", "fx-trace-error", "--competes", "compile-race")
    sleuth(here, "note", "reinstalled torch 2.11.0+cu128", "--about", "version-drift")
    data = json.loads(sleuth(here, "hypotheses", "--json").stdout)
    mine = next(h for h in data if h["id"] == "stale-pyc")
    assert mine["status"] == "open" and mine["links"] == [{"kind": "competes", "to": "compile-race"}]
    events = json.loads(sleuth(here, "events", "--json").stdout)
    total = len(events)
    at = next(e["seq"] for e in events if e["kind"] == "symptom.added")
    snap = json.loads(sleuth(here, "replay", "--at", str(at), "--json").stdout)
    assert snap["event"] == at and snap["events_total"] == total
    assert [s["id"] for s in snap["symptoms"]] == ["fx-trace-error"]
    assert "stale-pyc" not in [h["id"] for h in snap["hypotheses"]]
    assert snap["notes"] == []
    full = json.loads(sleuth(here, "replay", "--json").stdout)
    assert "stale-pyc" in [h["id"] for h in full["hypotheses"]]
    assert full["notes"][0]["text"] == "reinstalled torch 2.11.0+cu128"
    exported = json.loads(sleuth(here, "export", "--format", "json").stdout)
    assert exported["format"] == "sleuth-session"
    assert [e["seq"] for e in exported["events"]] == list(range(1, total + 1))


def test_user_hypothesis_file_is_picked_up(here):
    sleuth(here, "init")
    (here / ".sleuth" / "hypotheses" / "nccl.toml").write_text(
        '[[hypothesis]]\nid = "nccl-hang"\ntitle = "NCCL hang"\n\n  [[hypothesis.probe]]\n  id = "env-fingerprint"\n  supports = "nccl == 1"\n'
    )
    data = json.loads(sleuth(here, "hypotheses", "--json").stdout)
    assert "nccl-hang" in [h["id"] for h in data]


def _session_digest(here: Path) -> str:
    h = hashlib.sha256()
    for p in sorted((here / ".sleuth").glob("*.sleuth")):
        h.update(p.read_bytes())
    return h.hexdigest()


def test_bad_input_is_one_line_exit_2_and_nothing_touched(here):
    sleuth(here, "init")
    before = _session_digest(here)
    # unknown id
    proc = sleuth(here, "link", "no-such", "competes", "compile-race", check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "unknown hypothesis 'no-such'" in proc.stderr
    # a rule outside the whitelist in the user's own file
    bad = here / ".sleuth" / "hypotheses" / "evil.toml"
    bad.write_text('[[hypothesis]]\nid = "evil"\n\n  [[hypothesis.probe]]\n  id = "x"\n  supports = "__import__(\'os\').system(\'touch pwned\')"\n')
    proc = sleuth(here, "hypotheses", check=False)
    assert proc.returncode == 2 and f"{bad}:6:" in proc.stderr and "a call" in proc.stderr
    assert not (here / "pwned").exists()
    bad.unlink()
    # malformed sleuth.toml: file:line:column
    good_toml = (here / "sleuth.toml").read_text()
    (here / "sleuth.toml").write_text(good_toml + '\n[targets.gpu]\nssh = "root@10.0.0.1\n')
    proc = sleuth(here, "note", "hello", check=False)
    lines = len(good_toml.splitlines())
    assert proc.returncode == 2 and f"sleuth.toml:{lines + 3}:" in proc.stderr
    (here / "sleuth.toml").write_text(good_toml + '\n[targets.gpu]\nssh = "gpu"\ncontainer = { kind = "pctt", id = "200" }\n')
    proc = sleuth(here, "hypotheses", check=False)
    assert proc.returncode == 2
    assert f"sleuth.toml:{lines + 4}:1: targets.gpu.container.kind: 'pctt' is not one of" in proc.stderr
    (here / "sleuth.toml").write_text(good_toml)
    # unknown run, bad run number
    assert sleuth(here, "baseline", "#9", check=False).returncode == 2
    assert sleuth(here, "baseline", "nine", check=False).returncode == 2
    # replay beyond the end
    assert sleuth(here, "replay", "--at", "9999", "--json", check=False).returncode == 2
    assert _session_digest(here) == before


def test_corrupt_session_is_exit_2_and_left_as_it_was(here):
    sleuth(here, "init")
    path = next((here / ".sleuth").glob("*.sleuth"))
    path.write_bytes(b"garbage" * 100)
    for extra in (here / ".sleuth").glob("*.sleuth-*"):
        extra.unlink()
    before = path.read_bytes()
    for args in (["hypotheses"], ["replay", "--json"], ["export"], ["note", "x"]):
        proc = sleuth(here, *args, check=False)
        assert proc.returncode == 2, args
        assert f"{path}: not a sleuth session" in proc.stderr
    assert path.read_bytes() == before


def test_no_investigation_yet_is_a_clear_error(here):
    proc = sleuth(here, "replay", "--json", check=False)
    assert proc.returncode == 2 and "start one with `sleuth init`" in proc.stderr
    # reading commands never start one (issue 15): only init and new do
    assert sleuth(here, "hypotheses", check=2) and not (here / ".sleuth").exists()


def test_demo_never_overwrites_a_users_files(tmp_path):
    mine = tmp_path / "mine"
    (mine / "drafter").mkdir(parents=True)
    (mine / "sleuth.toml").write_text("[targets.local]\n# my own\n")
    (mine / "drafter" / "model.py").write_text("MY_MODEL = 1\n")
    proc = sleuth(tmp_path, "demo", "mine", check=2)
    assert "drafter/model.py, sleuth.toml are not as the demo wrote them" in proc.stderr
    assert (mine / "sleuth.toml").read_text() == "[targets.local]\n# my own\n"  # untouched, even with --force
    assert sleuth(tmp_path, "demo", "mine", "--force", check=2) and (mine / "drafter" / "model.py").read_text() == "MY_MODEL = 1\n"
    assert not (mine / ".sleuth").exists()  # and no investigation was started

    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    proc = sleuth(tmp_path, "demo", "other", check=2)
    assert "not empty (notes.txt) and not an earlier demo" in proc.stderr and not (other / "drafter").exists()
    sleuth(tmp_path, "demo", "other", "--force")  # beside what is there (no terminal: it sets up and says how)
    assert (other / "drafter" / "train.py").is_file() and (other / "notes.txt").read_text() == "x"

    sleuth(tmp_path, "demo", "other")  # an earlier demo, unchanged: fine again
    (other / "drafter" / "model.py").write_text((other / "drafter" / "model.py").read_text() + "# the lock\n")
    proc = sleuth(tmp_path, "demo", "other", check=2)  # never puts back the unremedied drafter
    assert "drafter/model.py is not as the demo wrote it" in proc.stderr
    assert (other / "drafter" / "model.py").read_text().endswith("# the lock\n")


def test_bare_sleuth_without_a_terminal_says_how_and_creates_nothing(here):
    proc = sleuth(here, check=2)
    assert "the UI needs a terminal" in proc.stderr and "sleuth status" in proc.stderr
    assert proc.stdout == "" and not (here / ".sleuth").exists()


def test_reading_never_creates_and_a_subdirectory_finds_its_project(here):
    proc = sleuth(here, "hypotheses", check=2)
    assert "start one with `sleuth init`" in proc.stderr and not (here / ".sleuth").exists()
    sleuth(here, "init")
    sub = here / "src" / "deep"
    sub.mkdir(parents=True)
    sleuth(sub, "note", "seen from a subdirectory")
    assert not (sub / ".sleuth").exists()  # found the project's investigation above, as git would
    notes = [e for e in json.loads(sleuth(here, "events", "--json").stdout) if e["kind"] == "note.added"]
    assert [n["data"]["text"] for n in notes] == ["seen from a subdirectory"]

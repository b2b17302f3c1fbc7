"""What a hunt leaves behind: the postmortem of a recorded session, the JSON export that
imports again, the asciicast of one run, and no secret in any of them."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from sleuth.probes import load_config
from sleuth.sessions import (
    Investigation,
    dump_export,
    import_session,
    request_for_shell,
    run_cast,
    run_probe,
    write_postmortem,
)
from support.cli import sleuth
from support.mermaid_check import assert_valid_flowchart, mermaid_blocks
from support.sessions import env_state, record_run

SECRET = "Zq9-not-a-real-token-8f3e1c"  # no known token shape: only the env-var name gives it away
HF_SHAPED = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123"
RACE_FAIL = {"threads": 4, "race": "fx-trace", "cold_cache": True, "calls": 200, "fx_trace_errors": 37, "errors_total": 37, "control_fx_trace_errors": 0, "failed_trials": 1,
             "control_failed": 0, "control_same_failure": 0}
RACE_CLEAN = {**RACE_FAIL, "fx_trace_errors": 0, "errors_total": 0, "failed_trials": 0}
DIFF = "--- a/model.py\n+++ b/model.py\n@@ -1 +1 @@\n-compiled = torch.compile(f)\n+compiled = _sleuth_serialized(torch.compile(f))\n"
SHELL = (
    'echo "config: {\\"hidden_size\\": 4096}"; echo "using token $SLEUTH_TEST_API_TOKEN"; '
    f'echo "hub: {HF_SHAPED}" >&2; printf "progress 1\\rprogress 2\\rdone\\n"; echo "é ✓ ünïcode"'
)


@pytest.fixture
def hunt(tmp_path: Path, monkeypatch, catalog) -> Path:
    """A recorded hunt: symptom, a real shell run on the local target that prints a planted
    secret, fingerprints with a baseline, a circular retest, the race, the lock, the fix."""
    monkeypatch.setenv("SLEUTH_TEST_API_TOKEN", SECRET)
    path = tmp_path / ".sleuth" / "hunt.sleuth"
    inv = Investigation.create(path, "drafter race", catalog)
    inv.add_symptom("fx-trace-error")
    local = load_config(None).target("local")
    report = asyncio.run(run_probe(inv, local, request_for_shell(SHELL)))
    assert report.outcome.classification == "completed"
    inv.add_note(f"pasted the token {SECRET} by mistake", about="version-drift")
    s = env_state(torch="2.11.0+cu128")
    record_run(inv, "env-fingerprint", {"has_baseline": False, "drift": 0, "fingerprint": {"torch": "2.11.0+cu128"}}, s)
    inv.mark_baseline(2)
    record_run(inv, "env-fingerprint", {"has_baseline": True, "drift": 0, "fingerprint": {"torch": "2.11.0+cu128"}}, s)
    record_run(inv, "env-fingerprint", {"has_baseline": True, "drift": 0, "fingerprint": {"torch": "2.11.0+cu128"}}, s)  # retest
    record_run(inv, "compile-race", RACE_FAIL, env_state(torch="2.11.0+cu130"))
    inv.record_application("lock", "local", [{"path": "model.py", "before_sha": "a" * 64, "after_sha": "b" * 64, "diff": DIFF}], hypothesis="compile-race")
    record_run(inv, "compile-race", RACE_CLEAN, env_state(torch="2.11.0+cu130", code="c1"))
    inv.close()
    return path


def test_postmortem_of_a_recorded_session_has_every_section(hunt: Path):
    with Investigation.replay(hunt) as inv:
        out = write_postmortem(inv, hunt.parent.parent / "postmortem.md")
    md = out.read_text()
    sections = re.findall(r"^## (.+)$", md, re.M)
    assert sections == ["Summary", "Hypotheses", "Timeline", "Evidence by hypothesis", "Flags", "Environment across runs", "Remedies"]

    def section(name: str) -> str:
        return md.split(f"## {name}\n")[1].split("\n## ")[0]

    summary = section("Summary")
    assert "Symptom: **FX-trace RuntimeError**" in summary
    assert "Root cause: **compile race** — confirmed" in summary
    assert "Fix: the **lock** remedy (application #1), verified by run #6 (compile-race: completed)" in summary
    assert "Time from the first event to the verified fix:" in summary

    [block] = mermaid_blocks(md)
    assert_valid_flowchart(block)
    assert any(line.startswith('    H_compile_race["compile race<br/>confirmed') and line.endswith(":::confirmed") for line in block), block
    assert any(line.startswith("    H_version_drift[") and line.endswith(":::refuted") for line in block), block
    assert "    A1 -->|addresses| H_compile_race" in block

    timeline = section("Timeline")
    rows = [r for r in timeline.splitlines() if r.startswith("| 00:")]
    assert len([r for r in rows if "run #" in r]) == 6
    assert re.search(r"run #4 env-fingerprint ⟲ retest of #3 \(\[output\]\(postmortem-output/run-4\.txt\)\) \| [^|]* \| local \| completed", timeline)
    assert "remedy lock applied (#1)" in timeline and "⚑ circular-retest" in timeline

    evidence = section("Evidence by hypothesis")
    drift = evidence.split("### version drift — refuted")[1].split("###")[0]
    assert re.search(r"\| #3 \| env-fingerprint \| completed \| .*drift=0.* \| \*\*refutes\*\* \|", drift)  # what refuted it
    race = evidence.split("### compile race — confirmed")[1].split("###")[0]
    assert re.search(r"\| #5 \| compile-race \| completed \| .*fx_trace_errors=37.* \| \*\*supports\*\* \|", race)

    flags = section("Flags")
    assert re.search(r"\| circular-retest \| #4 \| #3 \| .*repeats #3.* \| \d+ s \|", flags)
    assert "Circular retests cost" in flags

    env = section("Environment across runs")
    # one row per state; drift between states in bold, each value with the run that measured it
    assert re.search(r"^\| local \| #5 \| \*\*2\.11\.0\+cu130\*\* \(#5\) \|", env, re.M), env

    remedies = section("Remedies")
    assert "### lock (#1, active)" in remedies
    assert "```diff\n" + DIFF.rstrip("\n") + "\n```" in remedies

    # every run's full output is beside the markdown, byte for byte
    first = (out.parent / "postmortem-output" / "run-1.txt").read_bytes()
    assert b"hidden_size" in first and "é ✓ ünïcode".encode() in first


def test_json_export_import_export_is_identical(hunt: Path, tmp_path: Path):
    with Investigation.replay(hunt) as inv:
        first = dump_export(inv.export_json())
        live_state = inv.state.snapshot()
        lines = inv.store.lines(1, 0, 100)
    copy = tmp_path / "copy.sleuth"
    import_session(json.loads(first), copy)
    with Investigation.replay(copy) as again:
        assert dump_export(again.export_json()) == first
        assert again.state.snapshot() == live_state  # the same investigation, not just the same text
        assert again.store.lines(1, 0, 100) == lines  # the line index was rebuilt the same


def test_who_wrote_each_event_survives_export_and_import(hunt: Path, tmp_path: Path):
    authored = tmp_path / "authored.sleuth"
    import shutil

    shutil.copy(hunt, authored)
    with Investigation.open(authored) as inv:
        inv.store.author = "mcp:claude-code"
        inv.add_note("seen by the agent")
        first = dump_export(inv.export_json())
    doc = json.loads(first)
    assert doc["events"][-1]["author"] == "mcp:claude-code"
    copy = tmp_path / "copy.sleuth"
    import_session(doc, copy)
    with Investigation.replay(copy) as again:
        assert dump_export(again.export_json()) == first
        note = [n for n in again.state.notes if n.text == "seen by the agent"][0]
        assert again.state.author(note.seq) == "mcp:claude-code"


def test_import_and_export_through_the_cli(hunt: Path, tmp_path: Path):
    ws = hunt.parent.parent
    sleuth(ws, "export", "--session", str(hunt), "-o", "hunt.json")
    sleuth(ws, "import", "hunt.json", "-o", "again.sleuth")
    sleuth(ws, "export", "--session", "again.sleuth", "-o", "again.json")
    assert (ws / "hunt.json").read_bytes() == (ws / "again.json").read_bytes()
    # refused: an existing destination, a broken file (with line:col), an edited export
    assert "already exists" in sleuth(ws, "import", "hunt.json", "-o", "again.sleuth", check=2).stderr
    (ws / "broken.json").write_text('{"format": "sleuth-session",\n "events": [}\n')
    assert "broken.json:2:" in sleuth(ws, "import", "broken.json", "-o", "b.sleuth", check=2).stderr
    doc = json.loads((ws / "hunt.json").read_text())
    del doc["events"][3]
    (ws / "gap.json").write_text(json.dumps(doc))
    err = sleuth(ws, "import", "gap.json", "-o", "gap.sleuth", check=2).stderr
    assert "events[3].seq: expected 4, found 5" in err
    assert not (ws / "gap.sleuth").exists() and not (ws / "b.sleuth").exists()


def test_cast_of_one_run_plays_in_order(hunt: Path):
    with Investigation.replay(hunt) as inv:
        cast = run_cast(inv.store, inv.state, 1)
        raw = inv.store.output_bytes(1).decode()
    header, *events = [json.loads(line) for line in cast.splitlines()]
    assert header["version"] == 3 and header["term"]["cols"] > 0 and header["term"]["rows"] > 0
    assert isinstance(header["timestamp"], int) and "run #1" in header["title"]
    assert all(isinstance(e, list) and len(e) == 3 and e[0] >= 0 for e in events), events  # intervals, never negative
    codes = [e[1] for e in events]
    assert set(codes) <= {"o", "m", "x"} and codes[-2:] == ["m", "x"] and events[-1][2] == "0"
    played = "".join(e[2] for e in events if e[1] == "o")
    assert played.replace("\r\n", "\n") == raw  # every byte, bare newlines become CR LF as on a tty
    assert "progress 1\rprogress 2\rdone\r\n" in played


def test_cast_through_the_cli_needs_a_run(hunt: Path):
    ws = hunt.parent.parent
    assert "--run N" in sleuth(ws, "export", "--session", str(hunt), "--format", "cast", check=2).stderr
    assert "no run #99" in sleuth(ws, "export", "--session", str(hunt), "--format", "cast", "--run", "99", check=2).stderr
    sleuth(ws, "export", "--session", str(hunt), "--run", "#1", "-o", "run1.cast")
    assert json.loads((ws / "run1.cast").read_text().splitlines()[0])["version"] == 3


def test_planted_secret_appears_in_no_export(hunt: Path):
    ws = hunt.parent.parent
    sleuth(ws, "export", "--session", str(hunt), "-o", "all.json")
    sleuth(ws, "export", "--session", str(hunt), "-o", "pm.md")
    sleuth(ws, "export", "--session", str(hunt), "--run", "1", "-o", "run1.cast")
    stdout = sleuth(ws, "export", "--session", str(hunt), "--format", "markdown").stdout
    files = [ws / "all.json", ws / "pm.md", ws / "run1.cast", *sorted((ws / "pm-output").iterdir())]
    texts = {str(f): f.read_text() for f in files} | {"stdout": stdout, "session file": hunt.read_bytes().decode("latin-1")}
    for name, text in texts.items():
        assert SECRET not in text, name
        assert HF_SHAPED not in text, name
    # the output is still there around the secret, and says where it was
    assert "using token <redacted:SLEUTH_TEST_API_TOKEN>" in (ws / "pm-output" / "run-1.txt").read_text()
    assert "hub: <redacted>" in (ws / "pm-output" / "run-1.txt").read_text()

"""The `sleuth` command as a user runs it: a real process in an empty directory."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from support.cli import SLEUTH, sleuth


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
    assert by_id["cache-invalidation"]["probes"] == ["compile-cache", "cache-inventory"]
    assert by_id["dense-fallback"]["probes"] == ["dense-fallback", "fx-trace-state"]
    assert [r["id"] for r in by_id["compile-race"]["refinements"]] == ["concurrent-compile", "concurrent-fx-trace"]


@pytest.mark.slow
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
    proc = sleuth(here, "hypotheses", check=False)  # uses no target: a warning naming the line
    assert proc.returncode == 0
    assert f"warning: {here / 'sleuth.toml'}:{lines + 4}:1: targets.gpu.container.kind: 'pctt' is not one of" in proc.stderr
    proc = sleuth(here, "probe", "run", "cache-inventory", "--target", "gpu", check=False)  # uses it: exit 2
    assert proc.returncode == 2
    assert f"error: {here / 'sleuth.toml'}:{lines + 4}:1: targets.gpu.container.kind: 'pctt' is not one of" in proc.stderr
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


@pytest.mark.slow
def test_output_prints_a_runs_stored_output_plain_and_greps_it(here):
    sleuth(here, "init")
    script = "for i in 1 2 3; do echo out-$i; done; echo 'err: hidden_size=4096' >&2; printf 'é ✓\\n'"
    sleuth(here, "probe", "run", "--shell", script)
    both = sleuth(here, "output", "1").stdout.splitlines()
    assert both[:3] == ["out-1", "out-2", "out-3"] and "err: hidden_size=4096" in both and "é ✓" in both
    assert sleuth(here, "output", "#1", "--stream", "stderr").stdout == "err: hidden_size=4096\n"
    grep = sleuth(here, "output", "1", "--grep", r"out-[23]", "-n").stdout.splitlines()
    assert [line.split(":", 1)[1] for line in grep] == ["out-2", "out-3"] and grep[0].split(":")[0].isdigit()
    assert sleuth(here, "output", "1", "--grep", "HIDDEN", "-i").stdout.strip() == "err: hidden_size=4096"
    assert sleuth(here, "output", "1", "--grep", "nowhere", check=1).stdout == ""  # as grep: nothing matched
    for args, words in ((["output", "9"], "no run #9"), (["output", "x"], "is not a run number"),
                        (["output", "1", "--grep", "("], "not a regular expression")):
        proc = sleuth(here, *args, check=2)
        assert words in proc.stderr and proc.stdout == ""
    # the run's report names the command, and a pipe that closes early is no error
    report = sleuth(here, "probe", "run", "--shell", "seq 1 100000").stdout
    assert "full output: sleuth output 2" in report
    head = subprocess.run(f"{SLEUTH} output 2 | head -3", shell=True, cwd=here, capture_output=True, text=True, timeout=60)
    assert head.stdout.split() == ["1", "2", "3"] and "Traceback" not in head.stderr and "BrokenPipe" not in head.stderr


@pytest.mark.slow
def test_symptom_list_remove_and_hypothesis_remove_are_recorded(here):
    sleuth(here, "init")
    sleuth(here, "symptom", "add", "fx-trace-error")
    sleuth(here, "symptom", "add", "oom-at-stpe-40")  # a typo
    listed = sleuth(here, "symptom", "list").stdout
    assert "fx-trace-error" in listed and "explained by compile-race" in listed and "oom-at-stpe-40" in listed
    sleuth(here, "symptom", "remove", "oom-at-stpe-40")
    assert [s["id"] for s in json.loads(sleuth(here, "symptom", "list", "--json").stdout)] == ["fx-trace-error"]
    sleuth(here, "hypothesis", "add", "stale-pyc", "--title", "stale bytecode", "--competes", "compile-race")
    sleuth(here, "hypothesis", "remove", "stale-pyc")
    assert "stale-pyc" not in [h["id"] for h in json.loads(sleuth(here, "hypotheses", "--json").stdout)]
    proc = sleuth(here, "hypothesis", "remove", "compile-race", check=2)  # others refine it
    assert "concurrent-compile, concurrent-fx-trace refine compile-race" in proc.stderr
    assert "no symptom 'nope'" in sleuth(here, "symptom", "remove", "nope", check=2).stderr
    # the log says it in words; replay before the removal still has them
    events = sleuth(here, "events").stdout
    assert "symptom removed: oom-at-stpe-40" in events and "hypothesis removed: stale-pyc" in events
    total = len(json.loads(sleuth(here, "events", "--json").stdout))
    before = json.loads(sleuth(here, "replay", "--at", str(total - 1), "--json").stdout)
    assert "stale-pyc" in [h["id"] for h in before["hypotheses"]]


@pytest.mark.slow
def test_events_name_each_runs_probe_and_commands_take_a_project_directory(here, tmp_path):
    sleuth(here, "init")
    sleuth(here, "probe", "run", "cache-inventory")
    events = sleuth(here, "events").stdout
    assert "run #1 cache-inventory started on local" in events and "#1 cache-inventory completed in" in events
    assert "application.verified" not in events.split("\n")[0]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for args in (["replay", str(here), "--text"], ["replay", str(here / ".sleuth"), "--text"], ["events", "--session", str(here)]):
        out = sleuth(elsewhere, *args).stdout
        assert "cache-inventory" in out or "compile-race" in out, args
    assert "no investigation in it" in sleuth(elsewhere, "replay", str(elsewhere), "--text", check=2).stderr


def test_probe_list_shows_parameters_their_defaults_and_sleuth_toml(here):
    sleuth(here, "init")
    with open(here / "sleuth.toml", "a") as f:
        f.write('\n[probes.compile-race]\ntrials = 7\n\n[probes.fx-trace-state]\nentry = "train.py"\n')
    out = sleuth(here, "probe", "list").stdout
    assert "params: entry = (yours to set: required)" in out  # never sleuth's own example
    assert "entry = \"train.py\" (sleuth.toml)" in out
    assert "trials = 7 (sleuth.toml; default 3)" in out and "control_args = null" in out
    rows = {r["id"]: r for r in json.loads(sleuth(here, "probe", "list", "--json").stdout)}
    assert rows["compile-race"]["params"]["trials"] == 3 and rows["compile-race"]["configured"] == {"trials": 7}


def test_file_system_refusals_are_one_line_exit_2_and_write_nothing(here, tmp_path: Path):
    """Issue 25 (6): a path the machine refuses ends in a line naming it and why, exit 2, never a
    traceback, and nothing half-written: no folder the user did not name is made."""
    sleuth(here, "init")
    missing = tmp_path / "nowhere" / "x.json"
    for out in (str(missing), str(missing.with_suffix(".md"))):
        proc = sleuth(here, "export", "-o", out, check=2)
        assert proc.stderr.startswith("sleuth: error: ") and "no such directory" in proc.stderr and str(missing.parent) in proc.stderr
        assert "Traceback" not in proc.stderr and not missing.parent.exists()
    proc = sleuth(here, "export", "-o", str(tmp_path), check=2)
    assert "is a directory" in proc.stderr and "Traceback" not in proc.stderr
    proc = sleuth(here, "import", str(tmp_path), check=2)
    assert f"{tmp_path}: is a directory" in proc.stderr and "Traceback" not in proc.stderr
    # a folder where sleuth keeps its investigations that is a file: said before anything is written
    other = tmp_path / "other"
    other.mkdir()
    (other / ".sleuth").write_text("not a folder")
    proc = sleuth(other, "init", check=2)
    assert ".sleuth: is a file" in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(p.name for p in other.iterdir()) == [".sleuth"]
    # and the export that can be written is whole
    good = tmp_path / "hunt.json"
    sleuth(here, "export", "-o", str(good))
    assert json.loads(good.read_text())["events"] and not list(tmp_path.glob(".*.sleuth-tmp"))


def test_help_names_the_exit_codes_and_the_remedy_names_agree(here):
    from sleuth.app.cli import EXIT_CODES, REMEDY_NAMES
    from sleuth.probes.remedies import REMEDIES

    assert tuple(sorted(REMEDIES)) == REMEDY_NAMES  # the parser's help and the handler's check say the same
    out = sleuth(here, "--help").stdout
    assert "exit status:" in out
    for code in EXIT_CODES:
        assert f"  {code} " in out
    proc = sleuth(here, "remedy", "preview", "lokc", check=2)
    assert "unknown remedy 'lokc'; remedies: lock, precompile" in proc.stderr


def test_target_check_of_the_local_target_says_no_hop_was_configured(here):
    """Issue 25 (5): on a local target with no container configured, a container the far end
    detects (this machine may be one) is said as detected, not as a configured hop."""
    import re

    sleuth(here, "init")
    out = sleuth(here, "target", "check", "local").stdout
    assert "hops: none configured; " in out
    assert "detected" in out or "no sign of a container" in out
    assert not re.search(r"^\s*container: ", out, re.M)


def test_a_warning_of_the_targets_environment_is_a_finding_said_once(here):
    """Issue 25 (friction): numpy's 'Failed to initialize NumPy' on every torch import is said
    once, as a finding about the target; the next runs' live output leaves it out and says so,
    and every byte stays in the store."""
    sleuth(here, "init")
    warn = ("/venv/torch/_subclasses/functional_tensor.py:368: UserWarning: Failed to initialize NumPy: "
            "No module named 'numpy' (Triggered internally at tensor_numpy.cpp:84.)")
    import shlex

    second_line = '  cpu = _conversion_method_template(device=torch.device("cpu"))'
    cmd = f"echo {shlex.quote(warn)} >&2; echo {shlex.quote(second_line)} >&2; echo done"
    first = sleuth(here, "probe", "run", "--shell", cmd, "--force")
    assert "Failed to initialize NumPy" in first.stderr  # the first time it is shown, and said as a finding
    assert "⚑ environment: sleuth, on local: torch warns 'Failed to initialize NumPy'" in first.stdout
    second = sleuth(here, "probe", "run", "--shell", cmd, "--force")
    assert "Failed to initialize NumPy" not in second.stderr and "_conversion_method_template" not in second.stderr
    assert "left out 2 line(s) of numpy-missing" in second.stderr and "done" in second.stdout
    assert "⚑ environment" not in second.stdout  # said once per target
    stored = sleuth(here, "output", "2", "--stream", "stderr").stdout
    assert "Failed to initialize NumPy" in stored and "_conversion_method_template" in stored
    notes = [e for e in json.loads(sleuth(here, "events", "--json").stdout)
             if e["kind"] == "note.added" and e["data"].get("finding") == "numpy-missing"]
    assert len(notes) == 1 and notes[0]["data"]["target"] == "local"


def test_a_repeated_shell_command_in_the_same_state_is_a_circular_retest_unless_declared_a_poll(here):
    """Issue 44: the agent's commonest loop. The same command in the same measured state is the
    same experiment: refused (exit 3) naming the earlier run and its answer; --force with a
    reason runs it; after the code changed it runs (another state); --poll declares a command
    meant to repeat, once."""
    sleuth(here, "init")
    code = here / "code"
    code.mkdir()
    (code / "train.py").write_text("print('v1')\n")
    (here / "sleuth.toml").write_text('[targets.local]\ncode = { local = "code" }\n')
    cmd = "python3 -c 'print(\"loss: 1.23\")'"
    first = sleuth(here, "probe", "run", "--shell", cmd)
    assert "loss: 1.23" in first.stdout
    run = int(first.stdout.split("\n#", 1)[1].split(" ", 1)[0])
    again = sleuth(here, "probe", "run", "--shell", cmd, check=3)
    assert again.stdout == "" and f"circular retest: this repeats #{run} (`{cmd}` on local" in again.stderr, again.stderr
    assert "in the same state (measured just now" in again.stderr and "exited 0" in again.stderr
    forced = sleuth(here, "probe", "run", "--shell", cmd, "--force", "--reason", "the log rotated")
    assert "loss: 1.23" in forced.stdout
    (code / "train.py").write_text("print('v2')\n")  # the code changed: another state, another experiment
    changed = json.loads(sleuth(here, "probe", "run", "--shell", cmd, "--json").stdout)
    assert "refused" not in changed and [c["name"] for c in changed["state_changes"]] == ["code"], changed["state_changes"]
    said = [f["text"] for f in changed["findings"] if f["kind"] == "state"]
    assert said and "changed since #" in said[0] and "the last run of this same check: code" in said[0], said
    poll = "date +%s%N"
    sleuth(here, "probe", "run", "--shell", poll, "--poll")
    for _ in range(2):  # declared once: its repeats run
        sleuth(here, "probe", "run", "--shell", poll)
    assert "--poll goes with --shell" in sleuth(here, "probe", "run", "env-fingerprint", "--poll", check=2).stderr
    flaky = "n=$(cat flaky.count 2>/dev/null || echo 0); echo $((n+1)) > flaky.count; test $((n % 2)) = 1"
    said = [sleuth(here, "probe", "run", "--shell", flaky, "--sample", check=False).stdout for _ in range(2)]
    assert "∑ sample 2 of this command in this state: 1 of 2 failed (rate 50%" in said[1], said[1]
    flags = [e["data"] for e in json.loads(sleuth(here, "events", "--json").stdout) if e["kind"] == "flag.raised"]
    assert [(f["flag"], f["earlier"], f.get("forced_because")) for f in flags if f.get("run")] == \
        [("circular-retest", run, "the log rotated")], flags


def test_a_last_line_without_its_newline_is_counted(here):
    """Issue 44: `printf 'a\\nb\\nlast'` printed three lines; the run says three, and the store has them."""
    sleuth(here, "init")
    out = sleuth(here, "probe", "run", "--shell", "printf 'a\\nb\\nlast'").stdout
    assert "stdout had 3 lines" in out and "(3 + 0 lines" in out, out
    assert sleuth(here, "output", "1", "--raw").stdout == "a\nb\nlast"

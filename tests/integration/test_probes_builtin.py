"""Every built-in probe on the local target as a user runs it (`sleuth probe run … --json`),
and the cases where a probe could not do what it was asked: it ends `failed` with the reason
and gives no evidence, never a `completed` run that turns a hypothesis inconclusive.
(compile-race and fx-trace-state on the example drafter: test_drafter_race.py;
env-fingerprint and cache-inventory through the jump host: test_probe_cli.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import sleuth


@pytest.fixture
def here(tmp_path: Path) -> Path:
    d = tmp_path / "fresh"
    d.mkdir()
    sleuth(d, "init")
    return d


def run(here: Path, *args: str) -> dict:
    proc = sleuth(here, "probe", "run", *args, "--json", check=False)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def evidence_counts(here: Path) -> dict[str, dict[str, int]]:
    return {h["id"]: h["evidence"] for h in json.loads(sleuth(here, "hypotheses", "--json").stdout)}


@pytest.mark.parametrize("probe", ["compile-race", "fx-trace-state"])
def test_a_probe_without_its_entry_is_refused_and_runs_nothing(here, probe):
    """No default entry: sleuth's own example is not the user's script. Refused before anything
    runs (exit 2, one line, what to set where), no run recorded, no evidence."""
    proc = sleuth(here, "probe", "run", probe, check=2)
    assert proc.stderr.count("\n") == 1 and proc.stdout == "", proc.stderr
    assert f"{probe} needs entry" in proc.stderr and f"under [probes.{probe}] in sleuth.toml" in proc.stderr
    assert "--param entry=PATH; nothing was run" in proc.stderr
    sleuth(here, "export", "--format", "json", "-o", "all.json")
    kinds = [e["kind"] for e in json.loads((here / "all.json").read_text())["events"]]
    assert "run.started" not in kinds and "state.observed" not in kinds, kinds
    assert evidence_counts(here)["compile-race"] == {"supports": 0, "refutes": 0, "inconclusive": 0}
    # a missing file is the run's own failure, said where it was looked for
    data = run(here, probe, "--param", "entry=nosuch.py")
    assert data["classification"] == "failed" and "entry nosuch.py not found" in data["reason"], data["reason"]
    assert data["evidence"] == []


def test_compile_race_whose_entry_never_gets_going_fails(here):
    (here / "broken.py").write_text("import sys\nsys.exit(4)\n")
    data = run(here, "compile-race", "--param", "entry=broken.py", "--param", "trials=2", "--param", "control=false")
    assert data["classification"] == "failed" and "the threaded phase never ran" in data["reason"]
    assert "before it started any thread (exit 4; exit 4)" in data["reason"] and data["evidence"] == []


@pytest.mark.slow
def test_fx_trace_state_without_flex_attention_calls_fails(here):
    (here / "quiet.py").write_text("print('no flex_attention here')\n")
    data = run(here, "fx-trace-state", "--param", "entry=quiet.py")
    assert data["classification"] == "failed" and "never called a compiled flex_attention" in data["reason"]
    assert data["evidence"] == []


@pytest.mark.slow
def test_dense_fallback_runs_on_cpu_torch(here):
    data = run(here, "dense-fallback", "--param", "seq=256", "--param", "head_dim=16", "--param", "window=64",
               "--param", "repeats=2")
    assert data["classification"] == "completed", data["reason"]
    (result,) = [r for r in data["records"] if r["kind"] == "result"]
    assert result["device"] == "cpu" and result["compiled_ms"] > 0 and result["eager_ms"] > 0


@pytest.mark.slow
def test_a_script_probe_may_compile_a_function_that_reads_a_module_global(here):
    script = here / "scaled.py"
    script.write_text(
        "import torch\n"
        "W = 3.0\n"
        "@torch.compile(backend='eager')\n"
        "def scale(x):\n"
        "    return x * W\n"
        "emit('result', total=float(scale(torch.ones(2)).sum()), main=__name__)\n"
    )
    data = run(here, "--script", str(script))
    assert data["classification"] == "completed", data["reason"]
    assert data["records"][0] == {"kind": "result", "total": 6.0, "main": "__main__"}


@pytest.mark.slow
def test_env_fingerprint_and_cache_inventory_complete_here(here):
    fp = run(here, "env-fingerprint", "--param", "import_torch=false")
    assert fp["classification"] == "completed"
    (result,) = [r for r in fp["records"] if r["kind"] == "result"]
    assert result["has_baseline"] is False and result["changes"] == []
    assert "torch" in result["fingerprint"]["distributions"]  # every distribution, by name
    inv = run(here, "cache-inventory")
    assert inv["classification"] == "completed" and inv["evidence"]


def test_without_torch_the_torch_probes_fail_and_say_why(here, tmp_path):
    import subprocess
    import sys

    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    (here / "sleuth.toml").write_text(f'[targets.local]\npython = "{bare / "bin" / "python"}"\n')
    (here / "train.py").write_text("import torch\n")
    for args, words in (
        (["dense-fallback"], "No module named 'torch'"),
        (["fx-trace-state", "--param", "entry=train.py"], "No module named 'torch'"),
        (["compile-race", "--param", "entry=train.py", "--param", "trials=1", "--param", "control=false"],
         "(the main thread raised ModuleNotFoundError, exit 1)"),
    ):
        data = run(here, *args)
        assert data["classification"] == "failed" and words in data["reason"], data["reason"]
        assert data["evidence"] == []


def test_a_probes_parts_run_first_in_its_namespace_and_a_missing_part_is_said(tmp_path):
    """A long probe in parts (stacks.py and its _stacks_proc.py): each part beside it is sent
    before it and run in its namespace, under its own file name; a part that is not there is
    refused when the probe is read, with the file that names it."""
    import subprocess
    import sys

    from sleuth.probes import ProbeError, ProgramSpec, build_program, probe_from_file

    (tmp_path / "_helper.py").write_text("def helped():\n    return 'from the part'\n")
    (tmp_path / "p.py").write_text('PROBE = {"id": "p", "parts": ["_helper.py"]}\nemit("result", said=helped())\n')
    probe = probe_from_file(tmp_path / "p.py")
    assert [name for name, _text in probe.part_sources] == ["_helper.py"]
    program = build_program(ProgramSpec(probe="p", source=probe.source, filename="p.py", parts=probe.part_sources),
                            "n0nce")
    ran = subprocess.run([sys.executable, "-"], input=program, capture_output=True, timeout=60)
    records = [json.loads(line.split(b" ", 1)[1]) for line in ran.stdout.splitlines() if line.startswith(b"@@sleuth:n0nce ")]
    assert {"kind": "result", "said": "from the part"}.items() <= next(r for r in records if r["kind"] == "result").items(), records
    (tmp_path / "q.py").write_text('PROBE = {"id": "q", "parts": ["_gone.py"]}\n')
    with pytest.raises(ProbeError, match=r"q\.py: PROBE's part _gone\.py is not a file beside it"):
        probe_from_file(tmp_path / "q.py")
    stacks = probe_from_file(Path(__file__).parents[2] / "probes" / "scripts" / "stacks.py")
    assert [name for name, _text in stacks.part_sources] == ["_stacks_proc.py", "_stacks_spy.py", "_stacks_spawn.py", "_stacks_hook.py", "_stacks_fr.py"]

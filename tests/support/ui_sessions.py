"""Workspaces and recorded sessions for the UI tests: real session files, written through
``Investigation``, with timestamps made fixed (export → rewrite times → import) so that the
screens render the same on every run."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from sleuth.hypotheses import load_catalog
from sleuth.probes import builtin_probes
from sleuth.sessions import Investigation, Workspace, dump_export, import_session

from support.sessions import env_state

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "drafter"
T0 = 1_790_000_000.0

HF_CONFIG = ["LlamaConfig {"] + [f'  "{k}": {v},' for k, v in [
    ("architectures", '["LlamaForCausalLM"]'), ("attention_bias", "false"), ("bos_token_id", 128000),
    ("eos_token_id", 128001), ("hidden_act", '"silu"'), ("hidden_size", 4096), ("intermediate_size", 14336),
    ("max_position_embeddings", 131072), ("num_attention_heads", 32), ("num_hidden_layers", 32),
    ("num_key_value_heads", 8), ("rms_norm_eps", "1e-05"), ("rope_theta", 500000.0),
    ("torch_dtype", '"bfloat16"'), ("transformers_version", '"4.57.1"'), ("vocab_size", 128256),
]] + ['  "use_cache": true', "}"]
WARNING = [
    "/root/venv/lib/python3.11/site-packages/torch/nn/attention/flex_attention.py:1459: UserWarning: flex_attention called without torch.compile()",
    "  warnings.warn(",
]
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/root/dflash/train.py", line 88, in drafter',
    "    out = compiled_flex(q, k, v, block_mask=mask)",
    '  File "/root/venv/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py", line 745, in _fn',
    "    raise RuntimeError(",
    "RuntimeError: Detected that you are using FX to symbolically trace a dynamo-optimized function. This is not supported at the moment.",
]
RACE_FAIL = {"threads": 4, "race": "fx-trace", "cold_cache": True, "calls": 200, "fx_trace_errors": 37,
             "errors_total": 37, "control_fx_trace_errors": 0, "failed_trials": 1, "trials": 1, "control_failed": 0,
             "control_same_failure": 0}


def race_output() -> list[str]:
    lines = ["loading drafter config"] + HF_CONFIG + ["starting 4 drafter threads"]
    lines += WARNING * 50
    lines += [f"step {i}: loss {2.5 - i / 100:.3f}" for i in range(12)]
    return lines + TRACEBACK


def make_workspace(root: Path, python: str | None = None, drafter: bool = True) -> Workspace:
    """A project dir: sleuth.toml with the local target (and the example drafter as its code)."""
    root.mkdir(parents=True, exist_ok=True)
    if drafter:
        shutil.copytree(EXAMPLE, root / "drafter", ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    py = python or sys.executable
    (root / "sleuth.toml").write_text(
        f'[targets.local]\npython = "{py}"\ncode = {{ local = "drafter" }}\n\n'
        '[probes.compile-race]\nentry = "drafter/train.py"\ntrials = 1\nargs = ["--steps", "6"]\n',
        encoding="utf-8",
    )
    return Workspace(root)


def _run(
    inv: Investigation, probe: str, lines: list[str], records: list[dict], state: dict | None,
    err: list[str] = (), params: dict | None = None, definition: dict | None = None,
) -> int:
    check = inv.check_before_run(probe, params or {}, "local", definition=definition)
    start = inv.begin_run(probe, params or {}, "local", check=check)
    cap = inv.capture(start.run)
    for line in lines:
        cap.write("stdout", (line + "\n").encode())
    for line in err:
        cap.write("stderr", (line + "\n").encode())
    counts = cap.close()
    inv.finish_run(start.run, "completed", "done record received, exit status 0", records + [{"kind": "done"}], state, counts, exit_status=0)
    return start.run


def recorded_hunt(path: Path, definition: dict | None = None) -> Path:
    """A hunt in a session file at *path*, every timestamp fixed: the race reproduced (with a
    config dump, 50 repeated warnings and the traceback in its output), a fingerprint, a
    baseline, a circular retest, a cache inventory, a note."""
    scratch = path.with_name(path.name + ".scratch")
    scratch.unlink(missing_ok=True)
    inv = Investigation.create(scratch, "drafter race", load_catalog())
    inv.add_symptom("fx-trace-error")
    s = env_state()
    _run(inv, "compile-race", race_output(), [{"kind": "result", **RACE_FAIL}], s, err=TRACEBACK, definition=definition)
    fp = {"has_baseline": False, "drift": 0, "fingerprint": {"torch": "2.11.0+cu128"}}
    _run(inv, "env-fingerprint", ["torch 2.11.0+cu128", "triton 3.5.0"], [{"kind": "result", **fp}], s, definition=definition)
    inv.mark_baseline(2)
    checked = {**fp, "has_baseline": True}
    params = {**builtin_probes()["env-fingerprint"].params, "baseline_run": 2}  # as the UI's request has them
    for _ in range(2):  # the second is a circular retest of the first
        _run(inv, "env-fingerprint", ["torch 2.11.0+cu128", "triton 3.5.0"], [{"kind": "result", **checked}], s,
             params=params, definition=definition)
    _run(inv, "cache-inventory", ["inductor: 12 entries"], [{"kind": "result", "cold": False, "keys_match": True, "entries": 12}], s,
         definition=definition)
    inv.add_note("the fingerprint matches the baseline: not drift", about="version-drift")
    doc = inv.export_json()
    inv.close()
    scratch.unlink()
    for i, event in enumerate(doc["events"]):
        event["ts"] = T0 + 30.0 * i
    for run, out in doc["outputs"].items():
        start = next(e["ts"] for e in doc["events"] if e["kind"] == "run.started" and e["data"]["run"] == int(run))
        for j, chunk in enumerate(out["chunks"]):
            chunk[1] = start + 0.01 * j
    import_session(json.loads(dump_export(doc)), path)
    return path

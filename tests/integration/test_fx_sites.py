"""fx-trace-state's compile sites on real torch: every torch.compile that ran (the user's own,
a library's, torch's own inside create_block_mask with the frame outside torch that reached
it), the flex_attention calls that ran uncompiled, and how the entry ended (exit status,
threads that died) — on a plain threaded script of our own and on a drafter built on
HuggingFace transformers (tests/fixtures/hf_drafter, as a user writes one), where the compile
lives inside the library and threads fall back to uncompiled flex_attention."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.cli import sleuth

ROOT = Path(__file__).resolve().parents[2]

PLAIN = '''\
import sys
import threading

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


@torch.compile(dynamic=False)
def attend(q, k, v, mask):
    return flex_attention(q, k, v, block_mask=mask)


def work(i):
    q = k = v = torch.randn(1, 2, 128, 16)
    mask = create_block_mask(causal, None, None, 128, 128, device="cpu")
    for _ in range(STEPS):
        attend(q, k, v, mask)


STEPS = int(sys.argv[1])
threads = [threading.Thread(target=work, args=(i,), name=f"worker-{i}") for i in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("done")
'''

DIES = '''\
import threading

import torch
from torch.nn.attention.flex_attention import flex_attention


def work(i):
    q = k = v = torch.randn(1, 2, 32, 8)
    flex_attention(q, k, v)
    if i:
        raise ValueError(f"worker {i} gives up")


threads = [threading.Thread(target=work, args=(i,), name=f"worker-{i}") for i in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
raise KeyError("the main thread too")
'''


@pytest.fixture
def project(make_project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # a cold compile cache, as on a first run (the hf drafter's threads compile concurrently then)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    return make_project("hunt")


def probe(project: Path, entry: str, *args: str) -> tuple[dict, dict, str, str]:
    """(the run, its result, its compile-sites sentence, its stderr)."""
    run = json.loads(sleuth(project, "probe", "run", "fx-trace-state", "--param", f"entry={entry}",
                            "--param", f"args={json.dumps(list(args))}", "--json", timeout=600).stdout)
    assert run["classification"] == "completed", run["reason"]
    (result,) = [r for r in run["records"] if r["kind"] == "result"]
    (finding,) = [r for r in run["records"] if r["kind"] == "finding" and r.get("finding") == "compile-sites"]
    stderr = sleuth(project, "output", str(run["run_id"]), "--stream", "stderr").stdout
    print(json.dumps({k: v for k, v in result.items() if k != "shapes"}, indent=1))
    print(finding["text"])
    return run, result, finding["text"], stderr


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if line.startswith(text))


@pytest.mark.torch
@pytest.mark.slow
def test_a_compiled_function_that_calls_flex_attention_in_three_threads(project):
    (project / "train.py").write_text(PLAIN)
    run, result, said, _ = probe(project, "train.py", "4")
    (site,) = result["sites"]
    assert site == {
        "site": f"__main__:{line_of(PLAIN, '@torch.compile')}", "file": str(project / "train.py"),
        "line": line_of(PLAIN, "@torch.compile"), "target": "attend", "kind": "compile", "reached_from": None,
        "library": None, "compiles": 1, "compiled_calls": 12, "uncompiled_calls": None,
        "flex_inside": site["flex_inside"],
    }
    assert site["flex_inside"] >= 1  # dynamo traced flex_attention into attend's graph
    # every call of attend runs a compiled flex_attention: counted, per thread, none uncompiled
    assert result["calls"] == 12 and result["uncompiled_calls"] == 0 and result["flex_calls"] == 12
    assert result["threads"] == ["worker-0", "worker-1", "worker-2"]
    assert result["exit"] == 0 and result["threads_died"] == 0 and result["died_of"] == {}
    assert result["said"] == "train.py exited 0, no thread died"
    assert said.startswith(f"attend is compiled at train.py:{site['line']} (1 compile, 12 compiled calls")
    assert said.endswith("no flex_attention call ran uncompiled.")
    assert "never called" not in json.dumps(run)
    # no uncompiled call: nothing for dense fallback, and nothing against it (one run; says what would)
    fallback = next(e for e in run["evidence"] if e["hypothesis"] == "dense-fallback")
    assert fallback["verdict"] == "inconclusive" and "would settle" in fallback["why"], fallback


@pytest.mark.torch
@pytest.mark.slow
def test_uncompiled_calls_and_deaths_are_said_and_the_main_thread_error_is_not_raised(project):
    (project / "dies.py").write_text(DIES)
    _, result, said, stderr = probe(project, "dies.py")
    call = line_of(DIES, "    flex_attention(q, k, v)")
    assert result["calls"] == 0 and result["uncompiled_calls"] == 3 and result["flex_calls"] == 3
    eager = [s for s in result["sites"] if s["kind"] == "eager"]
    assert eager == [{"site": f"__main__:{call}", "file": str(project / "dies.py"), "line": call,
                      "target": "flex_attention", "kind": "eager", "reached_from": None, "library": None,
                      "compiles": None, "compiled_calls": None, "uncompiled_calls": 3, "flex_inside": None}]
    # uncompiled flex_attention compiles a wrapper of its own inside torch: said, reached from the caller
    for s in result["sites"]:
        if s["kind"] == "compile":
            assert s["library"] == "torch" and s["reached_from"] == f"__main__:{call}", s
    assert result["exit"] == 1 and result["main_error"] == "KeyError"
    assert result["threads_died"] == 3 and result["died_of"] == {"ValueError": 2, "KeyError": 1}
    assert result["said"] == "dies.py exited 1: 3 threads died (ValueError ×2, KeyError ×1), the main thread among them"
    assert f"3 flex_attention calls ran uncompiled, from dies.py:{call} (3)" in said
    # as Python prints them: both threads' tracebacks and the main thread's
    assert stderr.count("ValueError: worker") == 2 and "Exception in thread worker-1" in stderr
    assert "KeyError: 'the main thread too'" in stderr


@pytest.mark.torch
@pytest.mark.slow
def test_the_hf_drafter_compiles_inside_transformers_and_falls_back_uncompiled(project):
    import transformers  # noqa: F401  # the dev extra installs it: missing, this fails rather than skips

    shutil.copy(ROOT / "tests" / "fixtures" / "hf_drafter" / "train.py", project / "train.py")
    run, result, said, stderr = probe(project, "train.py", "--workers", "3")
    sites = result["sites"]
    print(json.dumps(sites, indent=1))
    # the compile is the library's: its flex_attention is compiled at
    # transformers/integrations/flex_attention.py (WrappedFlexAttention) or, while another
    # thread compiles, called uncompiled from the same file (compile_friendly_flex_attention)
    hf = [s for s in sites if s["file"].endswith("transformers/integrations/flex_attention.py")]
    assert hf and all(s["library"] == "transformers" and s["target"] == "flex_attention" for s in hf), sites
    assert all(s["site"].startswith("transformers.integrations.flex_attention:") for s in hf), hf
    # create_block_mask(_compile=True) compiles inside torch, reached from transformers' masking_utils
    masks = [s for s in sites if s["target"] == "create_block_mask"]
    assert masks and all(s["kind"] == "compile" and s["library"] == "torch" for s in masks), sites
    assert all(s["file"].endswith("torch/nn/attention/flex_attention.py") for s in masks), masks
    assert all((s["reached_from"] or "").startswith("transformers.masking_utils:") for s in masks), masks
    assert sum(s["compiles"] for s in masks) >= 1
    assert "create_block_mask is compiled at" in said or " and create_block_mask at" in said or \
        ", create_block_mask at" in said
    assert "reached from transformers.masking_utils:" in said
    # the fixture fails as without sleuth: exit 1, drafter threads dead of the kernels TypeError
    assert result["exit"] == 1 and result["threads_died"] >= 1, result
    assert sum(result["died_of"].values()) == result["threads_died"] and "TypeError" in result["died_of"]
    assert result["said"].startswith("train.py exited 1: ") and "died (TypeError" in result["said"]
    assert "expected an instance of Token" in stderr and "Exception in thread drafter-" in stderr
    assert "drafters failed" in stderr  # the entry's SystemExit message, printed as Python does
    # uncompiled calls counted at their site (how many depends on the threads' timing)
    eager = [s for s in sites if s["kind"] == "eager"]
    assert result["uncompiled_calls"] == sum(s["uncompiled_calls"] for s in eager)
    assert all(s["site"].startswith("transformers.integrations.flex_attention:") for s in eager), eager
    assert result["flex_calls"] == result["calls"] + result["uncompiled_calls"] > 0
    assert "never called" not in json.dumps(run)
    # an uncompiled call in the job itself is the dense path: evidence for dense fallback, measured
    fallback = next(e for e in run["evidence"] if e["hypothesis"] == "dense-fallback")
    if result["uncompiled_calls"]:
        assert fallback["verdict"] == "supports", fallback
        assert fallback["why"] == f"uncompiled_calls > 0 (uncompiled_calls {result['uncompiled_calls']})", fallback
    else:
        assert fallback["verdict"] == "inconclusive" and "would settle" in fallback["why"], fallback

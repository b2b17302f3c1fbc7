"""Issue 34: cache invalidation measured by inductor's own counters, on real torch on CPU.

One project, one cache folder of its own (the target's env), driven as a user would with
`sleuth probe run compile-cache`: a cold first look is inconclusive; a warm one hits and
refutes; an inductor option set in the target's env misses and names that option; the cache
wiped by hand misses with the same key (the entry is gone) and supports. Each compile is the
probe's small built-in function (a few seconds on CPU)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from support.cli import sleuth, verdicts


def run(d: Path, *more: str, code: int = 0) -> dict:
    proc = sleuth(d, "probe", "run", "compile-cache", "--json", *more, check=code, timeout=300)
    return json.loads(proc.stdout)


def result(data: dict) -> dict:
    (rec,) = [r for r in data["records"] if r["kind"] == "result"]
    return rec


def config(d: Path, cache: Path, **env: str) -> None:
    pairs = ", ".join(f'{k} = "{v}"' for k, v in {"TORCHINDUCTOR_CACHE_DIR": str(cache), **env}.items())
    (d / "sleuth.toml").write_text(f'[targets.local]\npython = "{sys.executable}"\nenv = {{ {pairs} }}\n')


@pytest.mark.slow
def test_compile_cache_counts_hits_and_misses_and_names_what_changed_in_the_key(tmp_path):
    d = tmp_path / "proj"
    d.mkdir()
    sleuth(d, "init")
    cache = tmp_path / "inductor-cache"
    config(d, cache)

    cold = run(d)
    r = result(cold)
    assert (r["hits"], r["misses"], r["bypasses"]) == (0, 1, 0) and r["cold"] and r["changed"] == []
    assert r["cache_dir"] == str(cache) and r["compiles"] and r["compiles"][0]["key"]
    assert verdicts(cold) == [{"hypothesis": "cache-invalidation", "verdict": "inconclusive"}]

    warm = run(d)
    r = result(warm)
    assert (r["hits"], r["misses"]) == (1, 0) and not r["cold"]
    assert verdicts(warm) == [{"hypothesis": "cache-invalidation", "verdict": "refutes"}]

    config(d, cache, TORCHINDUCTOR_MAX_AUTOTUNE="1")  # one inductor option set in the target's env
    tuned = run(d)
    r = result(tuned)
    assert (r["hits"], r["misses"]) == (0, 1), r
    assert r["changed"] == ["inductor config"] and r["compared_with"] == warm["run_id"], r
    (change,) = r["changes"]
    assert "max_autotune" in change["options"] and "max_autotune 'False' → 'True'" in change["text"]
    assert verdicts(tuned) == [{"hypothesis": "cache-invalidation", "verdict": "supports"}]
    assert not any(k["id"] == "pytorch#101027" for k in tuned["known"]), tuned["known"]  # not torch: not said
    assert {"name": "env TORCHINDUCTOR_MAX_AUTOTUNE", "before": None, "after": "1"} in tuned["state_changes"]

    config(d, cache)
    shutil.rmtree(cache)  # wiped by hand: the state #1 ran in (no cache yet), so sleuth asks for --force
    assert "back to the state of #1" in sleuth(d, "probe", "run", "compile-cache", check=3).stderr
    wiped = run(d, "--force")
    r = result(wiped)
    assert r["misses"] == 1 and r["wiped"] and r["changed"] == [], r
    assert verdicts(wiped) == [{"hypothesis": "cache-invalidation", "verdict": "supports"}]

    sleuth(d, "export", "-o", "pm.md")  # the postmortem says the counters per run and what changed
    pm = (d / "pm.md").read_text()
    assert "## Compile cache, measured" in pm
    assert f"| #{tuned['run_id']} | local | 0 / 1 / 0 |" in pm and "max_autotune 'False' → 'True'" in pm
    assert f"| #{warm['run_id']} | local | 1 / 0 / 0 |" in pm and "the entry is gone" in pm


def test_a_changed_torch_in_the_key_is_named_with_both_versions_and_says_pytorch_101027():
    """The comparison on inductor's own key parts (recorded from a real 2.13.0+cpu compile):
    another torch_version hash with another version is "torch" with both versions."""
    from sleuth.hypotheses.cache_keys import compare

    parts = {"gm": ["g1", ""], "torch_version": ["t1", ""], "inductor_config[max_autotune]": ["c1", "False"],
             "system_info[hash]": ["s1", "x"]}
    before = {"compiles": [{"kind": "autograd", "key": "k1", "parts": parts}],
              "torch": {"version": "2.13.0+cpu", "git": "aaa"}, "system": {"triton": None, "device": "cpu"}}
    after = {"compiles": [{"kind": "autograd", "key": "k2", "parts": {**parts, "torch_version": ["t2", ""],
                                                                      "system_info[hash]": ["s2", "y"],
                                                                      "inductor_config[new_in_2_14]": ["n1", "0"]}}],
             "torch": {"version": "2.14.1+cu130", "git": "bbb"}, "system": {"triton": "3.6.0", "device": "cpu"}}
    changes, same = compare(before, after)
    assert not same
    by = {c["part"]: c for c in changes}
    assert by["torch"]["before"] == "2.13.0+cpu" and by["torch"]["after"] == "2.14.1+cu130"
    assert by["torch"]["text"] == "torch 2.13.0+cpu → 2.14.1+cu130"
    assert by["triton"]["text"] == "triton None → 3.6.0"
    assert "inductor config" not in by  # an option only the new torch has came with it: not a change of its own
    from sleuth.hypotheses.rules import compile_rule

    rule = compile_rule('"torch" in changed')  # the catalog's rule for pytorch#101027
    assert rule.evaluate({"changed": list(by)}) and not rule.evaluate({"changed": ["inductor config"]})


OTHER = os.environ.get("SLEUTH_OTHER_TORCH_PYTHON")  # .ci/run's second-torch stage sets it: the 2.13.0+cpu venv


@pytest.mark.slow
@pytest.mark.skipif(not OTHER, reason="needs a second torch's python in SLEUTH_OTHER_TORCH_PYTHON (CI's second stage)")
def test_another_torch_on_the_same_cache_folder_misses_and_names_torch_with_both_versions(tmp_path):
    """Two real torches (2.13.0+cpu and the one running this test) on one cache folder: the
    miss after a hit names "torch" with both versions, supports, and says pytorch#101027."""
    import subprocess

    def version(python: str) -> str:
        return subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                              text=True, check=True).stdout.strip()

    assert OTHER is not None
    other, here = version(OTHER), version(sys.executable)
    assert other != here, (other, here)
    d = tmp_path / "proj"
    d.mkdir()
    sleuth(d, "init")
    cache = tmp_path / "shared-cache"
    for python in (OTHER, OTHER):
        (d / "sleuth.toml").write_text(f'[targets.local]\npython = "{python}"\n'
                                       f'env = {{ TORCHINDUCTOR_CACHE_DIR = "{cache}" }}\n')
        run(d, "--force")
    (d / "sleuth.toml").write_text(f'[targets.local]\npython = "{sys.executable}"\n'
                                   f'env = {{ TORCHINDUCTOR_CACHE_DIR = "{cache}" }}\n')
    switched = run(d)
    r = result(switched)
    assert r["misses"] >= 1 and "torch" in r["changed"], r
    torch_change = next(c for c in r["changes"] if c["part"] == "torch")
    assert (torch_change["before"], torch_change["after"]) == (other, here)
    assert verdicts(switched) == [{"hypothesis": "cache-invalidation", "verdict": "supports"}]
    assert "pytorch#101027" in [k["id"] for k in switched["known"]]


TRAIN_WITH_A_PASS = '''\
import torch
import torch._inductor.config as inductor_config


def count_nodes(graph):  # a post-grad pass as a plain function, the way a blog post shows it
    return None


inductor_config.post_grad_custom_post_pass = count_nodes


@torch.compile
def step(x):
    return (x.sin() * 2).sum()


print(step(torch.randn(16)))
'''


@pytest.mark.slow
def test_a_compile_that_bypasses_the_cache_says_inductors_reason_and_judges_nothing(tmp_path):
    """The user's own script (--param entry=…) installs a custom post-grad pass that is no
    CustomGraphPass: inductor never caches such a graph. sleuth says so with inductor's reason,
    counts no miss, and neither supports nor refutes cache invalidation."""
    d = tmp_path / "proj"
    d.mkdir()
    sleuth(d, "init")
    (d / "train.py").write_text(TRAIN_WITH_A_PASS)
    config(d, tmp_path / "inductor-cache")
    data = run(d, "--param", "entry=train.py")
    r = result(data)
    assert (r["hits"], r["misses"], r["bypasses"]) == (0, 0, 1), r
    assert "Unsupported post grad custom pass" in r["bypass_reasons"], r["bypass_reasons"]
    assert r["said"] == ("1 compile bypassed the cache (inductor: Unsupported post grad custom pass): never cached, "
                         "so no entry of it can have been wiped or re-keyed"), r["said"]
    assert verdicts(data) == [{"hypothesis": "cache-invalidation", "verdict": "inconclusive"}]
    sleuth(d, "export", "-o", "pm.md")
    pm = (d / "pm.md").read_text()
    assert f"| #{data['run_id']} | local | 0 / 0 / 1 |" in pm and "inductor: Unsupported post grad custom pass" in pm


@pytest.mark.slow
def test_a_miss_is_compared_with_the_last_hit_in_the_same_folder_whichever_environment_wrote_it(tmp_path):
    """Two environments of the user's on one box (targets `train` and `eval`, the second with an
    inductor option of its own) and the entry's own cache folder, given as the entry's
    environment (the probe's `env`), not the target's: a hit in `train`, then `eval` misses and
    is compared with `train`'s hit in that folder, naming the option; no bypass reason is listed
    where inductor bypassed nothing."""
    d = tmp_path / "proj"
    d.mkdir()
    sleuth(d, "init")
    cache = tmp_path / "the-entrys-own-cache"
    (d / "sleuth.toml").write_text(
        f'[targets.train]\npython = "{sys.executable}"\n\n'
        f'[targets.eval]\npython = "{sys.executable}"\nenv = {{ TORCHINDUCTOR_MAX_AUTOTUNE = "1" }}\n\n'
        f'[probes.compile-cache]\nenv = {{ TORCHINDUCTOR_CACHE_DIR = "{cache}" }}\n')
    run(d, "--target", "train")
    warm = run(d, "--target", "train")
    r = result(warm)
    assert (r["hits"], r["misses"], r["cache_dir"]) == (1, 0, str(cache)), r
    assert r["bypass_reasons"] == [] and r["host"], r

    other = run(d, "--target", "eval")
    r = result(other)
    assert (r["hits"], r["misses"], r["cache_dir"]) == (0, 1, str(cache)), r
    assert r["bypass_reasons"] == [] and not r["cold"], r
    assert (r["compared_with"], r["compared_target"], r["changed"]) == (warm["run_id"], "train", ["inductor config"]), r
    assert f"since #{warm['run_id']}, which hit on target train, in the same cache folder" in r["said"], r["said"]
    assert verdicts(other) == [{"hypothesis": "cache-invalidation", "verdict": "supports"}]

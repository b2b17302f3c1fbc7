"""The lock remedy on the forms real code uses (tests/fixtures/lock_forms/, each written after
reading public code; MANIFEST.toml says which): the sites it must lock, what it lists as left
unlocked, and for each file apply → parses → apply again changes nothing → revert is
byte-identical — one file at a time, and the whole folder as one tree application."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest
from sleuth.probes.remedies import apply_plan, preview, revert
from sleuth.sessions import apply_tree, plan_tree, revert_tree

FORMS = Path(__file__).parents[1] / "fixtures" / "lock_forms"
MANIFEST = tomllib.loads((FORMS / "MANIFEST.toml").read_text())["form"]


def test_the_manifest_covers_every_fixture_and_names_its_sources():
    assert sorted(f["file"] for f in MANIFEST) == sorted(p.name for p in FORMS.glob("*.py"))
    assert all(f["learned_from"] for f in MANIFEST), MANIFEST


@pytest.mark.parametrize("form", MANIFEST, ids=lambda f: f["file"])
def test_each_form_is_locked_or_listed_and_reverts_exactly(tmp_path, form):
    path = tmp_path / form["file"]
    shutil.copy(FORMS / form["file"], path)
    original = path.read_bytes()
    plan = preview("lock", path)
    assert not plan.blocked, plan.blocked
    after = plan.after.decode()
    for line in form["wrapped"]:
        assert line in after, (line, after)
    left = [f for f in plan.findings if f.get("left_unlocked")]
    assert len(left) == form["left"], left
    assert all(f["line"] and f["what"] for f in left), left  # file:line and why
    record = apply_plan(plan)
    compile(path.read_bytes(), str(path), "exec")  # the remedied file parses
    again = preview("lock", path)
    assert not again.changes  # applying twice changes nothing
    revert(path, original, record["after_sha"])
    assert path.read_bytes() == original


def test_the_whole_folder_is_one_application_and_one_revert(tmp_path, inv):
    tree = tmp_path / "code"
    shutil.copytree(FORMS, tree)
    originals = {p.name: p.read_bytes() for p in tree.glob("*.py")}
    plan = plan_tree(inv, "lock", tree)
    changed = {Path(p.path).name for p in plan.plans if p.changes}
    assert changed == {f["file"] for f in MANIFEST if f["wrapped"]}
    app = apply_tree(inv, plan)
    assert len(inv.state.applications[app].files) == len(changed)
    assert apply_tree(inv, plan_tree(inv, "lock", tree)) is None  # nothing left to change
    revert_tree(inv, tree)
    assert {p.name: p.read_bytes() for p in tree.glob("*.py")} == originals
    assert not inv.state.applications[app].active


@pytest.mark.slow
def test_a_compiled_model_stays_a_module_and_its_forward_takes_the_one_lock(tmp_path):
    import subprocess
    import sys

    src = tmp_path / "train.py"
    src.write_text(
        "import threading\n"
        "import torch\n"
        "from torch import nn\n\n\n"
        "class Probe(nn.Module):\n"
        "    def forward(self, x):\n"
        "        held.append(threading._sleuth_remedy_lock._is_owned())\n"
        "        return x * 2\n\n\n"
        "held = []\n"
        "model = torch.compile(Probe(), backend='eager')\n"
        "out = model(torch.ones(2))\n"
        "print(isinstance(model, nn.Module), list(model.parameters()) == [], float(out.sum()), held)\n"
    )
    plan = preview("lock", src)
    assert "model = _sleuth_serialized(torch.compile(Probe(), backend='eager'))" in plan.after.decode()
    apply_plan(plan)
    got = subprocess.run([sys.executable, str(src)], capture_output=True, text=True, timeout=300)
    assert got.stdout.strip() == "True True 4.0 [True]", got.stderr[-2000:]

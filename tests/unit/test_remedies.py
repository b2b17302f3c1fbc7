"""The lock and precompile codemods on the forms real code uses (no torch needed)."""

from __future__ import annotations

import textwrap

import pytest
from sleuth.probes.remedies import RemedyError, apply_plan, preview, revert
from sleuth.probes.remedies.lock import lock_transform


def lock(src: str) -> tuple[str, list]:
    new, found, _ = lock_transform(textwrap.dedent(src))
    return new, found.items


def test_module_level_compile_and_alias_and_from_torch_import_compile():
    new, found = lock(
        """
        from torch import compile as tc
        from torch.nn.attention.flex_attention import flex_attention as fa, create_block_mask as cbm
        flex = tc(fa, dynamic=False)  # keep this comment
        def attn(q, k, v, mask_mod, s):
            m = cbm(mask_mod, None, None, s, s, _compile=True)
            return flex(q, k, v, block_mask=m)
        """
    )
    assert "flex = _sleuth_serialized(tc(fa, dynamic=False))  # keep this comment" in new
    assert "m = _sleuth_serialized(cbm)(mask_mod, None, None, s, s, _compile=True)" in new
    assert '_SLEUTH_LOCK = _sleuth_threading.__dict__.setdefault("_sleuth_remedy_lock", _sleuth_threading.RLock())' in new
    compile(new, "x.py", "exec")
    assert [f.handled for f in found] == [True, True]


def test_init_assignment_lazy_singleton_partial_and_decorator():
    new, found = lock(
        """
        import functools
        import torch
        from torch.nn.attention import flex_attention as fa_mod
        from torch.nn.attention.flex_attention import flex_attention

        class Attn:
            def __init__(self):
                self.kernel = torch.compile(functools.partial(flex_attention, enable_gqa=True))

        _compiled = None
        def get_flex():
            global _compiled
            if _compiled is None:
                _compiled = torch.compile(fa_mod.flex_attention)
            return _compiled

        @torch.compile(dynamic=False)
        def my_attention(q, k, v):
            return flex_attention(q, k, v)
        """
    )
    assert "self.kernel = _sleuth_serialized(torch.compile(functools.partial(flex_attention, enable_gqa=True)))" in new
    assert "_compiled = _sleuth_serialized(torch.compile(fa_mod.flex_attention))" in new
    assert "@_sleuth_serialized\n@torch.compile(dynamic=False)\ndef my_attention" in new
    assert len(found) == 3


def test_tracing_sites_and_transformers_wrapper():
    new, found = lock(
        """
        import torch
        import torch.fx
        from torch.fx.experimental.proxy_tensor import make_fx
        from torchvision.models.feature_extraction import create_feature_extractor
        from transformers.integrations.flex_attention import compile_friendly_flex_attention

        def features(model, x):
            gm = torch.fx.symbolic_trace(model)
            fe = create_feature_extractor(model, ["layer1"])
            ep = torch.export.export(model, (x,))
            g2 = make_fx(model)(x)
            return compile_friendly_flex_attention(x, x, x)
        """
    )
    for line in (
        "gm = _sleuth_serialized(torch.fx.symbolic_trace)(model)",
        'fe = _sleuth_serialized(create_feature_extractor)(model, ["layer1"])',
        "ep = _sleuth_serialized(torch.export.export)(model, (x,))",
        "g2 = _sleuth_serialized(make_fx(model))(x)",
        "return _sleuth_serialized(compile_friendly_flex_attention)(x, x, x)",
    ):
        assert line in new
    assert all(f.handled for f in found), found


def test_unhandled_form_is_reported_not_half_fixed(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "from torch.fx.experimental.proxy_tensor import make_fx\n"
        "import torch\nfrom torch.nn.attention.flex_attention import flex_attention\n"
        "flex = torch.compile(flex_attention)\n"
        "def f(m, x):\n    traced = make_fx(m)\n    return traced(x)\n"
    )
    plan = preview("lock", path)
    assert plan.blocked and "m.py:6: make_fx(…) kept for a later call" in plan.blocked[0]
    with pytest.raises(RemedyError, match="not applied"):
        apply_plan(plan)
    assert "sleuth" not in path.read_text()


def test_processes_are_said_to_need_no_lock():
    _new, found = lock(
        """
        import torch.multiprocessing as mp
        import torch
        from torch.nn.attention.flex_attention import flex_attention
        flex = torch.compile(flex_attention)
        def main():
            mp.spawn(worker, nprocs=4)
        """
    )
    assert any("processes, not threads" in f.what for f in found), found


def test_apply_is_atomic_idempotent_and_revert_is_byte_identical(tmp_path):
    path = tmp_path / "model.py"
    original = b"import torch\r\nfrom torch.nn.attention.flex_attention import flex_attention\r\n\r\n# weird  spacing   kept\r\nflex = torch.compile(flex_attention)\r\n"
    path.write_bytes(original)
    plan = preview("lock", path)
    record = apply_plan(plan)
    after = path.read_bytes()
    assert after != original and record["after_sha"] == plan.after_sha
    assert b"# weird  spacing   kept" in after
    again = preview("lock", path)
    assert not again.changes and not again.blocked  # applying twice changes nothing
    assert apply_plan(again).get("unchanged")
    revert(path, original, record["after_sha"])
    assert path.read_bytes() == original


def test_file_changed_since_preview_is_refused(tmp_path):
    path = tmp_path / "model.py"
    path.write_text("import torch\nfrom torch.nn.attention.flex_attention import flex_attention\nflex = torch.compile(flex_attention)\n")
    plan = preview("lock", path)
    path.write_text(path.read_text() + "# edited meanwhile\n")
    with pytest.raises(RemedyError, match="changed since the preview"):
        apply_plan(plan)


def test_revert_refuses_a_file_edited_after_the_remedy(tmp_path):
    path = tmp_path / "model.py"
    path.write_text("import torch\nfrom torch.nn.attention.flex_attention import flex_attention\nflex = torch.compile(flex_attention)\n")
    original = path.read_bytes()
    record = apply_plan(preview("lock", path))
    path.write_text(path.read_text() + "# user edit\n")
    with pytest.raises(RemedyError, match="changed since the remedy was applied"):
        revert(path, original, record["after_sha"])


def test_precompile_needs_shapes_and_a_thread_start(tmp_path):
    path = tmp_path / "train.py"
    path.write_text("import threading\nprint('hi')\n")
    assert "no shapes" in preview("precompile", path).blocked[0]
    spec = {"q": {}, "block_mask": {"mask_mod": "m", "mask_module": "__main__"}, "compiled": "train:1"}
    assert "cannot find the module-level torch.compile" in preview("precompile", path, shapes=[spec]).blocked[0]
    path.write_text(
        "import torch\nfrom torch.nn.attention.flex_attention import flex_attention\nimport torch.multiprocessing as mp\n"
        "flex = torch.compile(flex_attention)\ndef m(b, h, q, kv):\n    return q >= kv\ndef main():\n    mp.spawn(main, nprocs=2)\n"
    )
    plan = preview("precompile", path, shapes=[spec])
    assert plan.blocked and "workers here are processes" in plan.blocked[0]



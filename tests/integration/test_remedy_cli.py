"""A remedy's settings in sleuth.toml, through `sleuth remedy preview` as a user runs it: the
precompile remedy takes its shapes from [remedies.precompile], a wrong key is exit 2 with the
file and the key. The transforms themselves are tests/unit/test_remedies.py."""

from __future__ import annotations

from pathlib import Path


def test_precompile_takes_its_shapes_from_sleuth_toml(tmp_path):
    import shutil

    import tomlkit
    from support.cli import sleuth

    tensor = {"shape": [1, 4, 128, 16], "stride": [24576, 16, 192, 1], "dtype": "float32", "device": "cpu",
              "requires_grad": False}
    spec = {"q": tensor, "k": tensor, "v": tensor, "grad": False, "compiled": "model:20",
            "block_mask": {"q_len": 128, "kv_len": 128, "B": 1, "H": 1, "block_size": [128, 128],
                           "mask_mod": "sliding_window", "mask_module": "model"}}
    shutil.copytree(Path(__file__).resolve().parents[2] / "examples" / "drafter", tmp_path / "drafter")
    sleuth(tmp_path, "init")
    with open(tmp_path / "sleuth.toml", "a") as fh:
        fh.write("\n" + tomlkit.dumps({"remedies": {"precompile": {"shapes": [spec]}}}))
    out = sleuth(tmp_path, "remedy", "preview", "precompile", "drafter/train.py").stdout
    assert "+_SLEUTH_SHAPES = [" in out and "'mask_mod': 'sliding_window'" in out and "1 shape(s) to precompile" in out
    (tmp_path / "sleuth.toml").write_text((tmp_path / "sleuth.toml").read_text() + '\n[remedies.lock]\nshapes = "x"\n')
    bad = sleuth(tmp_path, "remedy", "preview", "lock", "drafter/model.py", check=2)
    assert "sleuth.toml:" in bad.stderr and "remedies.lock.shapes" in bad.stderr

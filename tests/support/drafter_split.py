"""The example drafter split across modules, as real training code is: the feature extractor
(the FX tracing site) moved to features.py; train.py still imports it through model.py.
Used by tests/integration/test_drafter_race.py, tests/unit/test_ui.py and bench/remedy_overhead.py."""

from __future__ import annotations

from pathlib import Path


def split(drafter: Path) -> None:
    """Rewrite the drafter copy at *drafter* (a folder with model.py and train.py) in place."""
    model = drafter / "model.py"
    text = model.read_text()
    head, _, extractor = text.partition("\n\ndef extract_features(")
    model.write_text(head.replace("from torch.fx.experimental.proxy_tensor import make_fx\n", "")
                     + "\n\nfrom features import extract_features  # noqa: E402,F401  (the tracing site lives there)\n")
    (drafter / "features.py").write_text(
        '"""Target-side feature extraction: FX-traces the target model."""\n\n'
        "import torch\nfrom torch import nn\nfrom torch.fx.experimental.proxy_tensor import make_fx\n\n\n"
        "def extract_features(" + extractor
    )

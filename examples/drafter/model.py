"""A small speculative-decoding drafter in the shape of the real one (DFlash/SpecForge).

The drafter attends with flex_attention under a sliding-window block mask that is built
again on every forward (the real code calls create_block_mask per step with the step's
lengths), through one module-level compiled flex_attention. The target side hands it
hidden states through a feature extractor that FX-traces the target model — the site
that races with the drafter threads.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

WINDOW = 64

# The compiled kernel every drafter thread calls.
compiled_flex = torch.compile(flex_attention, dynamic=False)


def sliding_window(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx <= WINDOW)


class DraftAttention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        mask = create_block_mask(sliding_window, None, None, s, s, device=x.device)
        y = compiled_flex(q, k, v, block_mask=mask)
        return self.out(y.transpose(1, 2).reshape(b, s, d))


class Drafter(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4, vocab: int = 512) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.attn = DraftAttention(dim, heads)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + hidden
        return self.head(x + self.attn(x))


class TargetModel(nn.Module):
    """Stands in for the big target model whose hidden states the drafter learns from."""

    def __init__(self, dim: int = 64, layers: int = 8) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


def extract_features(target: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Target-side feature extraction through an FX graph of the target's forward:
    tracing sets torch's process-global FX tracing flag while it runs."""
    with torch.no_grad():
        graph_module = make_fx(target)(x)
        return graph_module(x)

# pyright: reportPossiblyUnboundVariable=false
# (emit and params come from the prelude sleuth sends first; run standalone, emit from probes/far/common.py)
"""Dense fallback check: time (and, on CUDA, peak memory) of one compiled vs uncompiled
flex_attention call at the given shapes, and whether the program's calls look like the
compiled or the dense path."""

PROBE = {
    "id": "dense-fallback",
    "title": "time and peak memory of one compiled vs uncompiled flex_attention call",
    "timeout": 600,
    "cost": 20,
    "needs": ["torch"],
    "params": {"batch": 1, "heads": 4, "seq": 1024, "head_dim": 64, "window": 256, "dtype": "float32",
               "device": "auto", "repeats": 5, "observed_ms": None},
    "reports": ["compiled_ms", "eager_ms", "slowdown", "compiled_peak_mb", "eager_peak_mb", "observed", "fallback",
                "error_on_nested_fx_trace"],
}

if "emit" not in globals():  # run standalone: emit (JSON lines on stdout) from the far end's helper part
    import os
    import runpy

    _far = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "far", "common.py"))
    emit = _far["emit"]
    params = dict(PROBE["params"])

import time

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

P = {**PROBE["params"], **params}
device = ("cuda" if torch.cuda.is_available() else "cpu") if P["device"] == "auto" else P["device"]
dtype = getattr(torch, P["dtype"])
W = P["window"]


def sliding(b, h, q, kv):
    return (q >= kv) & (q - kv <= W)


def inputs():
    shape = (P["batch"], P["heads"], P["seq"], P["head_dim"])
    return [torch.randn(shape, device=device, dtype=dtype) for _ in range(3)]


def measure(fn, q, k, v, mask):
    fn(q, k, v, block_mask=mask)  # warm (compiles the compiled one)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    times = []
    for _ in range(P["repeats"]):
        t0 = time.perf_counter()
        fn(q, k, v, block_mask=mask)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1000)
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20 if device == "cuda" else None
    return sorted(times)[len(times) // 2], peak


q, k, v = inputs()
mask = create_block_mask(sliding, None, None, P["seq"], P["seq"], device=device)
compiled_ms, compiled_peak = measure(torch.compile(flex_attention), q, k, v, mask)
eager_ms, eager_peak = measure(flex_attention, q, k, v, mask)
observed = P.get("observed_ms")
fallback = None
if observed is not None:
    fallback = abs(observed - eager_ms) < abs(observed - compiled_ms)
emit(
    "result",
    device=device,
    shape=[P["batch"], P["heads"], P["seq"], P["head_dim"]],
    compiled_ms=round(compiled_ms, 4),
    eager_ms=round(eager_ms, 4),
    slowdown=round(eager_ms / compiled_ms, 2) if compiled_ms else None,
    compiled_peak_mb=None if compiled_peak is None else round(compiled_peak, 1),
    eager_peak_mb=None if eager_peak is None else round(eager_peak, 1),
    dense_scores_mb=round(P["batch"] * P["heads"] * P["seq"] ** 2 * torch.finfo(dtype).bits / 8 / 2**20, 1),
    observed=observed is not None,
    observed_ms=observed,
    fallback=fallback,
    error_on_nested_fx_trace=getattr(torch._dynamo.config, "error_on_nested_fx_trace", None),
)

# pyright: reportPossiblyUnboundVariable=false
# (emit and params come from the prelude sleuth sends first; run standalone, the file defines them)
"""FX-flag instrumentation: run the entry point with every compiled flex_attention wrapped
at run time (no source change) and record, per call, the thread, torch's FX tracing flag,
torch.compiler.is_compiling(), and the shapes; report tracing in one thread overlapping
compiled calls in another, and the shapes seen (the precompile remedy uses them)."""

PROBE = {
    "id": "fx-trace-state",
    "stochastic": True,  # observes thread timing: each run is a sample
    "title": "FX-flag instrumentation at the flex_attention call sites",
    "timeout": 600,
    "cost": 15,
    "needs": ["torch"],
    "params": {"entry": "examples/drafter/train.py", "args": [], "max_calls": 100000},
    "reports": ["calls", "flag_set_calls", "flag_scope", "patcher_seen_calls", "overlaps", "tracing_threads", "threads", "shapes", "errors", "mean_call_ms"],
}

if "emit" not in globals():  # run standalone: records as JSON lines on stdout
    import json

    def emit(kind, **fields):
        print(json.dumps({"kind": kind, **fields}, default=str))

    params = dict(PROBE["params"])

import os
import runpy
import sys
import threading
import time

import torch
import torch.fx._symbolic_trace as fx_trace
from torch.nn.attention.flex_attention import flex_attention as _flex

P = {**PROBE["params"], **params}
lock = threading.Lock()
calls = []
traces = []  # (thread, start, end)
errors = {}
shapes = {}


def tensor_spec(t):
    return {"shape": list(t.shape), "stride": list(t.stride()), "dtype": str(t.dtype).replace("torch.", ""),
            "device": str(t.device), "requires_grad": bool(t.requires_grad)}


def autocast_state(t):
    """The calling thread's autocast for *t*'s device: the precompile warm-up repeats it."""
    kind = t.device.type
    try:
        if torch.is_autocast_enabled(kind):
            return {"device_type": kind, "dtype": str(torch.get_autocast_dtype(kind)).replace("torch.", "")}
    except (TypeError, AttributeError, RuntimeError):  # older torch: no per-device query
        pass
    return None


def mask_spec(bm):
    if bm is None:
        return None
    mod = getattr(bm, "mask_mod", None)
    q_len, kv_len = bm.seq_lengths
    return {"q_len": int(q_len), "kv_len": int(kv_len), "B": int(bm.kv_num_blocks.shape[0]), "H": int(bm.kv_num_blocks.shape[1]),
            "block_size": list(bm.BLOCK_SIZE), "mask_mod": getattr(mod, "__name__", None), "mask_module": getattr(mod, "__module__", None)}


# torch < 2.14: one process-global flag; 2.14 made it thread-local (pytorch#168999): then the
# calling thread's own value is read, and what can still cross threads is FX's module
# patcher (CURRENT_PATCHER, process-global in 2.14.0 and 2.14.1): seen set by a thread that
# is not tracing itself, another thread's symbolic trace is patching nn.Module.__call__.
if hasattr(fx_trace, "_get_is_fx_tracing"):
    FLAG_SCOPE = "thread"

    def tracing_flag():
        return bool(fx_trace._get_is_fx_tracing())  # pyright: ignore[reportAttributeAccessIssue]  # 2.14+ only
else:
    FLAG_SCOPE = "process"

    def tracing_flag():
        return bool(fx_trace._is_fx_tracing_flag)

patcher_calls = [0]


def instrument(compiled, where):
    def sleuth_recorded(*args, **kwargs):
        flag = tracing_flag()
        if getattr(fx_trace, "CURRENT_PATCHER", None) is not None and not flag:
            with lock:
                patcher_calls[0] += 1
        compiling = bool(torch.compiler.is_compiling())
        started = time.perf_counter()
        name = threading.current_thread().name
        try:
            return compiled(*args, **kwargs)
        except Exception as exc:
            with lock:
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
            raise
        finally:
            ended = time.perf_counter()
            if len(calls) < P["max_calls"]:
                q, k, v = (args + (None, None, None))[:3]
                spec = None
                if isinstance(q, torch.Tensor):
                    spec = {"q": tensor_spec(q), "k": tensor_spec(k), "v": tensor_spec(v),
                            "block_mask": mask_spec(kwargs.get("block_mask")), "kwargs": sorted(kwargs),
                            "grad": torch.is_grad_enabled(), "compiled": where, "autocast": autocast_state(q)}
                with lock:
                    calls.append((name, started, ended, flag, compiling))
                    if spec is not None:
                        key = repr(spec)
                        shapes.setdefault(key, spec)

    return sleuth_recorded


real_compile = torch.compile


def sleuth_compile(*args, **kwargs):
    compiled = real_compile(*args, **kwargs)
    target = args[0] if args else kwargs.get("model")
    if target is _flex or getattr(target, "func", None) is _flex:
        frame = sys._getframe(1)
        return instrument(compiled, f"{frame.f_globals.get('__name__')}:{frame.f_lineno}")
    return compiled


torch.compile = sleuth_compile
real_trace = fx_trace.Tracer.trace


def sleuth_trace(self, *args, **kwargs):
    started = time.perf_counter()
    try:
        return real_trace(self, *args, **kwargs)
    finally:
        with lock:
            traces.append((threading.current_thread().name, started, time.perf_counter()))


fx_trace.Tracer.trace = sleuth_trace

entry = os.path.abspath(P["entry"])
if not os.path.isfile(entry):
    raise FileNotFoundError(
        f"entry {P['entry']} not found in {os.getcwd()}: nothing was run; set [probes.fx-trace-state] entry "
        "in sleuth.toml or pass --param entry=PATH"
    )
sys.argv = [entry, *[str(a) for a in P["args"]]]
sys.path.insert(0, os.path.dirname(entry))
exit_code = 0
try:
    runpy.run_path(entry, run_name="__main__")
except SystemExit as exc:
    exit_code = exc.code if isinstance(exc.code, int) else 0
finally:
    torch.compile = real_compile
    fx_trace.Tracer.trace = real_trace

if not calls:
    raise RuntimeError(
        f"{P['entry']} ran (exit {exit_code}) but never called a compiled flex_attention: there was nothing to "
        "observe, so this says nothing about the race (is it the right entry, with the right args?)"
    )
overlaps = 0
for name, start, end, _flag, _c in calls:
    for tname, tstart, tend in traces:
        if tname != name and tstart < end and start < tend:
            overlaps += 1
            break
durations = [(e - s) * 1000 for _n, s, e, _f, _c in calls]
emit(
    "result",
    calls=len(calls),
    flag_set_calls=sum(1 for c in calls if c[3] and not c[4]),
    compiling_seen_calls=sum(1 for c in calls if c[4]),
    flag_scope=FLAG_SCOPE,
    patcher_seen_calls=patcher_calls[0],
    overlaps=overlaps,
    traces=len(traces),
    tracing_threads=sorted({t[0] for t in traces}),
    threads=sorted({c[0] for c in calls}),
    shapes=list(shapes.values()),
    errors=errors,
    mean_call_ms=round(sum(durations) / len(durations), 3) if durations else None,
    exit=exit_code,
)

"""fx-trace-state's part that records each compiled flex_attention call: the calls of what
torch.compile returned are counted at its site, and those that run a compiled flex_attention
are kept one by one (thread, torch's FX tracing flag, torch.compiler.is_compiling(), time,
errors, shapes); dynamo tells, through comptime, which compiled functions have flex_attention
inside. Sent before probes/scripts/fx_trace_state.py (its PROBE says ``"parts"``) and run in
the same namespace, after _fx_sites.py."""

import functools
import sys
import threading
import time
from typing import TYPE_CHECKING

import torch
import torch.fx._symbolic_trace as fx_trace

if TYPE_CHECKING:  # defined by the part run first, in this namespace at the far end
    from ._fx_sites import bump, in_torch, lock

calls = []  # (thread, start, end, FX flag, is_compiling) per compiled flex_attention call
errors = {}  # exception type -> compiled flex_attention calls it ended
shapes = {}  # repr -> the shapes of a call of a compiled flex_attention itself
compiled_flex_calls = [0]


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


running = threading.local()  # per thread: the compiled sites whose calls are under way, innermost last
module_sites = {}  # id(what torch.compile returned for an nn.Module) -> (it, its site's record)
traced_flex = [0]  # flex_attention calls dynamo traced into a graph (a compiled function's or module's)


def sites_running():
    stack = getattr(running, "sites", None)
    if stack is None:
        stack = running.sites = []
    return stack


def instrument(compiled, where_compiled, rec, direct, most):
    """Calls of a compiled function, counted at its site. Those that run a compiled
    flex_attention (*direct*: flex_attention itself; else a function whose graph has one)
    are recorded one by one, the first *most* of them: thread, torch's FX flag, is_compiling(),
    time, errors and, for flex_attention itself, the shapes (the precompile remedy warms them up)."""

    def sleuth_recorded(*args, **kwargs):
        if torch.compiler.is_dynamo_compiling():  # traced into another graph: not a call of its own
            return compiled(*args, **kwargs)
        flag = tracing_flag()
        patched = getattr(fx_trace, "CURRENT_PATCHER", None) is not None and not flag
        compiling = bool(torch.compiler.is_compiling())
        started = time.perf_counter()
        name = threading.current_thread().name
        stack = sites_running()
        stack.append(rec)
        failed = None
        try:
            return compiled(*args, **kwargs)
        except Exception as exc:
            failed = type(exc).__name__
            raise
        finally:
            ended = time.perf_counter()
            stack.pop()
            spec = None
            if direct and len(calls) < most:
                q, k, v = (args + (None, None, None))[:3]
                if isinstance(q, torch.Tensor):
                    spec = {"q": tensor_spec(q), "k": tensor_spec(k), "v": tensor_spec(v),
                            "block_mask": mask_spec(kwargs.get("block_mask")), "kwargs": sorted(kwargs),
                            "grad": torch.is_grad_enabled(), "compiled": where_compiled, "autocast": autocast_state(q)}
            with lock:
                bump(rec, "compiled_calls")
                if direct or rec["flex_inside"]:
                    compiled_flex_calls[0] += 1
                    if patched:
                        patcher_calls[0] += 1
                    if failed is not None:
                        errors[failed] = errors.get(failed, 0) + 1
                    if len(calls) < most:
                        calls.append((name, started, ended, flag, compiling))
                        if spec is not None:
                            shapes.setdefault(repr(spec), spec)

    if not direct:  # a library's compiled function keeps its name and attributes
        functools.update_wrapper(sleuth_recorded, compiled)
    return sleuth_recorded


def compiled_module_running():
    """The site of the compiled nn.Module whose call is under way in this thread (sleuth does
    not wrap modules: its OptimizedModule.__call__ frame says which)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "__call__" and in_torch(frame.f_code.co_filename):
            owner = frame.f_locals.get("self")
            found = module_sites.get(id(owner))
            if found is not None and found[0] is owner:
                return found[1]
        frame = frame.f_back
    return None


def flex_traced(ctx):
    """Run by dynamo, through comptime, while it traces a call of sleuth's flex_attention into
    a graph: the compiled function or module being called in this thread has one inside."""
    stack = sites_running()
    rec = stack[-1] if stack else compiled_module_running()
    with lock:
        traced_flex[0] += 1
        if rec is not None:
            bump(rec, "flex_inside")


try:
    from torch._dynamo.comptime import comptime
except ImportError:  # no comptime: flex_attention inside a compiled graph goes uncounted
    comptime = None

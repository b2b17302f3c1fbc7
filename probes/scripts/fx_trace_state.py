# pyright: reportPossiblyUnboundVariable=false
# (emit and params come from the prelude sleuth sends first; run standalone, emit from probes/far/common.py;
# the sites and the compiled calls' records from its parts, PROBE["parts"], run first)
"""FX-flag instrumentation: run the entry point with torch.compile and flex_attention watched
at run time (no source change) and record, per compiled flex_attention call, the thread,
torch's FX tracing flag, torch.compiler.is_compiling(), and the shapes; report tracing in one
thread overlapping compiled calls in another, and the shapes seen (the precompile remedy uses
them). Also recorded: every site where torch.compile ran (the user's code or a library's, such
as transformers' own torch.compile(flex_attention), or torch's create_block_mask(_compile=True)
with the frame outside torch that reached it), how often each compiled result was called, the
flex_attention calls that ran uncompiled (counted where they were called from), and how the
entry ended: its exit status and the threads that died of an uncaught exception."""

PROBE = {
    "id": "fx-trace-state",
    "stochastic": True,  # observes thread timing: each run is a sample
    "title": "FX-flag instrumentation at the flex_attention call sites",
    "timeout": 600,
    "cost": 15,
    "needs": ["torch"],
    "required": ["entry"],  # the user's own script: no default fits every project
    "params": {"entry": None, "args": [], "max_calls": 100000},
    "reports": ["calls", "uncompiled_calls", "flex_calls", "flex_traced", "flag_set_calls", "compiling_seen_calls", "flag_scope",
                "patcher_seen_calls", "overlaps", "traces", "tracing_threads", "compile_traces", "compile_overlaps", "threads", "shapes", "errors",
                "mean_call_ms", "sites", "exit", "threads_died", "died_of", "main_error", "said"],
    "parts": ["_fx_sites.py", "_fx_calls.py"],  # run first, in this namespace: the sites, the compiled calls
}

import functools
import os
import runpy
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING

import torch
import torch.fx._symbolic_trace as fx_trace
import torch.nn.attention.flex_attention as flex_module
from torch._guards import CompileContext, TracingContext

if TYPE_CHECKING:  # defined by the parts run first (PROBE["parts"]), in this namespace at the far end
    from ._fx_calls import (
        FLAG_SCOPE,
        calls,
        compiled_flex_calls,
        comptime,
        errors,
        flex_traced,
        instrument,
        module_sites,
        patcher_calls,
        shapes,
        traced_flex,
    )
    from ._fx_sites import bump, describe, lock, plural, site_record, sites, sites_sentence, tally

if "emit" not in globals():  # run standalone: emit (JSON lines on stdout) from the far end's helper part
    import runpy

    _far = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "far", "common.py"))
    emit = _far["emit"]
    params = dict(PROBE["params"])
    _far["run_parts"](__file__, PROBE["parts"], globals())  # what sleuth sends first, run in this namespace


_flex = flex_module.flex_attention  # the real one: what every compile of flex_attention compiles

P = {**PROBE["params"], **params}
traces = []  # (thread, start, end, inside_compile)
died_of = {}  # exception type -> threads it killed
uncompiled_flex_calls = [0]


def target_name(target):
    if isinstance(target, functools.partial):
        target = target.func
    if target is sleuth_flex_attention:
        return "flex_attention"
    if isinstance(target, torch.nn.Module):
        return type(target).__name__
    return getattr(target, "__name__", None) or type(target).__name__


# -- flex_attention itself: uncompiled calls, counted at the caller -------------------------

def sleuth_flex_attention(*args, **kwargs):
    # Dynamo folds is_dynamo_compiling() to True while it traces (a compiled flex_attention,
    # or a compiled model that calls this): then the real function, and nothing else. It is
    # False in eager on every thread, even while another thread compiles (unlike
    # torch.compiler.is_compiling() on torch < 2.14, one process-global flag).
    if torch.compiler.is_dynamo_compiling():
        if comptime is not None:
            comptime(flex_traced)  # dynamo runs it while it traces, and puts nothing in the graph
        return _flex(*args, **kwargs)
    if not any(isinstance(a, torch.fx.Proxy) for a in args[:3]):  # symbolic tracing runs nothing
        rec = site_record(describe(sys._getframe(1)), "eager", "flex_attention")
        with lock:
            uncompiled_flex_calls[0] += 1
            bump(rec, "uncompiled_calls")
    return _flex(*args, **kwargs)


for _attr in ("__name__", "__qualname__", "__doc__"):
    setattr(sleuth_flex_attention, _attr, getattr(_flex, _attr, None))


def real_target(target):
    """(what to compile, whether it is flex_attention): a compile of sleuth's flex_attention
    compiles the real one, so what runs is what the entry asked for."""
    if target is sleuth_flex_attention or target is _flex:
        return _flex, True
    if isinstance(target, functools.partial) and (target.func is sleuth_flex_attention or target.func is _flex):
        return functools.partial(_flex, *target.args, **target.keywords), True
    return target, False


# -- torch.compile: every call, every form --------------------------------------------------

real_compile = torch.compile


def compile_at(desc, model, args, kwargs):
    target, is_flex = real_target(model)
    compiled = real_compile(target, *args, **kwargs)
    is_module = isinstance(model, torch.nn.Module)
    rec = site_record(desc, "compile", target_name(model))
    with lock:
        bump(rec, "compiles")
        if not is_module:
            bump(rec, "compiled_calls", 0)
        elif compiled is not model:
            module_sites[id(compiled)] = (compiled, rec)
    if is_module or not callable(compiled):
        return compiled
    return instrument(compiled, desc["site"], rec, is_flex, P["max_calls"])


def sleuth_compile(*args, **kwargs):
    if torch.compiler.is_dynamo_compiling():
        return real_compile(*args, **kwargs)
    desc = describe(sys._getframe(1))
    kw = {k: v for k, v in kwargs.items() if k != "model"}
    model = args[0] if args else kwargs.get("model")
    rest = tuple(args[1:])
    if model is None:  # torch.compile(dynamic=False)(fn): the site is where torch.compile was called

        def sleuth_compile_decorator(fn):
            if fn is None:
                raise RuntimeError("Model can't be None")  # as torch says it
            return compile_at(desc, fn, rest, kw)

        return sleuth_compile_decorator
    return compile_at(desc, model, rest, kw)


real_trace = fx_trace.Tracer.trace


def inside_compile():
    """Whether this thread is inside torch.compile (dynamo or AOTAutograd tracing the graph with
    FX's tracer): such a trace is the compile race's own, not a symbolic trace of the user's or a
    library's (torch's compile and tracing contexts are thread-local)."""
    return CompileContext.try_get() is not None or TracingContext.try_get() is not None


def sleuth_trace(self, *args, **kwargs):
    started = time.perf_counter()
    compiling = inside_compile()
    try:
        return real_trace(self, *args, **kwargs)
    finally:
        with lock:
            traces.append((threading.current_thread().name, started, time.perf_counter(), compiling))


real_excepthook = threading.excepthook


def sleuth_thread_died(hook_args):
    if hook_args.exc_type is not SystemExit:  # as threading's own hook: SystemExit ends a thread quietly
        name = getattr(hook_args.exc_type, "__name__", str(hook_args.exc_type))
        with lock:
            died_of[name] = died_of.get(name, 0) + 1
    return real_excepthook(hook_args)


# -- the run ---------------------------------------------------------------------------------

entry = os.path.abspath(P["entry"])
if not os.path.isfile(entry):
    raise FileNotFoundError(
        f"entry {P['entry']} not found in {os.getcwd()}: nothing was run; set [probes.fx-trace-state] entry "
        "in sleuth.toml or pass --param entry=PATH"
    )
sys.argv = [entry, *[str(a) for a in P["args"]]]
sys.path.insert(0, os.path.dirname(entry))
# Installed before the entry imports anything: a library that imports flex_attention from now
# on (transformers does, at import) binds sleuth's, and its torch.compile calls come here.
flex_module.flex_attention = sleuth_flex_attention
torch.compile = sleuth_compile
fx_trace.Tracer.trace = sleuth_trace
threading.excepthook = sleuth_thread_died
exit_code = 0
main_error = None
try:
    try:
        runpy.run_path(entry, run_name="__main__")
    except SystemExit as exc:  # as the interpreter: None is 0, an int is itself, anything else is printed and 1
        code = exc.code
        if code is None or isinstance(code, int):
            exit_code = code or 0
        else:
            print(code, file=sys.stderr)
            exit_code = 1
    except BaseException as exc:  # the main thread died: said, not raised (its traceback as Python prints it)
        traceback.print_exc()
        exit_code = 1
        main_error = type(exc).__name__
        with lock:
            died_of[main_error] = died_of.get(main_error, 0) + 1
finally:
    torch.compile = real_compile
    fx_trace.Tracer.trace = real_trace
    flex_module.flex_attention = _flex
    if threading.excepthook is sleuth_thread_died:
        threading.excepthook = real_excepthook
    sys.stdout.flush()
    sys.stderr.flush()

name = os.path.basename(entry)
threads_died = sum(died_of.values())
said = f"{name} exited {exit_code}"
if threads_died:
    who = plural(threads_died, "thread")
    said += f": {who} died ({tally(died_of)})" + (", the main thread among them" if main_error else "")
else:
    said += ", no thread died"
found = [dict(r) for r in sites.values()]
compiled_n, uncompiled_n = compiled_flex_calls[0], uncompiled_flex_calls[0]
emit("finding", finding="compile-sites", text=sites_sentence(found, compiled_n + uncompiled_n, traced_flex[0], entry))
if not compiled_n + uncompiled_n + traced_flex[0]:  # flex_attention traced into a graph ran compiled
    raise RuntimeError(
        f"{P['entry']} ran ({said}) but never called a compiled flex_attention, nor an uncompiled one: there was "
        "nothing to observe, so this says nothing about the race (is it the right entry, with the right args?)"
    )


def overlapping(spans):
    """Compiled calls that overlap a trace in another thread."""
    n = 0
    for tname_, start, end, _flag, _c in calls:
        if any(tname != tname_ and tstart < end and start < tend for tname, tstart, tend, _in in spans):
            n += 1
    return n


fx_traces = [t for t in traces if not t[3]]  # symbolic traces: the user's or a library's
compile_traces = [t for t in traces if t[3]]  # torch.compile's own graph capture
durations = [(e - s) * 1000 for _n, s, e, _f, _c in calls]
emit(
    "result",
    calls=compiled_n,
    uncompiled_calls=uncompiled_n,
    flex_calls=compiled_n + uncompiled_n,
    flex_traced=traced_flex[0],
    flag_set_calls=sum(1 for c in calls if c[3] and not c[4]),
    compiling_seen_calls=sum(1 for c in calls if c[4]),
    flag_scope=FLAG_SCOPE,
    patcher_seen_calls=patcher_calls[0],
    overlaps=overlapping(fx_traces),
    traces=len(fx_traces),
    tracing_threads=sorted({t[0] for t in fx_traces}),
    compile_traces=len(compile_traces),
    compile_overlaps=overlapping(compile_traces),
    threads=sorted({c[0] for c in calls}),
    shapes=list(shapes.values()),
    errors=errors,
    mean_call_ms=round(sum(durations) / len(durations), 3) if durations else None,
    sites=found,
    exit=exit_code,
    threads_died=threads_died,
    died_of=died_of,
    main_error=main_error,
    said=said,
)

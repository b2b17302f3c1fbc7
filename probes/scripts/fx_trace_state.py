# pyright: reportPossiblyUnboundVariable=false
# (emit and params come from the prelude sleuth sends first; run standalone, emit from probes/far/common.py)
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
}

if "emit" not in globals():  # run standalone: emit (JSON lines on stdout) from the far end's helper part
    import os
    import runpy

    _far = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "far", "common.py"))
    emit = _far["emit"]
    params = dict(PROBE["params"])

import functools
import os
import runpy
import sys
import threading
import time
import traceback

# Dynamo looks a traced function's globals up through its module, by name: sleuth's wrappers
# (which a compiled function of the entry's may trace into) are found under a name of their
# own, not "__main__", which runpy gives the entry while it runs.
_this = sys.modules.get(globals().get("__name__") or "__main__")
if _this is not None and _this.__dict__ is globals():
    globals()["__name__"] = "sleuth_fx_trace_state"
    sys.modules["sleuth_fx_trace_state"] = _this

import torch
import torch.fx._symbolic_trace as fx_trace
import torch.nn.attention.flex_attention as flex_module
from torch._guards import CompileContext, TracingContext

_flex = flex_module.flex_attention  # the real one: what every compile of flex_attention compiles

P = {**PROBE["params"], **params}
lock = threading.Lock()
calls = []
traces = []  # (thread, start, end, inside_compile)
errors = {}
shapes = {}
sites = {}  # key -> the site's record, in the order first seen
died_of = {}  # exception type -> threads it killed
compiled_flex_calls = [0]
uncompiled_flex_calls = [0]


def _sleuth_code():
    pass


HERE = _sleuth_code.__code__.co_filename  # sleuth's own frames (this file) are never a site
TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


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


# -- sites: where a compile ran, or an uncompiled flex_attention call came from ---------------

def library_of(path):
    """The top-level package of a file installed under site-packages / dist-packages, else None."""
    parts = path.replace("\\", "/").split("/")
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in ("site-packages", "dist-packages"):
            top = parts[i + 1]
            return top[:-3] if top.endswith(".py") else top.split(".")[0]
    return None


def where(frame):
    return f"{frame.f_globals.get('__name__') or '?'}:{frame.f_lineno}"


def in_torch(path):
    return os.path.abspath(path).startswith(TORCH_DIR)


def describe(frame):
    """The site of *frame* (the caller of torch.compile or of flex_attention): module:line, file,
    line, library, and, when the frame is torch's own, the first frame outside torch."""
    while frame is not None and frame.f_code.co_filename == HERE:
        frame = frame.f_back
    if frame is None:
        return {"site": "?", "file": None, "line": None, "reached_from": None, "library": None}
    path = frame.f_code.co_filename
    reached = None
    if in_torch(path):
        up = frame.f_back
        while up is not None and (up.f_code.co_filename == HERE or in_torch(up.f_code.co_filename)):
            up = up.f_back
        reached = where(up) if up is not None else None
    file = path if path.startswith("<") else os.path.abspath(path)
    return {"site": where(frame), "file": file, "line": frame.f_lineno, "reached_from": reached,
            "library": library_of(file)}


def site_record(desc, kind, target):
    key = (kind, desc["file"], desc["line"], desc["site"], desc["reached_from"], target)
    with lock:
        rec = sites.get(key)
        if rec is None:
            rec = dict(desc, target=target, kind=kind, compiles=0 if kind == "compile" else None,
                       compiled_calls=None, uncompiled_calls=0 if kind == "eager" else None,
                       flex_inside=0 if kind == "compile" else None)
            sites[key] = rec
        return rec


def bump(rec, field, n=1):
    rec[field] = (rec[field] or 0) + n


def target_name(target):
    if isinstance(target, functools.partial):
        target = target.func
    if target is sleuth_flex_attention:
        return "flex_attention"
    if isinstance(target, torch.nn.Module):
        return type(target).__name__
    return getattr(target, "__name__", None) or type(target).__name__


# -- compiled code: per-call instrumentation ------------------------------------------------

running = threading.local()  # per thread: the compiled sites whose calls are under way, innermost last
module_sites = {}  # id(what torch.compile returned for an nn.Module) -> (it, its site's record)
traced_flex = [0]  # flex_attention calls dynamo traced into a graph (a compiled function's or module's)


def sites_running():
    stack = getattr(running, "sites", None)
    if stack is None:
        stack = running.sites = []
    return stack


def instrument(compiled, where_compiled, rec, direct):
    """Calls of a compiled function, counted at its site. Those that run a compiled
    flex_attention (*direct*: flex_attention itself; else a function whose graph has one)
    are recorded one by one: thread, torch's FX flag, is_compiling(), time, errors and, for
    flex_attention itself, the shapes (the precompile remedy warms them up)."""

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
            if direct and len(calls) < P["max_calls"]:
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
                    if len(calls) < P["max_calls"]:
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
    return instrument(compiled, desc["site"], rec, is_flex)


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


def tally(d):
    return ", ".join(f"{k} \u00d7{n}" for k, n in sorted(d.items(), key=lambda kv: (-kv[1], kv[0])))


def plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def shown(rec):
    """A site as the sentence names it: the file's name for the entry's own __main__."""
    site = rec["site"]
    if site.startswith("__main__:") and rec["file"]:
        site = f"{os.path.basename(rec['file'])}:{rec['line']}"
    return site


def entry_named(site):
    """module:line, the entry's own module (runpy's __main__) by its file's name."""
    return os.path.basename(entry) + site[len("__main__"):] if site.startswith("__main__:") else site


def sites_sentence(found, flex_calls, traced):
    compiled = [r for r in found if r["kind"] == "compile"]
    eager = [r for r in found if r["kind"] == "eager"]
    parts = []
    for i, r in enumerate(compiled):
        text = f"{r['target']}{' is compiled' if i == 0 else ''} at {shown(r)}"
        if r["reached_from"]:
            text += f" reached from {entry_named(r['reached_from'])}"
        bits = [r["library"]] if r["library"] else []
        bits.append(plural(r["compiles"], "compile"))
        if r["compiled_calls"] is not None:
            bits.append(plural(r["compiled_calls"], "compiled call"))
        if r["flex_inside"]:
            bits.append("flex_attention inside")
        parts.append(text + " (" + ", ".join(bits) + ")")
    if not parts:
        head = "nothing was compiled: torch.compile was never called"
    elif len(parts) == 1:
        head = parts[0]
    else:
        head = ", ".join(parts[:-1]) + " and " + parts[-1]
    n_eager = sum(r["uncompiled_calls"] for r in eager)
    if n_eager:
        froms = ", ".join(f"{shown(r)} ({r['uncompiled_calls']})" for r in eager)
        tail = f"{plural(n_eager, 'flex_attention call')} ran uncompiled, from {froms}"
    elif flex_calls or traced:
        tail = "no flex_attention call ran uncompiled"
    else:
        tail = "flex_attention was never called"
    return head + "; " + tail + "."


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
emit("finding", finding="compile-sites", text=sites_sentence(found, compiled_n + uncompiled_n, traced_flex[0]))
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

# pyright: reportPossiblyUnboundVariable=false
# (emit and params come from the prelude sleuth sends first; run standalone, emit from probes/far/common.py)
"""Compile-race experiment: the user's entry, run as they wrote it, K times threaded with fresh
compile caches, and once as a single-thread control; a failure is read from the entry's exit
status and from what killed its threads (type, message, innermost frame), never from a line
only sleuth's example prints.

How to run the entry threaded and how to run its control are the user's to say
([probes.compile-race] in sleuth.toml): ``args`` go to every run, ``threaded_args`` /
``threaded_env`` only to the threaded trials, ``control_args`` / ``control_env`` make the
single-thread control. Nothing else is added to the command line. What the runs did is
measured in the entry's own process by a startup hook (a ``sitecustomize`` on PYTHONPATH that
chains to any the environment has): the threads the user's code started, which died and of
what, the compiles that happened after the first worker started."""

PROBE = {
    "id": "compile-race",
    "stochastic": True,  # a race: each trial is a sample
    "title": "threaded reproducer with cold caches, and a single-thread control",
    "timeout": 900,
    "cost": 40,
    "needs": ["torch"],
    "required": ["entry"],  # the user's own script: no default fits every project
    "params": {"entry": None, "args": [], "threaded_args": [], "threaded_env": {},
               "control_args": None, "control_env": {}, "trials": 3, "cold_cache": True, "control": True,
               "per_run_timeout": 300, "race": None},
    "reports": ["threads", "trials", "failed_trials", "died", "died_of", "fx_trace_errors", "errors_total", "errors",
                "control_failed", "control_same_failure", "cold_cache", "race", "compiles_during_workers", "said"],
}

if "emit" not in globals():  # run standalone: emit (JSON lines on stdout) from the far end's helper part
    import os
    import runpy

    _far = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "far", "common.py"))
    emit = _far["emit"]
    params = dict(PROBE["params"])

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

FX_ERROR = "Detected that you are using FX to symbolically trace a dynamo-optimized function"
P = {**PROBE["params"], **params}


class CouldNotReproduce(RuntimeError):
    """The probe could not do what it was asked: it ends failed, and gives no evidence."""


def _argv(value, name):
    if value is None:
        return None
    if isinstance(value, str):  # one string: split as a shell would, without a shell
        import shlex

        return shlex.split(value)
    if not isinstance(value, (list, tuple)):
        raise CouldNotReproduce(f"[probes.compile-race] {name} must be a list of arguments, got {value!r}")
    return [str(a) for a in value]


def _env(value, name):
    if not value:
        return {}
    if not isinstance(value, dict):
        raise CouldNotReproduce(f"[probes.compile-race] {name} must be a table of environment variables, got {value!r}")
    return {str(k): str(v) for k, v in value.items()}


ENTRY = P["entry"]
ARGS = _argv(P["args"], "args") or []
THREADED = (_argv(P["threaded_args"], "threaded_args") or [], _env(P["threaded_env"], "threaded_env"))
CONTROL_ARGS = _argv(P["control_args"], "control_args")
CONTROL_ENV = _env(P["control_env"], "control_env")
CONTROL = (CONTROL_ARGS or [], CONTROL_ENV) if P["control"] and (CONTROL_ARGS is not None or CONTROL_ENV) else None
NAME = os.path.basename(ENTRY)

if not os.path.isfile(ENTRY):
    raise CouldNotReproduce(
        f"entry {ENTRY} not found in {os.getcwd()}: nothing was run; set [probes.compile-race] entry "
        "in sleuth.toml or pass --param entry=PATH (relative to the target's workdir)"
    )

# The hook, run at the entry's start by Python itself (site imports sitecustomize). It acts
# only in the entry's own process (its parent is this probe), never in processes the entry
# starts, and changes nothing the entry sees: hooks chain to the ones already there.
HOOK = r'''
import os, sys
if os.environ.get("SLEUTH_RACE_PARENT") == str(os.getppid()):
    import atexit, json, threading, traceback
    _out = os.environ["SLEUTH_RACE_REPORT"]
    _here = os.path.dirname(os.path.abspath(__file__))
    _std = os.path.dirname(os.__file__)
    _rep = {"threads_started": 0, "thread_names": [], "died": [], "main_error": None,
            "compiles_at_first_worker": None, "compiles_at_exit": None}
    _lock = threading.Lock()

    def _compiles():
        utils = sys.modules.get("torch._dynamo.utils")
        try:
            return int(utils.counters["stats"]["unique_graphs"]) if utils is not None else 0
        except Exception:
            return None

    def _library(path):
        parts = path.replace("\\", "/").split("/")
        for i, part in enumerate(parts[:-1]):
            if part in ("site-packages", "dist-packages"):
                return parts[i + 1].split(".")[0]
        return None

    def _is_std(path):
        return path.startswith(_std) and _library(path) is None

    def _starter():
        """Who started the thread: the first frame outside the standard library."""
        f = sys._getframe(2)
        while f is not None and _is_std(f.f_code.co_filename):
            f = f.f_back
        return f.f_code.co_filename if f is not None else ""

    def _describe(exc_type, exc, tb, thread):
        frames = traceback.extract_tb(tb) if tb is not None else []
        inner = frames[-1] if frames else None
        mods = set()
        for fr in frames:
            lib = _library(fr.filename)
            if lib:
                mods.add(lib)
            name = fr.filename.replace("\\", "/")
            for part in ("/torch/_dynamo/", "/torch/_inductor/", "/torch/fx/", "/torch/_functorch/"):
                if part in name:
                    mods.add("torch" + part.rstrip("/").replace("/torch/", ".").replace("/", "."))
        at = None
        if inner is not None:
            lib = _library(inner.filename)
            at = (lib + ":" if lib else "") + os.path.basename(inner.filename) + ":" + str(inner.lineno)
        return {"thread": thread, "type": getattr(exc_type, "__name__", str(exc_type)),
                "message": str(exc).splitlines()[0][:300] if str(exc) else "", "at": at,
                "code": (inner.line or "")[:200] if inner is not None else None, "through": sorted(mods)}

    _start = threading.Thread.start

    def _sleuth_start(self, *a, **kw):
        path = _starter()
        lib = _library(path)
        if lib is None and not path.startswith(_here):  # the user's code started it
            with _lock:
                if _rep["threads_started"] == 0:
                    _rep["compiles_at_first_worker"] = _compiles()
                _rep["threads_started"] += 1
                _rep["thread_names"].append(self.name)
        elif lib not in ("torch", "triton"):  # a library's (tqdm's monitor, a trainer's workers): said apart
            with _lock:
                _rep.setdefault("library_threads", {}).setdefault(lib or "?", []).append(self.name)
        return _start(self, *a, **kw)

    threading.Thread.start = _sleuth_start
    _thook = threading.excepthook

    def _sleuth_thread_died(args):
        if args.exc_type is not SystemExit:
            with _lock:
                _rep["died"].append(_describe(args.exc_type, args.exc_value, args.exc_traceback,
                                              args.thread.name if args.thread is not None else "?"))
        return _thook(args)

    threading.excepthook = _sleuth_thread_died
    _hook = sys.excepthook

    def _sleuth_main_died(exc_type, exc, tb):
        _rep["main_error"] = _describe(exc_type, exc, tb, "MainThread")
        return _hook(exc_type, exc, tb)

    sys.excepthook = _sleuth_main_died

    def _sleuth_report():
        _rep["compiles_at_exit"] = _compiles()
        with open(_out, "w") as f:
            json.dump(_rep, f)

    atexit.register(_sleuth_report)
    # chain: the environment's own sitecustomize, if it has one
    _self = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    try:
        import sitecustomize  # noqa: F401
    except ImportError:
        pass
    if "sitecustomize" not in sys.modules and _self is not None:  # the import machinery looks for it after us
        sys.modules["sitecustomize"] = _self
'''
TYPE_LINE = re.compile(r"^(\w+(?:Error|Exception|Interrupt))\b", re.M)


class Run:
    """One run of the entry, started as a process of its own with its own cold caches and its
    own startup hook; :meth:`finish` reads what it did once it has ended."""

    def __init__(self, args, extra_env, trial):
        self.trial = trial
        self.work = tempfile.mkdtemp(prefix="sleuth-race-")
        hook_dir = os.path.join(self.work, "hook")
        os.mkdir(hook_dir)
        with open(os.path.join(hook_dir, "sitecustomize.py"), "w") as f:
            f.write(HOOK)
        self.report = os.path.join(self.work, "report.json")
        env = dict(os.environ)
        env.update(extra_env)
        env["PYTHONPATH"] = hook_dir + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["SLEUTH_RACE_PARENT"] = str(os.getpid())
        env["SLEUTH_RACE_REPORT"] = self.report
        if P["cold_cache"]:
            env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(self.work, "inductor")
            env["TRITON_CACHE_DIR"] = os.path.join(self.work, "triton")
        self.argv = [sys.executable, ENTRY, *ARGS, *args]
        # its output goes to files, said whole and in order when it ends (runs side by side never interleave)
        self.out = open(os.path.join(self.work, "stdout"), "w+b")
        self.err = open(os.path.join(self.work, "stderr"), "w+b")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdout=self.out, stderr=self.err, stdin=subprocess.DEVNULL, env=env)
        self.timed_out = False

    def ended(self):
        """Whether the run has ended (one past its time limit is killed, and has)."""
        if self.proc.poll() is not None:
            return True
        if time.monotonic() - self.started > P["per_run_timeout"]:
            self.timed_out = True
            self.proc.kill()
            self.proc.wait()
            return True
        return False

    def finish(self):
        code = None if self.timed_out else self.proc.returncode
        seconds = round(time.monotonic() - self.started, 1)
        texts = []
        for f in (self.out, self.err):
            f.seek(0)
            texts.append(f.read().decode(errors="replace"))
            f.close()
        out, err = texts
        sys.stdout.write(f"--- sleuth: {self.trial}: {' '.join(self.argv[1:])}\n")
        sys.stdout.write(out)
        sys.stderr.write(err)
        sys.stdout.flush()
        sys.stderr.flush()
        rep = None
        try:
            with open(self.report) as f:
                rep = json.load(f)
        except (OSError, ValueError):
            pass
        shutil.rmtree(self.work, ignore_errors=True)
        return _trial(self.trial, code, self.timed_out, seconds, rep, err)


def _trial(trial, code, timed_out, seconds, rep, err):
    errors = {}
    for m in TYPE_LINE.finditer(err):  # the tracebacks the entry printed, its own included
        errors[m.group(1)] = errors.get(m.group(1), 0) + 1
    died = (rep or {}).get("died") or []
    died_of = {}
    for d in died:
        died_of[d["type"]] = died_of.get(d["type"], 0) + 1
    main_error = (rep or {}).get("main_error")
    before, after = (rep or {}).get("compiles_at_first_worker"), (rep or {}).get("compiles_at_exit")
    t = {
        "trial": trial,
        "exit": code,
        "timed_out": timed_out,
        "seconds": seconds,
        "measured": rep is not None,
        "threads": (rep or {}).get("threads_started"),
        "thread_names": ((rep or {}).get("thread_names") or [])[:32],
        "library_threads": {k: v[:8] for k, v in ((rep or {}).get("library_threads") or {}).items()},
        "died": len(died),
        "died_of": died_of,
        "deaths": died[:16],
        "main_error": main_error,
        "errors": errors,
        "fx_trace_errors": err.count(FX_ERROR),
        "compiles_during_workers": after - before if isinstance(before, int) and isinstance(after, int) else None,
    }
    t["failed"] = bool(timed_out or code != 0 or died)
    return t


def _gpu_visible():
    """Whether the runs could reach a GPU: then they would share its memory, and a run that
    ran out of it alongside another would read as a failure of its own."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1") and not os.path.exists("/dev/kfd"):
        return False
    return any(os.path.exists(p) for p in ("/dev/nvidia0", "/dev/kfd", "/dev/dxg"))


def side_by_side():
    """How many runs go at once: one per core this probe may use, on a machine whose runs could
    reach no GPU (each run is a process of its own with its own cold caches, so runs side by
    side are as independent as runs one after another); one after another where a GPU is
    visible. SLEUTH_RACE_SIDE_BY_SIDE=N says how many, whatever the machine."""
    wanted = os.environ.get("SLEUTH_RACE_SIDE_BY_SIDE", "")
    if wanted.isdigit() and int(wanted) > 0:
        return int(wanted)
    if _gpu_visible():
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def run_all(planned):
    """Run every (args, env, name) of *planned*, as many side by side as :func:`side_by_side`
    allows, in order; each run's result in the order planned. A ``progress`` record says each
    start and end: which run, how many are done of how many, how long since the first began."""
    width = min(side_by_side(), len(planned)) or 1
    t0 = time.monotonic()
    waiting = list(enumerate(planned))
    running = []
    results: list = [None] * len(planned)  # each run's trial dict, once it ended (a local annotation: never evaluated)

    def progress(event, name, said):
        done = sum(r is not None for r in results)
        elapsed = round(time.monotonic() - t0, 1)
        emit("progress", event=event, run=name, done=done, of=len(planned), running=len(running),
             side_by_side=width, elapsed=elapsed,
             said=f"{said} · {done} of {len(planned)} runs done, {len(running)} running · {elapsed:.0f} s")

    while waiting or running:
        while waiting and len(running) < width:
            i, (args, env, name) = waiting.pop(0)
            running.append((i, Run(args, env, name)))
            progress("started", name, f"{name} started" + (f" ({width} side by side)" if width > 1 else ""))
        time.sleep(0.2)
        for item in [r for r in running if r[1].ended()]:
            running.remove(item)
            i, run = item
            results[i] = t = run.finish()
            progress("ended", run.trial, f"{run.trial} {_how(t)} in {t['seconds']:.0f} s")
    return results


def _counts(d):
    return ", ".join(f"{k} ×{v}" for k, v in sorted(d.items(), key=lambda kv: (-kv[1], kv[0])))


def _how(t):
    """One trial's failure in words: "2 of 3 threads died (TypeError ×2), exit 1"."""
    if not t["failed"]:
        return f"passed ({t['threads']} threads)" if t["threads"] is not None else "passed"
    bits = []
    if t["died"]:
        bits.append(f"{t['died']} of {t['threads']} threads died ({_counts(t['died_of'])})")
    if t["main_error"]:
        bits.append(f"the main thread raised {t['main_error']['type']}")
    if t["timed_out"]:
        bits.append(f"timed out after {P['per_run_timeout']} s")
    elif t["exit"]:
        bits.append(f"exit {t['exit']}")
    if not t["died"] and not t["main_error"] and t["errors"]:
        bits.append(f"tracebacks: {_counts(t['errors'])}")
    return ", ".join(bits)


planned = [(*THREADED, f"trial {k + 1} of {int(P['trials'])}") for k in range(int(P["trials"]))]
if CONTROL is not None:
    planned.append((*CONTROL, "single-thread control"))
ran = run_all(planned)
trials, control = ran[:int(P["trials"])], (ran[-1] if CONTROL is not None else None)
started = [t["threads"] for t in trials if t["threads"] is not None]
no_thread = [t for t in trials if t["threads"] == 0 and not t["library_threads"]]
if trials and all(t["failed"] for t in trials) and len(no_thread) == len(trials):
    raise CouldNotReproduce(
        f"{NAME} failed in every trial before it started any thread ({'; '.join(_how(t) for t in trials)}): "
        "the threaded phase never ran, so this says nothing of a race (its output is above; are args and "
        "threaded_args what the entry takes?)"
    )
errors, died_of = {}, {}
for t in trials:
    for name, n in t["errors"].items():
        errors[name] = errors.get(name, 0) + n
    for name, n in t["died_of"].items():
        died_of[name] = died_of.get(name, 0) + n
failed = [t for t in trials if t["failed"]]
threads = max(started) if started else None
failure_types = set(died_of) | set(errors) | {t["main_error"]["type"] for t in failed if t["main_error"]}
control_failed = None if control is None else int(control["failed"])
control_types = set() if control is None else (set(control["died_of"]) | set(control["errors"])
                                                | ({control["main_error"]["type"]} if control["main_error"] else set()))
control_same = None if control is None else int(bool(control["failed"] and failed and control_types & failure_types))
compiles = [t["compiles_during_workers"] for t in trials if t["compiles_during_workers"] is not None]

said = f"{NAME}: {len(failed)} of {len(trials)} threaded trials failed"
if failed:
    said += " (" + "; ".join(f"trial {trials.index(t) + 1}: {_how(t)}" for t in failed[:4]) + ")"
if threads is not None:
    said += f"; the entry started {threads} thread{'s' if threads != 1 else ''} of its own"
if not P["control"]:
    said += ". No single-thread control this time (control = false)"
elif control is None:
    said += (". No single-thread control (set [probes.compile-race] control_args or control_env: how the entry "
             "runs with one worker): without it a failure cannot be told from an entry that fails anyway")
elif control["failed"]:
    said += f". The single-thread control failed too ({_how(control)})"
    said += ": the same failure without threads is not a thread race" if control_same else ""
else:
    said += f". The single-thread control passed ({control['threads']} thread{'s' if control['threads'] != 1 else ''})"
if compiles and sum(compiles):
    said += f"; {sum(compiles)} graphs compiled after the first worker started"
said += "."

emit(
    "result",
    threads=threads,
    trials=len(trials),
    failed_trials=len(failed),
    died=sum(t["died"] for t in trials),
    died_of=died_of,
    fx_trace_errors=sum(t["fx_trace_errors"] for t in trials),
    errors_total=max(sum(errors.values()), sum(died_of.values())),  # a death prints its traceback too
    errors=errors,
    compiles_during_workers=sum(compiles) if compiles else None,
    cold_cache=bool(P["cold_cache"]),
    race=P["race"],
    control_failed=control_failed,
    control_same_failure=control_same,
    control_errors=None if control is None else sum(control["errors"].values()) + control["died"],
    control_fx_trace_errors=None if control is None else control["fx_trace_errors"],
    control_threads=None if control is None else control["threads"],
    said=said,
    runs=trials + ([{"control": True, **control}] if control else []),
)

# pyright: reportPossiblyUnboundVariable=false
# (emit and params come from the prelude sleuth sends first; run standalone, emit from probes/far/common.py;
# the startup hook's text and the trial records from its parts, PROBE["parts"], run first)
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
    "parts": ["_race_hook.py", "_race_trial.py"],  # run first, in this namespace: the startup hook, the trial records
}

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # defined by the parts run first (PROBE["parts"]), in this namespace at the far end
    from ._race_hook import HOOK
    from ._race_trial import how_it_went, trial_record

if "emit" not in globals():  # run standalone: emit (JSON lines on stdout) from the far end's helper part
    import runpy

    _far = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "far", "common.py"))
    emit = _far["emit"]
    params = dict(PROBE["params"])
    _far["run_parts"](__file__, PROBE["parts"], globals())  # what sleuth sends first, run in this namespace


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
TIMEOUT = P["per_run_timeout"]  # the seconds one run may take: one past it is killed
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
        if time.monotonic() - self.started > TIMEOUT:
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
        return trial_record(self.trial, code, self.timed_out, seconds, rep, err)


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
            progress("ended", run.trial, f"{run.trial} {how_it_went(t, TIMEOUT)} in {t['seconds']:.0f} s")
    return results


planned = [(*THREADED, f"trial {k + 1} of {int(P['trials'])}") for k in range(int(P["trials"]))]
if CONTROL is not None:
    planned.append((*CONTROL, "single-thread control"))
ran = run_all(planned)
trials, control = ran[:int(P["trials"])], (ran[-1] if CONTROL is not None else None)
started = [t["threads"] for t in trials if t["threads"] is not None]
no_thread = [t for t in trials if t["threads"] == 0 and not t["library_threads"]]
if trials and all(t["failed"] for t in trials) and len(no_thread) == len(trials):
    raise CouldNotReproduce(
        f"{NAME} failed in every trial before it started any thread ({'; '.join(how_it_went(t, TIMEOUT) for t in trials)}): "
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
    said += " (" + "; ".join(f"trial {trials.index(t) + 1}: {how_it_went(t, TIMEOUT)}" for t in failed[:4]) + ")"
if threads is not None:
    said += f"; the entry started {threads} thread{'s' if threads != 1 else ''} of its own"
if not P["control"]:
    said += ". No single-thread control this time (control = false)"
elif control is None:
    said += (". No single-thread control (set [probes.compile-race] control_args or control_env: how the entry "
             "runs with one worker): without it a failure cannot be told from an entry that fails anyway")
elif control["failed"]:
    said += f". The single-thread control failed too ({how_it_went(control, TIMEOUT)})"
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

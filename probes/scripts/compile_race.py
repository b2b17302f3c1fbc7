# pyright: reportPossiblyUnboundVariable=false
# (emit and params come from the prelude sleuth sends first; run standalone, the file defines them)
"""Compile-race reproducer: run the training entry point K times with N threads and fresh
compile caches, plus a single-thread control; count failures by error type."""

PROBE = {
    "id": "compile-race",
    "stochastic": True,  # a race: each trial is a sample
    "title": "threaded reproducer with cold caches, and a single-thread control",
    "timeout": 900,
    "cost": 40,
    "needs": ["torch"],
    "params": {"entry": "examples/drafter/train.py", "args": [], "threads": 4, "trials": 3, "cold_cache": True,
               "race": "fx-trace", "control": True, "per_run_timeout": 300, "devices": None},
    "reports": ["threads", "trials", "failed_trials", "fx_trace_errors", "errors_total", "errors", "calls",
                "cold_cache", "race", "control_errors", "compiles_during_workers", "devices", "per_device"],
}

if "emit" not in globals():  # run standalone: records as JSON lines on stdout
    import json

    def emit(kind, **fields):
        print(json.dumps({"kind": kind, **fields}, default=str))

    params = dict(PROBE["params"])

import json
import os
import re
import subprocess
import sys
import tempfile

FX_ERROR = "Detected that you are using FX to symbolically trace a dynamo-optimized function"
P = {**PROBE["params"], **params}


class CouldNotReproduce(RuntimeError):
    """The probe could not do what it was asked: it ends failed, and gives no evidence."""


if not os.path.isfile(P["entry"]):
    raise CouldNotReproduce(
        f"entry {P['entry']} not found in {os.getcwd()}: nothing was run; set [probes.compile-race] entry "
        "in sleuth.toml or pass --param entry=PATH (relative to the target's workdir)"
    )


def run_once(threads):
    argv = [sys.executable, P["entry"], *P["args"], "--threads", str(threads), "--race", P["race"]]
    if P.get("devices"):  # one drafter per device (the example drafter's --devices)
        devices = P["devices"] if isinstance(P["devices"], str) else ",".join(P["devices"])
        argv += ["--devices", devices]
    env = dict(os.environ)
    if P["cold_cache"]:
        fresh = tempfile.mkdtemp(prefix="sleuth-cold-")
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(fresh, "inductor")
        env["TRITON_CACHE_DIR"] = os.path.join(fresh, "triton")
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=P["per_run_timeout"])
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    summary = None
    for line in reversed(proc.stdout.splitlines()):
        try:
            candidate = json.loads(line)
        except ValueError:
            continue
        if isinstance(candidate, dict) and "errors" in candidate:
            summary = candidate
            break
    if summary is None:  # not the example drafter: read the error types off stderr
        errors = {}
        for m in re.finditer(r"^(\w+(?:Error|Exception))\b", proc.stderr, re.M):
            errors[m.group(1)] = errors.get(m.group(1), 0) + 1
        summary = {"errors": errors, "steps": None, "compiles_during_workers": None}
    summary["exit"] = proc.returncode
    summary["fx_trace_errors"] = proc.stderr.count(FX_ERROR) and max(
        proc.stderr.count(FX_ERROR), summary["errors"].get("RuntimeError", 0)
    )
    return summary


trials = [run_once(P["threads"]) for _ in range(int(P["trials"]))]
if trials and all(t["exit"] != 0 and not t["fx_trace_errors"] and not t.get("steps") for t in trials):
    codes = sorted({t["exit"] for t in trials})
    seen = sorted({name for t in trials for name in t["errors"]})
    raise CouldNotReproduce(
        f"{P['entry']} exited {', '.join(map(str, codes))} in every trial"
        + (f" ({', '.join(seen)})" if seen else " with no error sleuth can count")
        + " before any step or FX error: the threaded phase never ran (its output is above)"
    )
control = run_once(1) if P["control"] else None
errors = {}
for t in trials:
    for name, n in t["errors"].items():
        errors[name] = errors.get(name, 0) + n
per_device = {}
for t in trials:  # several devices: which failed, trial by trial
    for dev, counts in (t.get("per_device") or {}).items():
        d = per_device.setdefault(dev, {"steps": 0, "errors": 0, "failed_trials": 0})
        d["steps"] += counts.get("steps") or 0
        n = sum((counts.get("errors") or {}).values())
        d["errors"] += n
        d["failed_trials"] += 1 if n else 0
emit(
    "result",
    threads=P["threads"],
    devices=trials[0].get("devices") if trials else None,
    per_device=per_device or None,
    trials=len(trials),
    failed_trials=sum(1 for t in trials if t["errors"] or t["exit"]),
    fx_trace_errors=sum(t["fx_trace_errors"] for t in trials),
    errors_total=sum(errors.values()),
    errors=errors,
    calls=sum(t.get("steps") or 0 for t in trials),
    compiles_during_workers=sum(t.get("compiles_during_workers") or 0 for t in trials),
    cold_cache=bool(P["cold_cache"]),
    race=P["race"],
    control_errors=sum(control["errors"].values()) if control else None,
    control_fx_trace_errors=control["fx_trace_errors"] if control else None,
    runs=trials + ([{"control": True, **control}] if control else []),
)

"""compile-race's part that reads one run of the entry into its trial record: the exit status,
the tracebacks its stderr shows, and what the startup hook measured (the threads, the deaths,
the compiles after the first worker); and a trial's outcome in words. Sent before
probes/scripts/compile_race.py (its PROBE says ``"parts"``) and run in the same namespace."""

import re

FX_ERROR = "Detected that you are using FX to symbolically trace a dynamo-optimized function"
TYPE_LINE = re.compile(r"^(\w+(?:Error|Exception|Interrupt))\b", re.M)


def trial_record(trial, code, timed_out, seconds, rep, err):
    """What one run did, from its exit *code*, its stderr *err* and the hook's report *rep*
    (None where it wrote none): the record each trial is in the result's runs."""
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


def counts(d):
    return ", ".join(f"{k} ×{v}" for k, v in sorted(d.items(), key=lambda kv: (-kv[1], kv[0])))


def how_it_went(t, limit):
    """One trial's failure in words: "2 of 3 threads died (TypeError ×2), exit 1" (*limit*: the
    seconds a run may take, said of one that timed out)."""
    if not t["failed"]:
        return f"passed ({t['threads']} threads)" if t["threads"] is not None else "passed"
    bits = []
    if t["died"]:
        bits.append(f"{t['died']} of {t['threads']} threads died ({counts(t['died_of'])})")
    if t["main_error"]:
        bits.append(f"the main thread raised {t['main_error']['type']}")
    if t["timed_out"]:
        bits.append(f"timed out after {limit} s")
    elif t["exit"]:
        bits.append(f"exit {t['exit']}")
    if not t["died"] and not t["main_error"] and t["errors"]:
        bits.append(f"tracebacks: {counts(t['errors'])}")
    return ", ".join(bits)

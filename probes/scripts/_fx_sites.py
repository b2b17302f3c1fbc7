"""fx-trace-state's part that says where: the site of each torch.compile that ran (the user's
code, a library's, torch's own with the frame outside torch that reached it) and of each
flex_attention call that ran uncompiled, kept as one record per site, and the sentence that
names them. Sent before probes/scripts/fx_trace_state.py (its PROBE says ``"parts"``) and run
first, in the same namespace: it names that namespace's module before anything is defined."""

import os
import sys
import threading

# Dynamo looks a traced function's globals up through its module, by name: sleuth's wrappers
# (which a compiled function of the entry's may trace into) are found under a name of their
# own, not "__main__", which runpy gives the entry while it runs.
_this = sys.modules.get(globals().get("__name__") or "__main__")
if _this is not None and _this.__dict__ is globals():
    globals()["__name__"] = "sleuth_fx_trace_state"
    sys.modules["sleuth_fx_trace_state"] = _this

import torch

lock = threading.Lock()  # the probe's records are filled from every thread of the entry
sites = {}  # key -> the site's record, in the order first seen
OWN = globals()  # the probe's namespace: sleuth's own frames (any of its files) are never a site
TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


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
    while frame is not None and frame.f_globals is OWN:
        frame = frame.f_back
    if frame is None:
        return {"site": "?", "file": None, "line": None, "reached_from": None, "library": None}
    path = frame.f_code.co_filename
    reached = None
    if in_torch(path):
        up = frame.f_back
        while up is not None and (up.f_globals is OWN or in_torch(up.f_code.co_filename)):
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


def entry_named(site, entry):
    """module:line, the entry's own module (runpy's __main__) by its file's name."""
    return os.path.basename(entry) + site[len("__main__"):] if site.startswith("__main__:") else site


def sites_sentence(found, flex_calls, traced, entry):
    compiled = [r for r in found if r["kind"] == "compile"]
    eager = [r for r in found if r["kind"] == "eager"]
    parts = []
    for i, r in enumerate(compiled):
        text = f"{r['target']}{' is compiled' if i == 0 else ''} at {shown(r)}"
        if r["reached_from"]:
            text += f" reached from {entry_named(r['reached_from'], entry)}"
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

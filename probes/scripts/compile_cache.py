# pyright: reportPossiblyUnboundVariable=false
# (emit and params come from the prelude sleuth sends first; run standalone, emit from probes/far/common.py)
"""Compile cache, measured: compile in a fresh process against the target's real caches and
report inductor's own counters (FX graph cache hits, misses, bypasses; AOTAutograd's beside
them) and each compile's cache key with its named parts, as inductor builds them
(FxGraphHashDetails / AOTAutogradCacheDetails: the graph, the inputs, the compile options,
inductor's config, the torch version, the system). sleuth compares those parts with the last
run on this target that hit (hypotheses/cache_keys.py) to say what changed."""

PROBE = {
    "fork": True,  # the compile itself runs in a child process of its own
    "id": "compile-cache",
    "title": "compile cache: inductor's hit/miss/bypass counters and what in the key changed",
    "timeout": 600,
    "cost": 2,
    "analysis": "compile-cache",
    "params": {"entry": None, "args": [], "env": {}},
    "reports": ["hits", "misses", "bypasses", "autograd_hits", "autograd_misses", "autograd_bypasses", "changed",
                "wiped", "compared_with", "cold", "cache_dir", "bypass_reasons", "host"],
}

if "emit" not in globals():  # run standalone: emit (JSON lines on stdout) from the far end's helper part
    import os
    import runpy

    _far = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "far", "common.py"))
    emit = _far["emit"]
    params = {}

import json
import os
import subprocess
import sys
import tempfile

# The child: a fresh interpreter, so the counters are this compile's alone and inductor's config
# is read from the target's environment as the job's would be. It notes every cache key inductor
# computes (the FX graph's and AOTAutograd's, with inductor's own per-part debug lines: the
# autograd cache computes them only with its logger at debug level, so it is set so, silently),
# runs the entry (or a small built-in function), and writes what it saw to argv[1].
CHILD = r'''
import json, logging, os, re, runpy, sys
out, entry, args = sys.argv[1], sys.argv[2], sys.argv[3:]
import torch
from torch._dynamo.utils import counters
from torch._inductor import codecache
LINE = re.compile(r"^\[([a-z0-9]+)\] ([^:]+): ?(.*)$", re.S)
keys, bypass = [], []

def parts(lines):
    got = {}
    for line in lines:
        m = LINE.match(line)
        if m:
            name, value = m.group(2).strip(), m.group(3)
            if name in ("gm", "torch_version"):
                value = ""  # the graph's code and torch's source hash: the hash says it
            got[name] = [m.group(1), value if len(value) <= 120 else value[:117] + "..."]
    return got

def spy(module, name, kind):
    real = getattr(module, name)
    def noted(*a, **k):
        got = real(*a, **k)
        try:
            keys.append({"kind": kind, "key": str(got[0]), "parts": parts(got[1])})
        except Exception:
            pass
        return got
    setattr(module, name, noted)

# inductor's two bypass lines, exactly: its debug lines (the key's parts) may hold the word too
BYPASS = re.compile(r"^Bypassing FX Graph Cache because '(.*)'$|^Bypassing autograd cache due to:? (.*)$", re.S)

class Bypass(logging.Handler):
    def emit(self, record):
        m = BYPASS.match(record.getMessage())
        if m:
            bypass.append((m.group(1) if m.group(1) is not None else m.group(2)).strip()[:300])

for name in ("torch._functorch._aot_autograd.autograd_cache", "torch._inductor.codecache"):
    lg = logging.getLogger(name)
    lg.setLevel(logging.DEBUG)
    lg.propagate = False
    lg.addHandler(Bypass())
spy(codecache, "compiled_fx_graph_hash", "fxgraph")
try:
    from torch._functorch._aot_autograd import autograd_cache
    spy(autograd_cache, "autograd_cache_key", "autograd")
except Exception:
    pass

def builtin(x):
    return torch.sin(x) * 2 + x.cos()

failed = None
try:
    if entry:
        sys.argv = [entry, *args]
        runpy.run_path(entry, run_name="__main__")
    else:
        torch.compile(builtin)(torch.randn(8))
except SystemExit as exc:
    if exc.code not in (None, 0):
        failed = f"the entry exited {exc.code}"
except BaseException as exc:
    failed = f"{type(exc).__name__}: {exc}"[:500]

try:
    import triton
    triton_version = triton.__version__
except Exception:
    triton_version = None
cuda = torch.cuda.is_available()
system = {"cuda": torch.version.cuda, "hip": getattr(torch.version, "hip", None), "triton": triton_version,
          "device": torch.cuda.get_device_name() if cuda else "cpu"}
import socket
json.dump({"host": socket.gethostname(), "inductor": dict(counters["inductor"]), "aot": dict(counters["aot_autograd"]), "keys": keys,
           "bypass": bypass, "failed": failed, "system": system,
           "torch": {"version": torch.__version__, "git": torch.version.git_version},
           "cache_dir": codecache.cache_dir()}, open(out, "w"), default=str)
'''


def main():
    entry = params.get("entry") or ""
    if entry and not os.path.isfile(entry):
        emit("error", message=f"entry {entry} not found in {os.getcwd()}: nothing was compiled; pass "
                              "--param entry=PATH (relative to the target's workdir), or leave it out for the built-in compile")
        return
    # the entry's own environment (its TORCHINDUCTOR_CACHE_DIR above all): the cache it uses
    env = {**os.environ, **{str(k): str(v) for k, v in (params.get("env") or {}).items()}}
    fd, out = tempfile.mkstemp(prefix="sleuth-compile-cache-", suffix=".json")
    os.close(fd)
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, out, entry, *map(str, params.get("args") or [])], env=env)
        try:
            with open(out) as f:
                seen = json.load(f)
        except (OSError, ValueError):
            emit("error", message=f"the compile process exited {proc.returncode} before it said what it saw "
                                  "(its output above has why)")
            return
    finally:
        os.unlink(out)
    ind, aot = seen["inductor"], seen["aot"]
    emit("result",
         hits=int(ind.get("fxgraph_cache_hit", 0)), misses=int(ind.get("fxgraph_cache_miss", 0)),
         bypasses=int(ind.get("fxgraph_cache_bypass", 0)),
         autograd_hits=int(aot.get("autograd_cache_hit", 0)), autograd_misses=int(aot.get("autograd_cache_miss", 0)),
         autograd_bypasses=int(aot.get("autograd_cache_bypass", 0)),
         # reasons only where inductor counted a bypass
         bypass_reasons=sorted(set(seen["bypass"]))[:10] if int(ind.get("fxgraph_cache_bypass", 0))
         + int(aot.get("autograd_cache_bypass", 0)) else [],
         compiles=seen["keys"], torch=seen["torch"], system=seen["system"], cache_dir=seen["cache_dir"],
         host=seen.get("host"),
         triton_cache_dir=env.get("TRITON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".triton", "cache"),
         entry=entry or "(built-in)", failed=seen["failed"])


main()

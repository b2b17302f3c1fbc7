# pyright: reportPossiblyUnboundVariable=false
# (emit and params come from the prelude sleuth sends first; run standalone, the file defines them)
"""Compile-cache inventory: where the inductor and triton caches are, how big, how new,
and whether they were written by the torch that is installed now."""

PROBE = {
    "fork": True,  # reads state only: safe to fork from a warm agent
    "id": "cache-inventory",
    "title": "compile caches: locations, sizes, entries, newest entries, torch/triton keys",
    "timeout": 120,
    "cost": 1,
    "reports": ["cold", "keys_match", "entries", "caches", "torch_installed"],
}

if "emit" not in globals():  # run standalone: records as JSON lines on stdout
    import json

    def emit(kind, **fields):
        print(json.dumps({"kind": kind, **fields}, default=str))

    params = {}

import getpass
import importlib.util
import os
import re
import tempfile
import time


def user():
    try:
        return re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())
    except Exception:
        return "unknown"


def torch_install_time():
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def inventory(path, newest_n=5, limit=500000):
    info = {"path": path, "exists": os.path.isdir(path), "files": 0, "bytes": 0, "entries": 0, "newest": []}
    if not info["exists"]:
        return info
    info["entries"] = len(os.listdir(path))
    newest = []
    oldest = (None, None)
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            info["files"] += 1
            info["bytes"] += st.st_size
            newest.append((st.st_mtime, os.path.relpath(full, path)))
            if oldest[0] is None or st.st_mtime < oldest[0]:
                oldest = (st.st_mtime, os.path.relpath(full, path))
            if len(newest) > 4 * newest_n:
                newest = sorted(newest)[-newest_n:]
            if info["files"] >= limit:
                info["truncated"] = True
                break
    newest = sorted(newest)[-newest_n:]
    info["newest"] = [{"file": f, "age_s": round(time.time() - t, 1)} for t, f in reversed(newest)]
    if oldest[0] is not None:
        info["oldest"] = {"file": oldest[1], "age_s": round(time.time() - oldest[0], 1)}
    info["newest_mtime"] = newest[-1][0] if newest else None
    info["oldest_of_newest_mtime"] = newest[0][0] if newest else None
    return info


dirs = {
    "inductor": os.environ.get("TORCHINDUCTOR_CACHE_DIR") or os.path.join(tempfile.gettempdir(), "torchinductor_" + user()),
    "triton": os.environ.get("TRITON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".triton", "cache"),
}
for extra in params.get("extra_dirs", []):
    dirs[extra] = extra
caches = {name: inventory(path) for name, path in dirs.items()}
installed = torch_install_time()
files = sum(c["files"] for c in caches.values())
newest = max((c.get("newest_mtime") or 0) for c in caches.values()) if files else None
# A cache whose newest entry is older than the torch install was written by another torch:
# its keys no longer match, so the next compile starts cold.
keys_match = True if not files or installed is None else (newest or 0) >= installed
# Inductor keys its FX-graph cache by torch version and config, triton by its own version and
# the CUDA toolchain: a reinstall keeps the directories but no entry matches any more.
keyed_by = {"inductor": "torch version + inductor config + graph code", "triton": "triton version + CUDA toolchain + kernel source"}
emit(
    "result",
    keyed_by=keyed_by,
    newer_than_torch=bool(files) and installed is not None and (newest or 0) >= installed,
    caches=caches,
    entries=files,
    cold=files == 0,
    keys_match=keys_match,
    torch_installed=installed,
    torch_installed_age_s=round(time.time() - installed, 1) if installed else None,
)

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
    "reports": ["cold", "keys_match", "written_by", "keys_said", "entries", "caches", "torch_installed"],
}

if "emit" not in globals():  # run standalone: records as JSON lines on stdout
    import json

    def emit(kind, **fields):
        print(json.dumps({"kind": kind, **fields}, default=str))

    params = {}

import getpass
import importlib.util
import json
import os
import re
import tempfile
import time


def user():
    try:
        return re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())
    except Exception:
        return "unknown"


def torch_install():
    """The installed torch: its folder, when version.py was written, and the version and commit
    the prelude's state read recorded for that install (its list of installs seen)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = list(spec.submodule_search_locations)[0]
    try:
        installed = os.stat(os.path.join(folder, "version.py")).st_mtime
    except OSError:
        return None
    seen = next((e for e in installs_seen() if e.get("dir") == folder and e["installed"] == installed), {})
    return {"dir": folder, "installed": installed, "version": seen.get("version"), "git": seen.get("git")}


def installs_seen():
    """The torch installs sleuth's state reads saw on this machine (the prelude keeps the list)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    try:
        with open(os.path.join(cache, "sleuth", "torch-installs.json")) as f:
            seen = json.load(f)
    except (OSError, ValueError):
        return []
    return [e for e in seen if isinstance(e, dict) and isinstance(e.get("installed"), (int, float))]


def when(t):
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def build(e):
    return (e.get("version") or "?") + (f" (git {str(e['git'])[:10]})" if e.get("git") else "")


def judge_keys(files, newest, now):
    """Whether the caches' keys match the installed torch: inductor keys every entry by torch's
    version and a hash of its sources (torch_key()), so entries written under another build
    never hit. An entry older than the install was written under the install before it: sleuth
    knows which build that was when one of its state reads saw it; otherwise it does not say."""
    if now is None:  # no torch to key the caches: nothing is said of them, cold or not
        return None, None, "torch is not installed here"
    if not files:
        return True, None, "no cache entries: nothing to match (cold)"
    if newest >= now["installed"]:
        return True, now.get("version"), f"written since this torch ({build(now)}) was installed on {when(now['installed'])}"
    earlier = [e for e in installs_seen() if e.get("dir") == now["dir"] and e["installed"] <= newest]
    if not earlier:
        return None, None, (f"every entry is older than this torch's install ({when(now['installed'])}) and sleuth saw no "
                            "earlier install here: which build wrote them is not known (an identical reinstall keeps "
                            "the keys; another version or build does not)")
    if now.get("version") is None:  # this install's build was not recorded (a read-only home)
        return None, None, "which torch build is installed now was not recorded: whether the keys match is not known"
    prev = max(earlier, key=lambda e: e["installed"])
    same = (prev.get("version"), prev.get("git")) == (now.get("version"), now.get("git"))
    if same:
        return True, prev.get("version"), (f"written under an earlier install of the same build ({build(now)}, "
                                           f"installed {when(prev['installed'])}): the keys still hold")
    return False, prev.get("version"), (f"written under torch {build(prev)}, installed {when(prev['installed'])}; "
                                        f"torch is now {build(now)} (installed {when(now['installed'])}): no entry "
                                        "matches, the next compile starts cold")


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
now = torch_install()
installed = now["installed"] if now else None
files = sum(c["files"] for c in caches.values())
newest = max((c.get("newest_mtime") or 0) for c in caches.values()) if files else None
keys_match, written_by, keys_said = judge_keys(files, newest or 0, now)
# Inductor keys its FX-graph cache by torch version and config, triton by its own version and
# the CUDA toolchain: a reinstall keeps the directories but no entry matches any more.
keyed_by = {"inductor": "torch version + inductor config + graph code", "triton": "triton version + CUDA toolchain + kernel source"}
emit(
    "result",
    keyed_by=keyed_by,
    newer_than_torch=bool(files) and installed is not None and (newest or 0) >= installed,
    caches=caches,
    entries=files,
    cold=files == 0 if now is not None else None,  # no torch here: no compile starts cold
    keys_match=keys_match,
    written_by=written_by,
    keys_said=keys_said,
    torch_installed=installed,
    torch_installed_age_s=round(time.time() - installed, 1) if installed else None,
)

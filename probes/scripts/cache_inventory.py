# pyright: reportPossiblyUnboundVariable=false
# (emit, params, cache_folder and install_time come from the prelude sleuth sends first; run
# standalone, all but params come from probes/far/common.py)
"""Compile-cache inventory, as context: where the inductor and triton caches are, how big, how
new, and — per folder — whether its entries were written since the torch (triton) installed now,
against the install time its dist-info RECORD says. File times never say whether a compile hits
(compile-cache measures that); a default per-user folder is shared by every environment of the
user, so entries older than this install are said to be another environment's when sleuth saw
one."""

PROBE = {
    "fork": True,  # reads state only: safe to fork from a warm agent
    "id": "cache-inventory",
    "title": "compile caches: locations, sizes, entries, newest entries, torch/triton keys",
    "timeout": 120,
    "cost": 1,
    "reports": ["cold", "keys_match", "written_by", "keys_said", "entries", "caches", "torch_installed", "stale"],
}

if "emit" not in globals():  # run standalone: emit (JSON lines on stdout) from the far end's helper part
    import os
    import runpy

    _far = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "far", "common.py"))
    emit, cache_folder, install_time = _far["emit"], _far["cache_folder"], _far["install_time"]
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


def installed(dist):
    """{dir, installed} of the package *dist* importable here, or None."""
    try:
        spec = importlib.util.find_spec(dist)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = list(spec.submodule_search_locations)[0]
    at = install_time(folder, dist)
    return {"dir": folder, "installed": at} if at is not None else None


def torch_install():
    """The installed torch: its folder, its install time, and the version and commit the
    prelude's state read recorded for that install (its list of installs seen)."""
    now = installed("torch")
    if now is None:
        return None
    seen = next((e for e in installs_seen() if e.get("dir") == now["dir"] and e["installed"] == now["installed"]), {})
    return {**now, "version": seen.get("version"), "git": seen.get("git")}


def installs_seen():
    """The torch installs sleuth's state reads saw for this user (the prelude keeps the list)."""
    try:
        with open(cache_folder("torch-installs.json")) as f:
            seen = json.load(f)
    except (OSError, ValueError):
        return []
    return [e for e in seen if isinstance(e, dict) and isinstance(e.get("installed"), (int, float))]


def when(t):
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def build(e):
    return (e.get("version") or "?") + (f" (git {str(e['git'])[:10]})" if e.get("git") else "")


def inventory(path, since, newest_n=5, limit=500000):
    """Sizes, counts and the newest entries of one cache folder; `stale`: its files older than
    *since* (the install they are judged against), counted file by file — one fresh entry does
    not hide the others."""
    info = {"path": path, "exists": os.path.isdir(path), "files": 0, "bytes": 0, "entries": 0, "newest": [],
            "stale": 0}
    if not info["exists"]:
        return info
    try:
        st = os.stat(path)
        info["owner_uid"] = st.st_uid
    except OSError:
        pass
    info["entries"] = len(os.listdir(path))
    newest, oldest, stale_t = [], (None, None), []
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            info["files"] += 1
            info["bytes"] += st.st_size
            if since is not None and st.st_mtime < since:
                info["stale"] += 1
                stale_t.append(st.st_mtime)
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
    info["newest_stale_mtime"] = max(stale_t) if stale_t else None
    return info


def judge_torch_folder(info, now, shared):
    """(keys_match, written_by, said) for an inductor folder against the torch installed now.
    Inductor keys every entry by torch's version and a hash of its sources, so an entry written
    under another build never hits. An entry older than the install was written under the
    install before it — in this environment, or, in a folder shared by the user's environments,
    maybe in another: sleuth names the build only when its own state reads saw it."""
    fresh = info["files"] - info["stale"]
    if not info["files"]:
        return True, None, "empty (cold)"
    if not info["stale"]:
        return True, now.get("version"), f"all {info['files']} files written since this torch ({build(now)}) was installed"
    part = f"{info['stale']} of {info['files']} files are older than this torch's install ({when(now['installed'])})"
    part += f", {fresh} newer" if fresh else ""
    seen = installs_seen()
    others = sorted({e["dir"] for e in seen if e.get("dir") != now["dir"]})
    if shared and others:
        return None, None, (f"{part}; the folder is shared by every Python environment of user {user()} and sleuth saw "
                            f"torch in {len(others)} other ({', '.join(others[:3])}): the older files may be theirs")
    earlier = [e for e in seen if e.get("dir") == now["dir"] and e["installed"] <= info["newest_stale_mtime"]]
    if not earlier:
        return None, None, (f"{part} and sleuth saw no earlier install here: which build wrote them is not known (an "
                            "identical reinstall keeps the keys; another version or build does not)")
    if now.get("version") is None:  # this install's build was not recorded (a read-only home)
        return None, None, f"{part}; which torch build is installed now was not recorded: whether they match is not known"
    prev = max(earlier, key=lambda e: e["installed"])
    if (prev.get("version"), prev.get("git")) == (now.get("version"), now.get("git")):
        return True, prev.get("version"), (f"{part}: written under an earlier install of the same build ({build(now)}, "
                                           f"installed {when(prev['installed'])}), the keys still hold")
    return False, prev.get("version"), (f"{part}: written under torch {build(prev)}, installed {when(prev['installed'])}; "
                                        f"torch is now {build(now)}: those entries never hit")


def judge_triton_folder(info):
    """Triton keys its kernels by its own version and the CUDA toolchain: judged against the
    triton installed here, or said to be another environment's when there is none."""
    if not info["files"]:
        return True, "empty (cold)"
    tri = installed("triton")
    if tri is None:
        return None, f"{info['files']} files, and no triton is installed in this environment: they are another's"
    if not info["stale"]:
        return True, f"all {info['files']} files written since this triton was installed"
    return None, (f"{info['stale']} of {info['files']} files are older than this triton's install "
                  f"({when(tri['installed'])}): written by an earlier triton or another environment's")


now = torch_install()
inductor_set = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
triton_set = os.environ.get("TRITON_CACHE_DIR")
dirs = {
    "inductor": (inductor_set or os.path.join(tempfile.gettempdir(), "torchinductor_" + user()), not inductor_set),
    "triton": (triton_set or os.path.join(os.path.expanduser("~"), ".triton", "cache"), not triton_set),
}
tri_now = installed("triton")
caches = {}
for name, (path, shared) in dirs.items():
    since = (now or {}).get("installed") if name == "inductor" else (tri_now or {}).get("installed")
    info = inventory(path, since)
    info["scope"] = f"every environment of user {user()}" if shared else ("set by " + ("TORCHINDUCTOR_CACHE_DIR" if name == "inductor" else "TRITON_CACHE_DIR"))
    if name == "inductor":
        if now is None:
            info["keys_match"], info["written_by"], info["said"] = None, None, "torch is not installed here"
        else:
            info["keys_match"], info["written_by"], info["said"] = judge_torch_folder(info, now, shared)
    else:
        info["keys_match"], info["said"] = judge_triton_folder(info)
    caches[name] = info
for extra in params.get("extra_dirs", []):
    caches[extra] = {**inventory(extra, None), "scope": "asked for", "keys_match": None, "said": "not judged"}

files = sum(c["files"] for c in caches.values())
judged = [c for c in (caches["inductor"], caches["triton"]) if c["files"]]
if now is None:
    keys_match = None  # no torch to key the caches: nothing is said of them
elif any(c["keys_match"] is False for c in judged):
    keys_match = False
elif all(c["keys_match"] is True for c in judged):
    keys_match = True
else:
    keys_match = None
said = "torch is not installed here" if now is None else "; ".join(
    f"{name} ({c['path']}, {c['scope']}): {c['said']}" for name, c in caches.items() if name in ("inductor", "triton"))
emit(
    "result",
    keyed_by={"inductor": "torch version and source hash + inductor config + graph + inputs + device",
              "triton": "triton version + CUDA toolchain + kernel source"},
    caches=caches,
    entries=files,
    stale=sum(c["stale"] for c in caches.values()),
    cold=files == 0 if now is not None else None,  # no torch here: no compile starts cold
    keys_match=keys_match,
    written_by=caches["inductor"].get("written_by"),
    keys_said=said,
    torch_installed=now["installed"] if now else None,
    torch_installed_age_s=round(time.time() - now["installed"], 1) if now else None,
)

# sleuth overlay: sent after the prelude (which gives it emit, params and the helper part's
# cache_folder), never imported.
# Standard library only; it must run on any Python 3.8+ at the far end.
#
# make:   a fresh directory under the user's cache (~/.cache/sleuth/overlays/NAME) holding
#         site/, where `python -B -m pip install --target` puts package==version (and, unless
#         no_deps, what it needs). Runs put site/ first on sys.path; the target's own
#         environment is never written: pip --target writes only there, -B and
#         PYTHONDONTWRITEBYTECODE keep bytecode out of the environment's folders.
# remove: delete an overlay this script made (it holds a .sleuth-overlay marker), nothing else.
import json
import os
import re
import shutil
import subprocess
import sys
import time

# pip's words for an index it could not reach (urllib3 / requests, through pip's retries)
UNREACHABLE = re.compile(
    r"NewConnectionError|ConnectTimeoutError|ReadTimeoutError|Failed to establish a new connection|"
    r"Name or service not known|Temporary failure in name resolution|nodename nor servname|Network is unreachable|"
    r"No route to host|Connection refused|ProxyError|SSLError|Max retries exceeded|connection broken by"
)
MARKER = ".sleuth-overlay"
emit = globals()["emit"]  # the prelude's
params = globals()["params"]
cache_folder = globals()["cache_folder"]  # the helper part's (common.py), which the prelude gives a probe


def root():
    return cache_folder("overlays")


def in_environment(name):
    """The version of *name* this interpreter imports without the overlay (None: not installed)."""
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        return None
    try:
        return metadata.version(name)
    except Exception:
        return None


def plan(cmd, top, env):
    """Before the install: what pip will put in the overlay (a dry run's report, pip >= 22.2),
    each with the version the environment has of it; said as a record, never a failure."""
    report = os.path.join(top, "plan.json")
    dry = [a for a in cmd if a != "-vv"]
    dry[dry.index("install") + 1:dry.index("install") + 1] = ["--dry-run", "--quiet", "--report", report]
    try:
        proc = subprocess.run(dry, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, universal_newlines=True)
        if proc.returncode != 0:  # the install itself will say why (an index down, no such version)
            emit("plan", known=False, failed=True, reason="pip's dry run failed (exit %d)" % proc.returncode)
            return
        with open(report) as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:  # a pip before 22.2 has no --report
        emit("plan", known=False, reason="pip's dry run said nothing readable (%s)" % (exc.__class__.__name__,))
        return
    finally:
        if os.path.exists(report):
            os.remove(report)
    dists = []
    for item in data.get("install") or []:
        meta = item.get("metadata") or {}
        name = meta.get("name") or "?"
        dists.append({"name": name, "version": meta.get("version"), "environment": in_environment(name),
                      "requested": bool(item.get("requested"))})
    emit("plan", known=True, distributions=dists)


def tree_bytes(path):
    total = 0
    for base, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(base, name)).st_size
            except OSError:
                pass
    return total


def installed(site):
    """Every distribution pip put in *site*: name, version, its files' bytes (from RECORD) and
    the version the environment has of it (what the overlay shadows)."""
    found = []
    for entry in sorted(os.listdir(site)):
        if not entry.endswith(".dist-info"):
            continue
        info = os.path.join(site, entry)
        name, version = entry[:-len(".dist-info")].rpartition("-")[::2]
        try:
            with open(os.path.join(info, "METADATA"), encoding="utf-8", errors="replace") as f:
                for line in f:
                    if not line.strip():
                        break
                    if line.startswith("Name:"):
                        name = line[5:].strip()
                    elif line.startswith("Version:"):
                        version = line[8:].strip()
        except OSError:
            pass
        size = 0
        try:
            with open(os.path.join(info, "RECORD"), encoding="utf-8", errors="replace") as f:
                for row in f:
                    cells = row.rstrip("\n").rsplit(",", 2)
                    if len(cells) == 3 and cells[2].isdigit():
                        size += int(cells[2])
        except OSError:
            size = None
        found.append({"name": name, "version": version, "bytes": size, "environment": in_environment(name)})
    return found


def make(p):
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", "%s-%s-%s" % (p["issue"], p["package"], p["version"]))[:80]
    top = os.path.join(root(), "%s-%d-%d" % (name, int(time.time()), os.getpid()))
    site = os.path.join(top, "site")
    os.makedirs(site)
    with open(os.path.join(top, MARKER), "w") as f:
        json.dump({"issue": p["issue"], "package": p["package"], "version": p["version"], "python": sys.executable,
                   "created": time.time()}, f)
    # -vv: pip says why it could not read an index ("Could not fetch URL …: connection error")
    # only at debug level; without it an unreachable index reads as "no matching distribution"
    cmd = [sys.executable, "-B", "-m", "pip", "-vv", "install", "--target", site, "--no-input",
           "--disable-pip-version-check",
           "--retries", "0", "--timeout", str(p.get("timeout", 15)), "%s==%s" % (p["package"], p["version"])]
    if p.get("no_deps"):
        cmd.append("--no-deps")
    if p.get("index_url"):
        cmd += ["--index-url", p["index_url"]]
    for link in p.get("find_links") or []:
        cmd += ["--find-links", link]
    if p.get("no_index"):
        cmd.append("--no-index")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PIP_NO_INPUT="1")
    env.pop("PYTHONPATH", None)
    plan(cmd, top, env)
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, universal_newlines=True)
    except OSError as exc:
        shutil.rmtree(top, ignore_errors=True)
        emit("result", ok=False, cause="no-pip", reason="pip could not be started: %s" % exc, command=cmd)
        return
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    if proc.returncode == 0:
        emit("result", ok=True, path=top, site=site, command=cmd, distributions=installed(site),
             bytes=tree_bytes(site))
        return
    shutil.rmtree(top, ignore_errors=True)  # nothing half-made is left behind
    text = proc.stderr + proc.stdout
    if re.search(r"No module named pip\b", text):
        cause = "no-pip"
    elif UNREACHABLE.search(text):
        cause = "index-unreachable"
    elif re.search(r"No matching distribution found|Could not find a version that satisfies", text):
        cause = "not-found"
    else:
        cause = "pip-failed"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    said = [ln for ln in lines if UNREACHABLE.search(ln)] if cause == "index-unreachable" else \
        [ln for ln in lines if ln.startswith("ERROR")]
    emit("result", ok=False, cause=cause, exit=proc.returncode, reason=(said or lines or ["(no output)"])[-1][:400],
         command=cmd)


def remove(p):
    top = os.path.realpath(p["path"])
    inside = top.startswith(os.path.realpath(root()) + os.sep)
    if inside and not os.path.exists(top):
        emit("result", ok=True, path=top, gone_already=True)
        return
    if not inside or not os.path.isfile(os.path.join(top, MARKER)):
        emit("result", ok=False, cause="not-an-overlay", reason="%s is not an overlay sleuth made; left alone" % top)
        return
    shutil.rmtree(top)
    emit("result", ok=not os.path.exists(top), path=top)


if params.get("action") == "remove":
    remove(params)
else:
    make(params)

# sleuth probe prelude. This file is not imported: sleuth sends its text, followed by one
# call of _sleuth_main(config), to `python -` on the target's stdin. Standard library only;
# it must run on any Python 3.8+ at the far end.
import json as _json
import os as _os
import sys as _sys


def _sleuth_main(config):
    import re
    import select
    import signal
    import threading
    import time
    import traceback

    nonce = config["nonce"]
    marker = ("@@sleuth:%s " % nonce).encode()
    try:
        _os.setsid()  # our own process group: cancel and hang-up kill all of it
    except OSError:
        pass  # already a group leader (the local transport starts us that way)
    out_fd = _os.dup(1)  # records go here, whatever the program does to sys.stdout
    try:
        _os.set_inheritable(out_fd, False)
    except (AttributeError, OSError):
        pass
    lock = threading.Lock()

    def emit(kind, **fields):
        fields["kind"] = kind
        line = marker + _json.dumps(fields, default=str, ensure_ascii=False).encode("utf-8", "replace") + b"\n"
        for stream in (_sys.stdout, _sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        with lock:
            view = memoryview(line)
            while view:
                view = view[_os.write(out_fd, view):]

    def watchdog():
        # When the reader of our stdout goes away (the ssh channel closed, sleuth died or
        # cancelled the run), the pipe reports POLLERR/POLLHUP: kill the whole group so no
        # process of the probe outlives its run.
        poller = select.poll()
        poller.register(out_fd, select.POLLERR | select.POLLHUP)
        while True:
            if poller.poll(500):
                try:
                    _os.killpg(_os.getpgrp(), signal.SIGKILL)
                finally:
                    _os._exit(137)

    threading.Thread(target=watchdog, name="sleuth-watchdog", daemon=True).start()

    prefix = config.get("path_prefix") or []
    if prefix:  # an overlay (sleuth upgrade): first on sys.path here and for every child process
        for entry in reversed(prefix):
            _sys.path.insert(0, entry)
        before = _os.environ.get("PYTHONPATH")
        _os.environ["PYTHONPATH"] = _os.pathsep.join(list(prefix) + ([before] if before else []))

    if config.get("mode") == "shell":
        import subprocess

        if config.get("hook"):  # sleuth's stack-dump hook for every Python process the command starts
            cache = _os.environ.get("XDG_CACHE_HOME") or _os.path.join(_os.path.expanduser("~"), ".cache")
            folder = _os.path.join(cache, "sleuth", "hook")
            _os.makedirs(_os.path.join(folder, "dumps"), exist_ok=True)
            tmp = _os.path.join(folder, ".sitecustomize.%d" % _os.getpid())
            with open(tmp, "w") as fh:
                fh.write(config["hook"])
            _os.replace(tmp, _os.path.join(folder, "sitecustomize.py"))
            before = _os.environ.get("PYTHONPATH")
            _os.environ["PYTHONPATH"] = folder + (_os.pathsep + before if before else "")
            _os.environ["SLEUTH_STACKS_DIR"] = _os.path.join(folder, "dumps")
            # torch's Flight Recorder (the ranks' collectives), which the hook serves on request
            if not _os.environ.get("TORCH_FR_BUFFER_SIZE") and not _os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE"):
                _os.environ["TORCH_FR_BUFFER_SIZE"] = "2000"

        child = subprocess.Popen(["bash", "-c", config["shell"]], stdin=subprocess.DEVNULL)
        code = child.wait()
        if code < 0:
            signal.signal(-code, signal.SIG_DFL)
            _os.kill(_os.getpid(), -code)
        _sys.exit(code)

    if config.get("quiet", True):
        # Quieten the usual floods at their source; whatever still comes is captured whole.
        for key, value in (
            ("TRANSFORMERS_VERBOSITY", "error"),
            ("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1"),
            ("DATASETS_VERBOSITY", "error"),
            ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
            ("TQDM_DISABLE", "1"),
        ):
            _os.environ.setdefault(key, value)

    def read(path, limit=65536):
        try:
            with open(path, "rb") as fh:
                return fh.read(limit).decode("utf-8", "replace")
        except OSError:
            return None

    def torch_build():
        # Read torch/version.py as text: importing torch costs seconds.
        import importlib.util

        try:
            spec = importlib.util.find_spec("torch")
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            return None
        folder = list(spec.submodule_search_locations)[0]
        text = read(_os.path.join(folder, "version.py")) or ""
        found = {}
        for key in ("__version__", "cuda", "hip", "git_version"):
            m = re.search(r"^%s\s*(?::\s*[^=]+)?=\s*['\"]([^'\"]*)['\"]" % re.escape(key), text, re.M)
            if m:
                found[key.strip("_")] = m.group(1)
        remember_install(folder, found)
        return found

    def install_time(folder, dist):
        # When the package in *folder* was installed: the change time of its dist-info RECORD,
        # which every installer writes itself (uv and conda hard-link the package's files from
        # their caches, so a file's mtime is the wheel's, and a link's ctime is when it was
        # made). A source tree without dist-info: the newest ctime of its __init__.py/version.py.
        site = _os.path.dirname(folder)
        key = dist.lower().replace("-", "_")
        times = []
        try:
            names = _os.listdir(site)
        except OSError:
            names = []
        for name in names:
            if name.endswith(".dist-info") and name.split("-")[0].lower().replace("-", "_") == key:
                try:
                    times.append(_os.stat(_os.path.join(site, name, "RECORD")).st_ctime)
                except OSError:
                    pass
        for name in ("__init__.py", "version.py") if not times else ():
            try:
                times.append(_os.stat(_os.path.join(folder, name)).st_ctime)
            except OSError:
                pass
        return max(times) if times else None

    def remember_install(folder, build):
        # Which torch build was installed in this folder, and when (install_time): the
        # cache-inventory probe asks it which torch wrote caches older than the install now.
        # One small file in sleuth's cache at the far end, written only when an install is new.
        try:
            installed = install_time(folder, "torch")
            if installed is None:
                return
            cache = _os.environ.get("XDG_CACHE_HOME") or _os.path.join(_os.path.expanduser("~"), ".cache")
            path = _os.path.join(cache, "sleuth", "torch-installs.json")
            try:
                with open(path) as fh:
                    seen = _json.load(fh)
            except (OSError, ValueError):
                seen = []
            if any(e.get("dir") == folder and e.get("installed") == installed for e in seen if isinstance(e, dict)):
                return
            seen = [e for e in seen if isinstance(e, dict)][-199:] + [
                {"dir": folder, "installed": installed, "version": build.get("version"), "git": build.get("git_version"),
                 "cuda": build.get("cuda")}]
            _os.makedirs(_os.path.dirname(path), exist_ok=True)
            tmp = "%s.%d" % (path, _os.getpid())
            with open(tmp, "w") as fh:
                _json.dump(seen, fh)
            _os.replace(tmp, path)
        except Exception:
            pass  # a read-only home: the probe then says it does not know

    def distributions():
        # From the *.dist-info / *.egg-info directory names on sys.path: the same names and
        # versions importlib.metadata gives, in 1 ms instead of 80 (it parses every METADATA).
        found = {}
        for entry in _sys.path:
            try:
                names = _os.listdir(entry or ".")
            except OSError:
                continue
            for name in names:
                if name.endswith(".dist-info"):
                    stem = name[: -len(".dist-info")]
                elif name.endswith(".egg-info"):
                    stem = name[: -len(".egg-info")]
                else:
                    continue
                parts = stem.split("-")
                if len(parts) < 2:
                    continue
                key = re.sub(r"[-_.]+", "-", parts[0]).lower()
                found.setdefault(key, parts[1])  # the first on sys.path is the one imported
        return dict(sorted(found.items()))

    def tree_summary(path, limit=200000):
        info = {"path": path, "exists": _os.path.isdir(path), "entries": 0, "files": 0, "bytes": 0}
        if not info["exists"]:
            return info
        try:
            info["entries"] = len(_os.listdir(path))
        except OSError:
            return info
        newest = 0.0
        for root, _dirs, files in _os.walk(path):
            for name in files:
                info["files"] += 1
                try:
                    st = _os.stat(_os.path.join(root, name))
                except OSError:
                    continue
                info["bytes"] += st.st_size
                newest = max(newest, st.st_mtime)
                if info["files"] >= limit:
                    info["truncated"] = True
                    return info
        info["newest_mtime"] = newest
        return info

    def code_hash(path):
        import hashlib

        if not path or not _os.path.isdir(path):
            return None
        digest = hashlib.sha256()
        count = 0
        for root, dirs, files in _os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("__pycache__", "node_modules"))
            for name in sorted(files):
                if not name.endswith((".py", ".toml", ".yaml", ".yml", ".json", ".cfg")):
                    continue
                full = _os.path.join(root, name)
                try:
                    with open(full, "rb") as fh:
                        data = fh.read()
                except OSError:
                    continue
                digest.update(_os.path.relpath(full, path).encode() + b"\0" + data + b"\0")
                count += 1
        return {"path": path, "files": count, "sha256": digest.hexdigest()[:16]}

    def caches():
        import getpass
        import tempfile

        try:
            user = re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())
        except Exception:
            user = "unknown"
        inductor = _os.environ.get("TORCHINDUCTOR_CACHE_DIR") or _os.path.join(tempfile.gettempdir(), "torchinductor_" + user)
        triton = _os.environ.get("TRITON_CACHE_DIR") or _os.path.join(_os.path.expanduser("~"), ".triton", "cache")
        return {"inductor": tree_summary(inductor), "triton": tree_summary(triton)}

    def driver():
        text = read("/proc/driver/nvidia/version", 4096)
        if not text:
            return None
        m = re.search(r"Kernel Module\s+([0-9.]+)", text)
        return m.group(1) if m else text.splitlines()[0]

    import platform

    state = {
        "env": {
            "python": platform.python_version(),
            "executable": _sys.executable,
            "prefix": _sys.prefix,
            "platform": platform.platform(),
            "torch": torch_build(),
            "driver": driver(),
            "distributions": distributions(),
        },
        "code": code_hash(config.get("code_dir")),
        "caches": caches(),
    }
    # a probe that runs an entry in an environment of its own (its `env` param) reads the cache
    # folders that environment names: the entry's own, part of the state a repeat is judged in
    own = (config.get("params") or {}).get("env")
    if isinstance(own, dict):
        folders = {"inductor": own.get("TORCHINDUCTOR_CACHE_DIR"), "triton": own.get("TRITON_CACHE_DIR")}
        if any(folders.values()):
            state["entry_caches"] = {k: tree_summary(str(v)) for k, v in folders.items() if v}
    if prefix:
        state["env"]["overlay"] = list(prefix)
    # the variables that change what torch compiles and how (inductor's options, dynamo's, triton's,
    # the threads a CPU kernel is built for, the devices): another value is another state, never a
    # circular retest. Only where any is set, so a state without them reads as it always did.
    settings = {k: v[:200] for k, v in sorted(_os.environ.items())
                if k.startswith(("TORCHINDUCTOR_", "TORCHDYNAMO_", "TORCH_COMPILE_", "TRITON_", "PYTORCH_"))
                or k in ("OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "TORCH_CUDA_ARCH_LIST")}
    if settings:
        state["env"]["settings"] = settings
    emit("state", **state)
    if config.get("mode") == "state":  # only the state read before a run: nothing else runs
        emit("done", ok=True, exit=0, seconds=0.0)
        _sys.exit(0)

    # The probe runs as the real __main__ module (sys.modules["__main__"] is its namespace):
    # torch.compile, pickle and others look a function's globals up through its module, and
    # a namespace that only says it is __main__ makes dynamo fail ("module '__main__' has no
    # attribute …").
    import types

    main = types.ModuleType("__main__")
    main.__dict__.update({"__file__": config["filename"], "__builtins__": __builtins__, "emit": emit,
                          "params": config["params"], "install_time": install_time})
    _sys.modules["__main__"] = main
    namespace = main.__dict__
    started = time.time()
    exit_code = 0
    ok = True
    try:
        exec(compile(config["source"], config["filename"], "exec"), namespace)
    except SystemExit as exc:
        code = exc.code
        exit_code = code if isinstance(code, int) else (0 if code is None else 1)
        ok = exit_code == 0
    except BaseException as exc:  # the probe's own failure is a record, not a lost run
        ok = False
        exit_code = 1
        emit(
            "error",
            type=type(exc).__name__,
            message=str(exc),
            traceback=traceback.format_exc(),
        )
    emit("done", ok=ok, exit=exit_code, seconds=round(time.time() - started, 3))
    for stream in (_sys.stdout, _sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    _sys.exit(exit_code)

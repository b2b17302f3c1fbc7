# sleuth probe prelude. Not imported: sleuth sends the helper part (common.py), then this text,
# then one call of _sleuth_main(config), to `python -` on the target's stdin
# (probes/protocol.py). Standard library only; it must run on any Python 3.8+ at the far end.
import json as _json
import os as _os
import re as _re
import select as _select
import signal as _signal
import sys as _sys
import threading as _threading
import time as _time
import traceback as _traceback

TYPE_CHECKING = False
if TYPE_CHECKING:  # for the checkers: common.py's text comes first in the program, never this import
    from .common import cache_folder, canonical, install_time, secret_name


def _sleuth_main(config):
    try:
        _os.setsid()  # our own process group: cancel and hang-up kill all of it
    except OSError:
        pass  # already a group leader (the local transport starts us that way)
    out_fd = _os.dup(1)  # records go here, whatever the program does to sys.stdout
    try:
        _os.set_inheritable(out_fd, False)
    except (AttributeError, OSError):
        pass
    emit = _sleuth_emitter(config["nonce"], out_fd)
    _threading.Thread(target=_sleuth_watchdog, args=(out_fd,), name="sleuth-watchdog", daemon=True).start()

    prefix = config.get("path_prefix") or []
    if prefix:  # an overlay (sleuth upgrade): first on sys.path here and for every child process
        for entry in reversed(prefix):
            _sys.path.insert(0, entry)
        before = _os.environ.get("PYTHONPATH")
        _os.environ["PYTHONPATH"] = _os.pathsep.join(list(prefix) + ([before] if before else []))

    if config.get("mode") == "shell":
        _sleuth_shell(config)

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

    emit("state", **_sleuth_state(config, prefix))
    if config.get("mode") == "state":  # only the state read before a run: nothing else runs
        emit("done", ok=True, exit=0, seconds=0.0)
        _sys.exit(0)
    _sleuth_run_probe(config, emit)


def _sleuth_emitter(nonce, out_fd):
    """emit(kind, **fields): one record, a line `@@sleuth:<nonce> {json}` on *out_fd*."""
    marker = ("@@sleuth:%s " % nonce).encode()
    lock = _threading.Lock()

    def emit(kind, **fields):
        fields["kind"] = kind
        line = marker + _json.dumps(fields, default=str, ensure_ascii=False).encode("utf-8", "replace") + b"\n"
        _sleuth_flush()
        with lock:
            view = memoryview(line)
            while view:
                view = view[_os.write(out_fd, view):]

    return emit


def _sleuth_flush():
    for stream in (_sys.stdout, _sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def _sleuth_watchdog(out_fd):
    # When the reader of our stdout goes away (the ssh channel closed, sleuth died or
    # cancelled the run), the pipe reports POLLERR/POLLHUP: kill the whole group so no
    # process of the probe outlives its run.
    poller = _select.poll()
    poller.register(out_fd, _select.POLLERR | _select.POLLHUP)
    while True:
        if poller.poll(500):
            try:
                _os.killpg(_os.getpgrp(), _signal.SIGKILL)
            finally:
                _os._exit(137)


def _sleuth_shell(config):
    """Mode "shell": run the command under bash and leave as it did (its exit status or signal)."""
    import subprocess

    if config.get("hook"):  # sleuth's stack-dump hook for every Python process the command starts
        folder = cache_folder("hook")
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
        _signal.signal(-code, _signal.SIG_DFL)
        _os.kill(_os.getpid(), -code)
    _sys.exit(code)


def _sleuth_state(config, prefix):
    """The state a run is judged in: interpreter, torch build, driver, distributions, the code
    tree's hash, the compile caches, the variables that steer compilation."""
    import platform

    state = {
        "env": {
            "python": platform.python_version(),
            "executable": _sys.executable,
            "prefix": _sys.prefix,
            "platform": platform.platform(),
            "torch": _sleuth_torch_build(),
            "driver": _sleuth_driver(),
            "distributions": _sleuth_distributions(),
        },
        "code": _sleuth_code_hash(config.get("code_dir")),
        "caches": _sleuth_caches(),
    }
    # a probe that runs an entry in an environment of its own (its `env` param) reads the cache
    # folders that environment names: the entry's own, part of the state a repeat is judged in
    own = (config.get("params") or {}).get("env")
    if isinstance(own, dict):
        folders = {"inductor": own.get("TORCHINDUCTOR_CACHE_DIR"), "triton": own.get("TRITON_CACHE_DIR")}
        if any(folders.values()):
            state["entry_caches"] = {k: _sleuth_tree_summary(str(v)) for k, v in folders.items() if v}
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
    return state


def _sleuth_run_probe(config, emit):
    # The probe runs as the real __main__ module (sys.modules["__main__"] is its namespace):
    # torch.compile, pickle and others look a function's globals up through its module, and
    # a namespace that only says it is __main__ makes dynamo fail ("module '__main__' has no
    # attribute …").
    import types

    main = types.ModuleType("__main__")
    main.__dict__.update({"__file__": config["filename"], "__builtins__": __builtins__, "emit": emit,
                          "params": config["params"], "install_time": install_time,
                          "cache_folder": cache_folder, "secret_name": secret_name})
    _sys.modules["__main__"] = main
    namespace = main.__dict__
    started = _time.time()
    exit_code = 0
    ok = True
    try:
        for name, text in config.get("parts") or ():  # a long probe's parts, in its namespace first
            exec(compile(text, name, "exec"), namespace)
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
            traceback=_traceback.format_exc(),
        )
    emit("done", ok=ok, exit=exit_code, seconds=round(_time.time() - started, 3))
    _sleuth_flush()
    _sys.exit(exit_code)


def _sleuth_read(path, limit=65536):
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def _sleuth_torch_build():
    # Read torch/version.py as text: importing torch costs seconds.
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = list(spec.submodule_search_locations)[0]
    text = _sleuth_read(_os.path.join(folder, "version.py")) or ""
    found = {}
    for key in ("__version__", "cuda", "hip", "git_version"):
        m = _re.search(r"^%s\s*(?::\s*[^=]+)?=\s*['\"]([^'\"]*)['\"]" % _re.escape(key), text, _re.M)
        if m:
            found[key.strip("_")] = m.group(1)
    _sleuth_remember_install(folder, found)
    return found


def _sleuth_remember_install(folder, build):
    # Which torch build was installed in this folder, and when (install_time): the
    # cache-inventory probe asks it which torch wrote caches older than the install now.
    # One small file in sleuth's cache at the far end, written only when an install is new.
    try:
        installed = install_time(folder, "torch")
        if installed is None:
            return
        path = cache_folder("torch-installs.json")
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


def _sleuth_distributions():
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
            found.setdefault(canonical(parts[0]), parts[1])  # the first on sys.path is imported
    return dict(sorted(found.items()))


def _sleuth_tree_summary(path, limit=200000):
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


def _sleuth_code_hash(path):
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


def _sleuth_caches():
    import getpass
    import tempfile

    try:
        user = _re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())
    except Exception:
        user = "unknown"
    inductor = _os.environ.get("TORCHINDUCTOR_CACHE_DIR") or _os.path.join(tempfile.gettempdir(), "torchinductor_" + user)
    triton = _os.environ.get("TRITON_CACHE_DIR") or _os.path.join(_os.path.expanduser("~"), ".triton", "cache")
    return {"inductor": _sleuth_tree_summary(inductor), "triton": _sleuth_tree_summary(triton)}


def _sleuth_driver():
    text = _sleuth_read("/proc/driver/nvidia/version", 4096)
    if not text:
        return None
    m = _re.search(r"Kernel Module\s+([0-9.]+)", text)
    return m.group(1) if m else text.splitlines()[0]

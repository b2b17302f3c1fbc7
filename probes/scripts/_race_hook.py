"""compile-race's part that is the startup hook: a ``sitecustomize`` each run of the entry
finds first on its PYTHONPATH, which measures in the entry's own process the threads the user's
code started, which died and of what, and the compiles after the first worker started, and
writes them to SLEUTH_RACE_REPORT at exit. Sent before probes/scripts/compile_race.py (its
PROBE says ``"parts"``) and run in the same namespace: it only defines HOOK, the hook's text."""

# The hook, run at the entry's start by Python itself (site imports sitecustomize). It acts
# only in the entry's own process (its parent is this probe), never in processes the entry
# starts, and changes nothing the entry sees: hooks chain to the ones already there.
HOOK = r'''
import os, sys
if os.environ.get("SLEUTH_RACE_PARENT") == str(os.getppid()):
    import atexit, json, threading, traceback
    _out = os.environ["SLEUTH_RACE_REPORT"]
    _here = os.path.dirname(os.path.abspath(__file__))
    _std = os.path.dirname(os.__file__)
    _rep = {"threads_started": 0, "thread_names": [], "died": [], "main_error": None,
            "compiles_at_first_worker": None, "compiles_at_exit": None}
    _lock = threading.Lock()

    def _compiles():
        utils = sys.modules.get("torch._dynamo.utils")
        try:
            return int(utils.counters["stats"]["unique_graphs"]) if utils is not None else 0
        except Exception:
            return None

    def _library(path):
        parts = path.replace("\\", "/").split("/")
        for i, part in enumerate(parts[:-1]):
            if part in ("site-packages", "dist-packages"):
                return parts[i + 1].split(".")[0]
        return None

    def _is_std(path):
        return path.startswith(_std) and _library(path) is None

    def _starter():
        """Who started the thread: the first frame outside the standard library."""
        f = sys._getframe(2)
        while f is not None and _is_std(f.f_code.co_filename):
            f = f.f_back
        return f.f_code.co_filename if f is not None else ""

    def _describe(exc_type, exc, tb, thread):
        frames = traceback.extract_tb(tb) if tb is not None else []
        inner = frames[-1] if frames else None
        mods = set()
        for fr in frames:
            lib = _library(fr.filename)
            if lib:
                mods.add(lib)
            name = fr.filename.replace("\\", "/")
            for part in ("/torch/_dynamo/", "/torch/_inductor/", "/torch/fx/", "/torch/_functorch/"):
                if part in name:
                    mods.add("torch" + part.rstrip("/").replace("/torch/", ".").replace("/", "."))
        at = None
        if inner is not None:
            lib = _library(inner.filename)
            at = (lib + ":" if lib else "") + os.path.basename(inner.filename) + ":" + str(inner.lineno)
        return {"thread": thread, "type": getattr(exc_type, "__name__", str(exc_type)),
                "message": str(exc).splitlines()[0][:300] if str(exc) else "", "at": at,
                "code": (inner.line or "")[:200] if inner is not None else None, "through": sorted(mods)}

    _start = threading.Thread.start

    def _sleuth_start(self, *a, **kw):
        path = _starter()
        lib = _library(path)
        if lib is None and not path.startswith(_here):  # the user's code started it
            with _lock:
                if _rep["threads_started"] == 0:
                    _rep["compiles_at_first_worker"] = _compiles()
                _rep["threads_started"] += 1
                _rep["thread_names"].append(self.name)
        elif lib not in ("torch", "triton"):  # a library's (tqdm's monitor, a trainer's workers): said apart
            with _lock:
                _rep.setdefault("library_threads", {}).setdefault(lib or "?", []).append(self.name)
        return _start(self, *a, **kw)

    threading.Thread.start = _sleuth_start
    _thook = threading.excepthook

    def _sleuth_thread_died(args):
        if args.exc_type is not SystemExit:
            with _lock:
                _rep["died"].append(_describe(args.exc_type, args.exc_value, args.exc_traceback,
                                              args.thread.name if args.thread is not None else "?"))
        return _thook(args)

    threading.excepthook = _sleuth_thread_died
    _hook = sys.excepthook

    def _sleuth_main_died(exc_type, exc, tb):
        _rep["main_error"] = _describe(exc_type, exc, tb, "MainThread")
        return _hook(exc_type, exc, tb)

    sys.excepthook = _sleuth_main_died

    def _sleuth_report():
        _rep["compiles_at_exit"] = _compiles()
        with open(_out, "w") as f:
            json.dump(_rep, f)

    atexit.register(_sleuth_report)
    # chain: the environment's own sitecustomize, if it has one
    _self = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    try:
        import sitecustomize  # noqa: F401
    except ImportError:
        pass
    if "sitecustomize" not in sys.modules and _self is not None:  # the import machinery looks for it after us
        sys.modules["sitecustomize"] = _self
'''

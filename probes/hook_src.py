# sleuth's stack-dump hook. Not imported by sleuth: `sleuth probe run --shell CMD --hook` writes
# this file as sitecustomize.py into $XDG_CACHE_HOME/sleuth/hook (default ~/.cache/...) at the
# far end and puts that folder first on PYTHONPATH for CMD, so every Python process CMD starts
# (torchrun and each rank) imports it. Standard library only, Python 3.8+.
#
# It registers faulthandler on SIGUSR2 (all threads, into dumps/stacks-PID.txt) and leaves a
# marker dumps/hooked-PID: the stacks probe then reads a rank's stacks without ptrace, and never
# signals a process that did not register (it checks the marker and SigCgt in /proc/PID/status:
# SIGUSR2's default action would kill the rank). The sitecustomize this file shadows, if any,
# still runs.
import os
import sys


def _sleuth_register():
    folder = os.environ.get("SLEUTH_STACKS_DIR")
    if not folder:
        return
    try:
        import faulthandler
        import signal

        os.makedirs(folder, exist_ok=True)
        out = open(os.path.join(folder, "stacks-%d.txt" % os.getpid()), "a")
        faulthandler.register(signal.SIGUSR2, file=out, all_threads=True, chain=False)
        setattr(sys, "_sleuth_stacks_file", out)  # kept open for the life of the process
        with open(os.path.join(folder, "hooked-%d" % os.getpid()), "w") as marker:
            marker.write("SIGUSR2\n")
    except Exception:  # a hook must never break the job
        pass


def _sleuth_chain():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        import importlib.machinery
        import importlib.util

        rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is not None and spec.origin and spec.loader is not None and \
                os.path.dirname(os.path.abspath(spec.origin)) != here:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
    except Exception:
        pass


_sleuth_register()
_sleuth_chain()

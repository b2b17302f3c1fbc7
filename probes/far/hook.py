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
#
# In a rank (RANK in its environment) a daemon thread, "sleuth-flight-recorder", also waits on a
# FIFO dumps/fr-PID.fifo: one byte written there makes it write torch's Flight Recorder (the
# ranks' collectives: group, sequence number, sizes, finished or not) as dumps/fr-PID.json.
# The thread is blocked in open() until asked (no CPU, the GIL released); the rank's main thread
# may be inside a collective meanwhile, which releases the GIL too. The recorder itself records
# only when the job starts with TORCH_FR_BUFFER_SIZE set: `--hook` sets it (2000 entries)
# unless the job sets it or TORCH_NCCL_TRACE_BUFFER_SIZE itself.
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


def _sleuth_flight_recorder_serve(folder, pid):
    fifo = os.path.join(folder, "fr-%d.fifo" % pid)
    out = os.path.join(folder, "fr-%d.json" % pid)
    while True:
        try:
            with open(fifo, "rb") as asked:  # blocks until the stacks probe writes
                asked.read(1)
        except OSError:
            return
        if os.getpid() != pid:  # a forked child (a data-loader worker): not this rank
            return
        import json

        try:
            dist = sys.modules.get("torch.distributed")
            if dist is None or not dist.is_available() or not dist.is_initialized():
                data = {"error": "torch.distributed is not initialised in this process"}
            else:
                import torch._C._distributed_c10d as c10d

                # two recorders: ProcessGroupNCCL keeps its own (NCCL's collectives), the generic
                # one holds gloo's and other CPU backends'
                data = {"recorders": {}}
                for key, name in (("nccl", "_dump_nccl_trace_json"), ("cpu", "_dump_fr_trace_json")):
                    dump = getattr(c10d, name, None)
                    if dump is None:
                        continue
                    try:
                        data["recorders"][key] = json.loads(dump(True, False))  # collectives, not only active
                    except Exception as exc:
                        data["recorders"][key] = {"error": "%s: %s" % (type(exc).__name__, exc)}
        except Exception as exc:  # an older torch
            data = {"error": "%s: %s" % (type(exc).__name__, exc)}
        try:
            tmp = out + ".tmp"
            with open(tmp, "w") as fh:
                json.dump(data, fh)
            os.replace(tmp, out)
        except OSError:
            return


def _sleuth_flight_recorder():
    folder = os.environ.get("SLEUTH_STACKS_DIR")
    if not folder or "RANK" not in os.environ or not hasattr(os, "mkfifo"):
        return
    try:
        import threading

        pid = os.getpid()
        fifo = os.path.join(folder, "fr-%d.fifo" % pid)
        if os.path.exists(fifo):
            os.unlink(fifo)
        os.mkfifo(fifo, 0o600)
        threading.Thread(target=_sleuth_flight_recorder_serve, args=(folder, pid),
                         name="sleuth-flight-recorder", daemon=True).start()
    except Exception:
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
_sleuth_flight_recorder()
_sleuth_chain()

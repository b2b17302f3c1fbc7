# pyright: reportPossiblyUnboundVariable=false
# (emit, params and secret_name come from the prelude sleuth sends first; run standalone, emit and
# secret_name come from probes/far/common.py)
"""Environment fingerprint: torch build (version with its build tag, CUDA, cuDNN, NCCL, git
version), triton, driver, GPUs, every installed distribution and the variables that steer
compilation and memory. sleuth diffs it against the target's baseline, package by package
(hypotheses/drift.py), and adds has_baseline, drift and changes to the result."""

PROBE = {
    "fork": True,  # reads state only: safe to fork from a warm agent
    "id": "env-fingerprint",
    "title": "environment fingerprint (torch / CUDA / triton / driver), diffed against the baseline",
    "timeout": 120,
    "cost": 3,
    "baseline": True,
    "params": {"import_torch": True},
    "reports": ["fingerprint", "has_baseline", "drift", "drift_keys", "changes", "torch", "cuda", "triton"],
}

if "emit" not in globals():  # run standalone: emit (JSON lines on stdout) from the far end's helper part
    import os
    import runpy

    _far = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "far", "common.py"))
    emit, secret_name = _far["emit"], _far["secret_name"]
    params = {}

import json
import os
import platform
import re

try:
    from importlib import metadata
except ImportError:  # pragma: no cover
    metadata = None

VARS = re.compile(r"^(CUDA_|TORCH|PYTORCH_|NCCL_|TRITON_|CUBLAS|CUDNN|LD_LIBRARY_PATH$|OMP_NUM_THREADS$)")

def version(name):
    if metadata is None:
        return None
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def driver():
    try:
        with open("/proc/driver/nvidia/version") as fh:
            m = re.search(r"Kernel Module\s+([0-9.]+)", fh.read())
            return m.group(1) if m else "unknown"
    except OSError:
        return None


def all_distributions():
    if metadata is None:
        return {}
    found = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name:
            found[name] = dist.version
    return dict(sorted(found.items()))


def nvidia_smi():
    import shutil
    import subprocess

    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [line.strip() for line in out.splitlines() if line.strip()]


dists = all_distributions()
fp = {
    "python": platform.python_version(),
    "platform": platform.platform(),
    "machine": platform.machine(),
    "driver": driver(),
}
import hashlib  # noqa: E402

fp["distributions_sha"] = hashlib.sha256(json.dumps(dists, sort_keys=True).encode()).hexdigest()[:16] if dists else None
fp["distributions"] = dists  # every one, so a change names the package and both versions
fp["nvidia_smi"] = nvidia_smi()
for key, value in sorted(os.environ.items()):
    if VARS.match(key) and not secret_name(key):  # sessions/redact.py's rule
        fp["var:" + key] = value

if params.get("import_torch", True) and version("torch") is not None:
    import torch

    fp["torch"] = torch.__version__
    fp["torch.cuda"] = torch.version.cuda
    fp["torch.git"] = getattr(torch.version, "git_version", None)
    fp["cuda_available"] = torch.cuda.is_available()
    if torch.cuda.is_available():
        fp["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        fp["cudnn"] = torch.backends.cudnn.version()
        try:
            fp["nccl"] = ".".join(str(p) for p in torch.cuda.nccl.version())  # pyright: ignore[reportAttributeAccessIssue]
        except Exception:  # no NCCL in this build
            fp["nccl"] = None
    try:
        import triton  # pyright: ignore[reportMissingImports] (a CPU torch has none)

        fp["triton"] = triton.__version__
    except Exception:  # triton absent on CPU builds, or broken: both worth seeing
        fp["triton"] = None

emit(
    "result",
    fingerprint=fp,
    distributions=dists,
    torch=fp.get("torch") or dists.get("torch"),
    cuda=fp.get("torch.cuda"),
    triton=fp.get("triton") or dists.get("triton") or dists.get("pytorch-triton"),
)

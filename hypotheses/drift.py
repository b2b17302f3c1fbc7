"""What changed in an environment, package by package, with both values.

Two sources compare the same way: the state every run reports (interpreter, torch build read
from torch/version.py, driver, every installed distribution) and the env-fingerprint
probe's fingerprint (the same, plus torch's CUDA/cuDNN/NCCL/git versions as torch reports
them, triton, GPUs and the variables that steer compilation and memory). A change is
``{"name", "before", "after"}``; ``before`` is None for something added, ``after`` for
something removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Change", "fingerprint_changes", "state_changes"]

# Fingerprint keys that describe the host rather than the environment under test: kernel
# patch levels differ between the hosts of one fleet; the digest is replaced by the list.
_NOT_DRIFT = {"platform", "distributions_sha", "machine"}


@dataclass(frozen=True)
class Change:
    name: str
    before: Any
    after: Any

    def __str__(self) -> str:
        if self.before is None:
            return f"{self.name} {self.after} added"
        if self.after is None:
            return f"{self.name} {self.before} removed"
        return f"{self.name} {self.before} → {self.after}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "before": self.before, "after": self.after}


def _diff(before: Mapping[str, Any], after: Mapping[str, Any], prefix: str = "") -> list[Change]:
    out = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a != b:
            out.append(Change(prefix + key, a, b))
    return out


def _flat_env(env: Mapping[str, Any] | None) -> dict[str, Any]:
    """The parts of a reported ``env`` state that say what the code runs on."""
    env = env or {}
    flat: dict[str, Any] = {"python": env.get("python"), "driver": env.get("driver")}
    torch = env.get("torch") or {}
    if isinstance(torch, Mapping):
        flat["torch.version.cuda"] = torch.get("cuda")
        flat["torch.version.git_version"] = torch.get("git_version")
        if "torch" not in (env.get("distributions") or {}):  # a source build: no dist-info
            flat["torch"] = torch.get("version")
    elif isinstance(torch, str) and "torch" not in (env.get("distributions") or {}):
        flat["torch"] = torch
    return {k: v for k, v in flat.items() if v is not None}


def state_changes(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[Change]:
    """Changes between two reported states' environments: every distribution (added,
    removed, another version), the interpreter, the driver, torch's CUDA and git version, the
    compile settings of the environment (``env TORCHINDUCTOR_MAX_AUTOTUNE``)."""
    env_a = (before or {}).get("env") or {}
    env_b = (after or {}).get("env") or {}
    changes = _diff(_flat_env(env_a), _flat_env(env_b))
    changes += _diff(env_a.get("distributions") or {}, env_b.get("distributions") or {})
    settings = _diff(env_a.get("settings") or {}, env_b.get("settings") or {})  # TORCHINDUCTOR_*, ...
    changes += [Change("env " + c.name, c.before, c.after) for c in settings]
    changes += _tree_changes(before, after)
    return sorted(changes, key=_order)


def _folder(info: Any) -> str | None:
    """A cache folder as the state read summed it up: "14 files, 2.1 MB", "empty", None (absent)."""
    if not isinstance(info, Mapping) or not info.get("exists"):
        return None
    files, size = int(info.get("files") or 0), float(info.get("bytes") or 0)
    if not files:
        return "empty"
    unit, scale = next(((u, n) for u, n in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)) if size >= n), ("B", 1.0))
    return f"{files} file{'s' * (files != 1)}, {size / scale:.3g} {unit}"


def _tree_changes(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[Change]:
    """The compile caches (inductor's, triton's, and a probe's own folders) and the code tree:
    what a state read sees change besides the environment (a wiped cache, an edited file)."""
    out = []
    for key, label in (("caches", ""), ("entry_caches", "the entry's ")):
        a, b = (before or {}).get(key), (after or {}).get(key)
        if not isinstance(a, Mapping) or not isinstance(b, Mapping):
            continue  # not read by one side (a probe's own folders), or not a folder summary
        if key == "entry_caches" and not (a and b):
            continue  # read for one probe only: never compared with a read without it
        for name in ("inductor", "triton"):
            fa, fb = a.get(name), b.get(name)
            if fa != fb and (fa or fb):
                sa, sb = _folder(fa), _folder(fb)
                if sa == sb:  # the same count and size, other files (or times): say so
                    sa, sb = f"{sa} (before)", f"{sb} (other entries)"
                out.append(Change(f"{label}{name} cache", sa, sb))
    ca, cb = (before or {}).get("code"), (after or {}).get("code")
    ca, cb = (ca if isinstance(ca, Mapping) else {}), (cb if isinstance(cb, Mapping) else {})
    if (ca or cb) and ca.get("sha256") != cb.get("sha256"):
        out.append(Change("code", ca.get("sha256"), cb.get("sha256")))
    return out


def fingerprint_changes(baseline: Mapping[str, Any], fingerprint: Mapping[str, Any]) -> list[Change]:
    """Changes from a baseline fingerprint to this one: every distribution and every other
    field (``var:NAME`` fields are named ``env NAME``). An older baseline without the
    distribution list is compared field by field."""
    a = {k: v for k, v in baseline.items() if k not in _NOT_DRIFT}
    b = {k: v for k, v in fingerprint.items() if k not in _NOT_DRIFT}
    dists_a, dists_b = a.pop("distributions", None), b.pop("distributions", None)
    changes = []
    if isinstance(dists_a, Mapping) and isinstance(dists_b, Mapping):
        changes += _diff(dists_a, dists_b)
        # the same package through its import is said once, by its distribution
        for key in ("torch", "triton"):
            if key in dists_a or key in dists_b:
                a.pop(key, None)
                b.pop(key, None)
    for change in _diff(a, b):
        name = "env " + change.name[4:] if change.name.startswith("var:") else change.name
        changes.append(Change(name, change.before, change.after))
    return sorted(changes, key=_order)


_FIRST = ("torch", "torch.version.cuda", "torch.cuda", "torch.version.git_version", "torch.git", "triton",
          "pytorch-triton", "cudnn", "nccl", "driver", "python")


def _order(change: Change) -> tuple[int, str]:
    """torch and its build first (what people look for), then the rest by name."""
    return (_FIRST.index(change.name) if change.name in _FIRST else len(_FIRST), change.name)

"""Check keys and state keys: what a run asked, and the state of the target it ran in.

A run's *check key* is (probe, parameters, target). Its *state key* digests what the run
reported about its environment (interpreter, distribution versions, CUDA/driver), its code
(hash of the code tree), its compile caches, plus the remedies applied on that target when
it started. Two runs with the same check key and state key asked the same question of the
same world: the second one is a circular retest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["STATE_COMPONENTS", "canonical", "check_key", "component_keys", "state_key", "state_key_of_parts"]

# The parts of a run's reported state, each digested on its own so that oscillation can be
# told per part (the environment went back to cu128; the code went back to before the lock).
STATE_COMPONENTS = ("env", "code", "caches")


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _digest(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode()).hexdigest()[:16]


def check_key(probe: str, params: Mapping[str, Any], target: str, definition: Mapping[str, Any] | None = None) -> str:
    """What a run asks: the probe, its parameters, the target — and, when given, the target's
    definition (hops, python, env, workdir, container): a redefined target is a new question."""
    if definition is None:  # sessions recorded before definitions were part of the key
        return _digest({"probe": probe, "params": dict(params), "target": target})
    return _digest({"probe": probe, "params": dict(params), "target": target, "definition": dict(definition)})


# Read only for a probe that names cache folders of its own (compile-cache's `env`): part of that
# probe's state, never compared with a state read without it.
OPTIONAL_COMPONENTS = ("entry_caches",)


def component_keys(state: Mapping[str, Any]) -> dict[str, str]:
    parts = {part: _digest(state.get(part)) for part in STATE_COMPONENTS}
    parts.update({part: _digest(state[part]) for part in OPTIONAL_COMPONENTS if state.get(part) is not None})
    return parts


def target_parts(parts: Mapping[str, str]) -> dict[str, str]:
    """The parts every state read has (the target's own), for telling whether the target changed."""
    return {k: v for k, v in parts.items() if k in STATE_COMPONENTS}


def state_key(state: Mapping[str, Any], remedies: Iterable[str] = ()) -> str:
    """Digest of a reported state plus the active remedy applications (their digests)."""
    return state_key_of_parts(component_keys(state), remedies)


def state_key_of_parts(parts: Mapping[str, str], remedies: Iterable[str] = ()) -> str:
    return _digest({"parts": dict(parts), "remedies": sorted(remedies)})

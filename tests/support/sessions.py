"""A run's state and a whole recorded run, written into a real session through ``Investigation``."""

from __future__ import annotations

from typing import Any

from sleuth.sessions import Investigation


def env_state(torch: str = "2.11.0+cu128", code: str = "c0", cache_entries: int = 12, **extra: Any) -> dict[str, Any]:
    return {
        "env": {"python": "3.11.7", "torch": torch, "triton": "3.5.0", "cuda": torch.rpartition("+")[2], **extra},
        "code": code,
        "caches": {"inductor": {"entries": cache_entries}},
    }


def record_run(
    inv: Investigation,
    probe: str,
    result: dict[str, Any] | None,
    state: dict[str, Any] | None,
    target: str = "local",
    params: dict[str, Any] | None = None,
    classification: str = "completed",
    kind: str = "probe",
) -> int:
    start = inv.begin_run(probe, params or {}, target, kind=kind)
    records = [{"kind": "result", **result}] if result is not None else []
    if classification == "completed":
        records.append({"kind": "done"})
    inv.finish_run(start.run, classification, f"test run ({classification})", records, state, {"stdout": 3, "stderr": 0})
    return start.run

"""Shared helpers: a real session file in a temp dir and a way to record whole runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sleuth.hypotheses import load_catalog
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


@pytest.fixture
def catalog():
    return load_catalog()


@pytest.fixture
def session_path(tmp_path: Path) -> Path:
    return tmp_path / ".sleuth" / "test.sleuth"


@pytest.fixture
def inv(session_path: Path, catalog):
    investigation = Investigation.create(session_path, "test", catalog)
    yield investigation
    investigation.close()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """Real OpenSSH servers (jump + gpu host with a pct stand-in) for the whole test session."""
    from sshd_harness import SshHarness

    harness = SshHarness(tmp_path_factory.mktemp("sshd")).setup().start()
    yield harness
    harness.stop()


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A real Slurm cluster of four nodes on this machine, with a job holding them."""
    from slurm_harness import Slurm

    cluster = Slurm(tmp_path_factory.mktemp("slurm"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()

"""The fixtures every test folder shares (a real session file in a temp dir, make_project, the
sshd and Slurm harnesses) and the markers set from what a test uses; helpers that are not
fixtures are in tests/support/."""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

_ROOT = Path(__file__).resolve().parents[1]


def _import_this_checkout() -> None:
    """The repository root is the package ``sleuth`` (pyproject's package-dir). Installed
    (``pip install -e .``), it imports as it is; in a fresh clone without an install, a link
    named ``sleuth`` to the root goes first on sys.path and PYTHONPATH, and a ``sleuth``
    command that runs this interpreter first on PATH, so the tests, the ``sleuth`` they run
    and the ``python -m sleuth`` it starts import this checkout."""
    if importlib.util.find_spec("sleuth") is not None:
        return
    links = Path(tempfile.mkdtemp(prefix="sleuth-checkout-"))
    (links / "sleuth").symlink_to(_ROOT, target_is_directory=True)
    sys.path.insert(0, str(links))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(links), os.environ.get("PYTHONPATH")]))
    command = links / "bin" / "sleuth"
    command.parent.mkdir()
    command.write_text(f"#!{sys.executable}\nimport sys\nfrom sleuth.app.cli import main\nsys.exit(main())\n")
    command.chmod(0o755)
    os.environ["PATH"] = f"{command.parent}{os.pathsep}{os.environ.get('PATH', '')}"


_import_this_checkout()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Byte-compile this checkout once, as a wheel install does: the tests start `sleuth` in
    hundreds of subprocesses, and where PYTHONDONTWRITEBYTECODE is set (this VM and CI set it)
    each would compile every module from source again (0.1 s a command)."""
    import compileall
    import re

    skip = re.compile(r"[/\\](\.venv|tests|bench|build|node_modules)[/\\]")
    compileall.compile_dir(str(_ROOT), quiet=2, workers=0, rx=skip)

from sleuth.hypotheses import load_catalog  # noqa: E402
from sleuth.sessions import Investigation  # noqa: E402

# The CLI keeps one agent broker per investigation between commands; in the tests they stop
# after a short idle time (and every one still up is stopped when the session ends).
os.environ.setdefault("SLEUTH_AGENT_IDLE", "30")


def _compile_caches_per_worker() -> None:
    """Each xdist worker compiles into caches of its own. A run's state includes the target's
    compile caches, so a test that asks for the same check twice in the same state (the
    retest question) would otherwise see the state change under it whenever a test on the
    other worker compiled meanwhile — correctly not a retest, and a failure that depends on
    timing. The caches stay between sessions (a warm cache is what most tests meet)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    root = Path(tempfile.gettempdir()) / f"sleuth-tests-caches-{os.getuid()}" / worker
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(root / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(root / "triton")


_compile_caches_per_worker()


_TUI_MODULES = {"test_ui", "test_ui_keys", "test_ui_runs", "test_snapshots", "test_tmux"}
_TORCH_MODULES = {"test_drafter_race", "test_demo", "test_lock_forms", "test_tmux"}


_TORCH_USES = re.compile(r"""\bimport torch\b|\bfrom torch\b|\bversion\(["']torch["']\)|\b(ddp_job|lightning_job|hang_job|drafter)\b"""
                         r"""|\blaunch\(\s*["'](ddp|lightning|hang)""")  # test_stacks' jobs, started by kind


def _runs_torch(item: pytest.Item) -> bool:
    """A test whose own code imports torch or starts one of the torch jobs (DDP, Lightning,
    the gloo hang job, the drafter): its verdicts may differ on another torch."""
    fn = getattr(item, "function", None)
    try:
        return fn is not None and bool(_TORCH_USES.search(inspect.getsource(fn)))
    except (OSError, TypeError):
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Markers from what a test uses: ``ssh`` (the sshd fixture), ``slurm`` (the cluster),
    ``tui`` (Pilot or tmux), ``torch`` (runs torch); ``slow`` is set on the test itself."""
    for item in items:
        module = item.module.__name__ if isinstance(item, pytest.Function) else ""
        used = set(getattr(item, "fixturenames", ()))
        if "sshd" in used:
            item.add_marker(pytest.mark.ssh)
        if "slurm" in used:
            item.add_marker(pytest.mark.slurm)
        if module in _TUI_MODULES or "_ui_" in item.name:
            item.add_marker(pytest.mark.tui)
        if module in _TORCH_MODULES or "torch" in item.name or "compile" in item.name or "dense_fallback" in item.name \
                or _runs_torch(item):
            item.add_marker(pytest.mark.torch)


def _brokers_started_by_these_tests(root: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"agent" in argv and b"serve" in argv and any(str(root).encode() in a for a in argv):
            found.append(int(proc.name))
    return found


@pytest.fixture
def no_idle_brokers(tmp_path_factory: pytest.TempPathFactory):
    """Brokers that earlier tests of this process left idle are stopped first (their agents
    run the same interpreter at the far end, so a test counting what is left would count
    them: with files spread over workers, another file's tests may have run before)."""
    import time

    pids = _brokers_started_by_these_tests(tmp_path_factory.getbasetemp())
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 15
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if Path(f"/proc/{p}").exists() and "Z" not in _state(p)]
        time.sleep(0.1)
    yield


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def pytest_sessionfinish(session: pytest.Session) -> None:
    base = getattr(session.config, "_tmp_path_factory", None)
    if base is None:
        return
    try:
        root = base.getbasetemp()
    except (OSError, ValueError):
        return
    for pid in _brokers_started_by_these_tests(root):  # SIGTERM: the broker closes its agents first
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


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


@pytest.fixture
def make_project(tmp_path: Path):
    """The one way a test makes a project: ``make_project(name="proj", toml=..., drafter=...,
    workspace=..., session=...)`` is `sleuth init` in tmp_path/NAME with *toml* appended to its
    sleuth.toml (tests/support/project.py says each option). A test file's own ``project``
    fixture is this with what that file needs (its targets, its files)."""
    from support.project import new_project

    def make(name: str = "proj", **options: Any) -> Path:
        return new_project(tmp_path / name, **options)

    return make


@pytest.fixture
def ws(tmp_path: Path):
    """A UI test's workspace: a project with one investigation whose symptom is the seed's
    fx-trace-error (its catalog hypotheses open)."""
    from support.ui_sessions import make_workspace

    ws = make_workspace(tmp_path / "proj")
    inv = ws.create("ui test")
    inv.add_symptom("fx-trace-error")
    inv.close()
    return ws


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """Real OpenSSH servers (jump + gpu host with a pct stand-in) for the whole test session."""
    from support.sshd_harness import SshHarness

    harness = SshHarness(tmp_path_factory.mktemp("sshd")).setup().start()
    yield harness
    harness.stop()


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A real Slurm cluster of four nodes on this machine, with a job holding them."""
    from support.slurm_harness import Slurm

    cluster = Slurm(tmp_path_factory.mktemp("slurm"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()

"""The wheel a user installs: one `sleuth` namespace holding every package and data file.

Builds the wheel from this checkout with pip (as `pip install /path/to/sleuth` would) and
compares its file list with the source tree, so a package folder, a catalog file, a probe
script or the example drafter left out of pyproject.toml fails here rather than on a
user's machine. `.ci/run` then installs that wheel in a fresh venv and runs the demo.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("app", "hypotheses", "probes", "sessions")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    (path,) = out.glob("sleuth-*.whl")
    return zipfile.ZipFile(path)


@pytest.fixture(scope="module")
def wheel_names(wheel: zipfile.ZipFile) -> list[str]:
    return wheel.namelist()


def source_files(*patterns: str) -> list[Path]:
    found = [p for pattern in patterns for p in ROOT.glob(pattern)]
    return sorted(p.relative_to(ROOT) for p in found if "__pycache__" not in p.parts)


@pytest.mark.slow
def test_only_sleuth_is_installed_at_the_top(wheel_names):
    tops = {n.split("/")[0] for n in wheel_names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"sleuth"}


@pytest.mark.slow
def test_every_package_of_the_source_tree_is_in_the_wheel(wheel_names):
    packages = [p.parent for p in source_files(*(f"{pkg}/**/__init__.py" for pkg in PACKAGES))]
    assert len(packages) >= 6  # app, app/tui, hypotheses, probes, probes/remedies, sessions
    missing = [str(p) for p in packages if f"sleuth/{p.as_posix()}/__init__.py" not in wheel_names]
    assert missing == []


def test_every_module_and_data_file_is_in_the_wheel(wheel_names):
    wanted = source_files(
        "__init__.py", "__main__.py",
        *(f"{pkg}/**/*.py" for pkg in PACKAGES),
        "hypotheses/catalog/*.toml",   # the built-in hypotheses
        "probes/scripts/*.py",         # the probe scripts sent to targets
        "app/*.tcss",                  # the stylesheet
        "examples/drafter/*.py",       # what `sleuth demo` copies
    )
    names = {str(p) for p in wanted}
    for must in ("probes/far/agent.py", "probes/far/prelude.py", "app/sleuth.tcss", "examples/drafter/train.py",
                 "examples/drafter/model.py", "hypotheses/catalog/10_compile_race.toml",
                 "probes/scripts/env_fingerprint.py"):
        assert must in names, f"{must} is not in the source tree any more: update this test"
    missing = [str(p) for p in wanted if f"sleuth/{p.as_posix()}" not in wheel_names]
    assert missing == []


@pytest.mark.slow
def test_console_script_and_version_come_from_the_namespace(wheel, wheel_names):
    (entry_points,) = [n for n in wheel_names if n.endswith(".dist-info/entry_points.txt")]
    assert "sleuth = sleuth.app.cli:main" in wheel.read(entry_points).decode()
    (metadata,) = [n for n in wheel_names if n.endswith(".dist-info/METADATA")]
    version = next(line.split(": ", 1)[1] for line in wheel.read(metadata).decode().splitlines()
                   if line.startswith("Version: "))
    assert f'__version__ = "{version}"' in wheel.read("sleuth/__init__.py").decode()

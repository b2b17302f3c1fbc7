"""Real wheels of one-module packages, made by hand, and pip acting on a venv as a user types it."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path


def wheel(out: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A real wheel of a one-module package (made by hand: no build backend, no network)."""
    mod = name.replace("-", "_")
    info = f"{mod}-{version}.dist-info"
    needs = "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {
        f"{mod}/__init__.py": f"VERSION = {version!r}\n".encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{needs}".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: sleuth-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
              for path, data in files.items()]
    files[f"{info}/RECORD"] = ("\n".join(record + [f"{info}/RECORD,,"]) + "\n").encode()
    path = out / f"{mod}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name_, data in files.items():
            zf.writestr(name_, data)
    return path


def pip(venv: Path, *args: str) -> None:
    """pip, as a user types it, acting on *venv* (pip's --python: the venv needs no pip of its own)."""
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "-q",
                    "--disable-pip-version-check", *args], check=True, capture_output=True)

"""Whether a file a remedy would change belongs to an installed package (site-packages,
dist-packages, or the standard library of this interpreter or one on a target): sleuth says
so in every preview and writes there only when asked, since a change there is lost on the
next install and affects every program of that environment."""

from __future__ import annotations

import re
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath

__all__ = ["INSTALLED_FLAG", "InstalledPackage", "installed_package"]

# how a user asks for it on the command line (the MCP tool's argument is into_installed_package)
INSTALLED_FLAG = "--into-installed-package"
_PACKAGE_DIRS = ("site-packages", "dist-packages")
_STDLIB = re.compile(r"^python\d+(\.\d+)?t?$")  # lib/python3.11, lib/python3.13t


@dataclass(frozen=True)
class InstalledPackage:
    """*relative* (a path inside *folder*) is part of the installed package *package*."""

    package: str
    folder: str  # site-packages, dist-packages, lib/python3.11
    relative: str  # the file's path inside that folder, e.g. transformers/integrations/flex_attention.py

    @property
    def said(self) -> str:
        return (f"{self.relative} is inside the installed package {self.package} ({self.folder}): a change there "
                "is lost on reinstall and affects every program of that environment")

    def to_dict(self) -> dict[str, str]:
        return {"package": self.package, "folder": self.folder, "relative": self.relative, "said": self.said}


def _package(parts: tuple[str, ...]) -> str | None:
    if len(parts) < 1:
        return None
    first = parts[0]
    if len(parts) == 1:  # a module of its own (six.py)
        return first[:-3] if first.endswith(".py") else None
    return first


def _from_parts(parts: tuple[str, ...]) -> InstalledPackage | None:
    """By the folder names alone: the last site-packages / dist-packages, else lib/pythonX.Y."""
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in _PACKAGE_DIRS:
            package = _package(parts[i + 1:])
            return InstalledPackage(package, parts[i], "/".join(parts[i + 1:])) if package else None
    for i in range(len(parts) - 2, 0, -1):
        if parts[i - 1] in ("lib", "lib64") and _STDLIB.match(parts[i]):
            package = _package(parts[i + 1:])
            return InstalledPackage(package, f"{parts[i - 1]}/{parts[i]}", "/".join(parts[i + 1:])) if package else None
    return None


def _lib_folders() -> list[Path]:
    """This interpreter's library folders (its prefix's and its base's)."""
    folders: set[str] = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            folders.add(sysconfig.get_paths()[key])
        except KeyError:
            continue
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        for lib in ("lib", "lib64"):
            folders.add(str(Path(prefix) / lib / version))
    out = []
    for folder in folders:
        try:
            out.append(Path(folder).resolve())
        except (OSError, ValueError):
            continue
    return sorted(out, key=lambda p: -len(p.parts))  # the deepest first: site-packages before lib/python3.11


def installed_package(path: PurePath, local: bool) -> InstalledPackage | None:
    """The installed package *path* is part of, if any: by its folders' names (on any
    machine), and for a file here, by where this interpreter keeps its libraries."""
    if local:
        try:
            resolved = Path(path).resolve()
        except (OSError, ValueError, RuntimeError):
            resolved = Path(path).absolute()
        found = _from_parts(resolved.parts) or _from_parts(Path(path).absolute().parts)
        if found:
            return found
        for folder in _lib_folders():
            if resolved.is_relative_to(folder):
                rel = resolved.relative_to(folder).parts
                package = _package(rel)
                if package:
                    return InstalledPackage(package, "/".join(folder.parts[-2:]), "/".join(rel))
        return None
    return _from_parts(PurePosixPath(path).parts)

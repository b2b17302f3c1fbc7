"""Where investigations live: ``.sleuth/`` in the working directory, and which one is current.

Layout::

    sleuth.toml                 targets (see probes.config)
    .sleuth/current             the file name of the current investigation
    .sleuth/<name>.sleuth       one SQLite session file per investigation
    .sleuth/hypotheses/*.toml   the user's own hypotheses (catalog schema)
    .sleuth/known/*.toml        the user's own known upstream issues (hypotheses/known.py)
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from ..hypotheses import Catalog, load_catalog
from ..hypotheses.known import KnownIssue, load_known
from .investigation import Investigation, InvestigationError

__all__ = ["Workspace"]

SUFFIX = ".sleuth"


class Workspace:
    def __init__(self, root: Path | str = ".") -> None:
        self.root = Path(root).resolve()
        self.dir = self.root / ".sleuth"

    @classmethod
    def find(cls, start: Path | str = ".") -> Workspace:
        """The workspace *start* is in, found as git finds a repository: this directory, then
        its parents, the first with a ``.sleuth/`` or a ``sleuth.toml``; else *start* itself."""
        here = Path(start).resolve()
        for d in (here, *here.parents):
            if (d / ".sleuth").is_dir() or (d / "sleuth.toml").is_file():
                return cls(d)
        return cls(here)

    @property
    def user_hypotheses(self) -> Path:
        return self.dir / "hypotheses"

    @property
    def config_path(self) -> Path:
        return self.root / "sleuth.toml"

    def catalog(self) -> Catalog:
        return load_catalog([self.user_hypotheses])

    @property
    def user_known(self) -> Path:
        return self.dir / "known"

    def known(self) -> dict[str, KnownIssue]:
        """The known upstream issues: sleuth's and the user's (``.sleuth/known/*.toml``); a
        malformed entry is a CatalogError naming path:line."""
        return load_known([self.user_known])

    def current_path(self) -> Path | None:
        marker = self.dir / "current"
        if marker.is_file():
            name = marker.read_text(encoding="utf-8").strip()
            if name:
                return self.dir / name
        found = sorted(self.dir.glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime)
        return found[-1] if found else None

    def set_current(self, path: Path) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if path.resolve().parent == self.dir:
            (self.dir / "current").write_text(path.name + "\n", encoding="utf-8")

    def new_path(self, title: str) -> Path:
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40] or "investigation"
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = self.dir / f"{stamp}-{slug}{SUFFIX}"
        n = 2
        while path.exists():
            path = self.dir / f"{stamp}-{slug}-{n}{SUFFIX}"
            n += 1
        return path

    def create(self, title: str) -> Investigation:
        catalog = self.catalog()
        path = self.new_path(title)
        known = self.known()
        inv = Investigation.create(path, title, catalog)
        inv.known = known
        self.set_current(path)
        return inv

    def open(self, explicit: Path | str | None = None, create: bool = False) -> Investigation:
        """The investigation at *explicit*, else the current one (made if none and *create*:
        only `init` and `new` start one; reading never does)."""
        catalog = self.catalog()
        known = self.known()
        if explicit is not None:
            inv = Investigation.open(self.resolve(explicit), catalog)
            inv.known = known
            return inv
        path = self.current_path()
        if path is None:
            if not create:
                raise InvestigationError(
                    f"no investigation in {self.root} or above it; start one with `sleuth init` (or `sleuth new`), "
                    "or pass --session PATH"
                )
            return self.create("investigation")
        inv = Investigation.open(path, catalog)
        inv.known = known
        return inv

    @staticmethod
    def newest_in(directory: Path) -> Path:
        """The newest investigation in *directory*: a project (its ``.sleuth/``) or a
        ``.sleuth/`` folder itself."""
        folder = directory / ".sleuth" if (directory / ".sleuth").is_dir() else directory
        found = sorted(folder.glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime)
        if not found:
            raise InvestigationError(f"{directory}: no investigation in it (no *{SUFFIX} file"
                                     f"{' in its .sleuth/' if folder != directory else ''})")
        return found[-1]

    def resolve(self, explicit: Path | str | None) -> Path:
        """*explicit* (a session file, or a directory: its newest investigation), else the
        current investigation."""
        if explicit is not None:
            return self.newest_in(Path(explicit)) if Path(explicit).is_dir() else Path(explicit)
        path = self.current_path()
        if path is None:
            raise InvestigationError(f"no investigation in {self.root} or above it; start one with `sleuth init` "
                                     "(or `sleuth new`), or pass --session PATH")
        return path

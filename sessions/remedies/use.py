"""The remedy use-case the front ends share: where a remedy goes (a file, or the target's code
tree), its plan, its apply and its revert, and what each says of an installed package.

The CLI (app/remedy_cli.py) and the MCP tools (app/mcp_server/remedies.py) parse their own
arguments, call these, and render the result in their own words; neither builds the other's
arguments. A path the standard library refuses is one line (:func:`one_line`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...probes import Config, Target
from ...probes.remedies import RemedyError, RemedyPlan
from ..investigation import Investigation
from ..workspace import Workspace
from . import TreePlan, apply_remedy, apply_tree, plan_remedy, plan_tree, revert_remedy, revert_tree

__all__ = ["apply_plan", "installed_changed", "installed_restored", "is_tree", "one_line", "plan_at", "remedy_path",
           "revert_at"]


def remedy_path(ws: Workspace, target: Target, path: str | None) -> str:
    """PATH as given, or the target's code tree (code.local, or code.remote on a target)."""
    if path:
        return path
    code = target.code_local if target.is_local else (target.code_remote or target.workdir)
    if not code:
        raise RemedyError(f"give a PATH: target {target.name} has no code tree (code = {{ local = … }} in sleuth.toml)")
    return code


def is_tree(target: Target, path: str) -> bool:
    """A folder: here, asked of the disk; on a target, any PATH that is not a .py file."""
    return Path(path).is_dir() if target.is_local else not path.endswith(".py")


def plan_at(inv: Investigation, remedy: str, target: Target, path: str, config: Config,
            shapes: list[Any] | None = None) -> RemedyPlan | TreePlan:
    """The plan of *remedy* for the file or tree at *path*. Shapes for precompile: *shapes* when
    given, else ``[remedies.precompile] shapes`` in sleuth.toml, else the last fx-trace-state run."""
    if shapes is None:
        shapes = config.remedy_params.get(remedy, {}).get("shapes")
    if is_tree(target, path):
        return plan_tree(inv, remedy, path, target, shapes)
    return plan_remedy(inv, remedy, path, target, shapes)


def apply_plan(inv: Investigation, plan: RemedyPlan | TreePlan, target: Target, hypothesis: str | None,
               into_installed_package: bool = False) -> int | None:
    """Apply a plan (a file's or a tree's); the application's id, None when already applied."""
    if isinstance(plan, TreePlan):
        return apply_tree(inv, plan, target, hypothesis, into_installed_package=into_installed_package)
    return apply_remedy(inv, plan, target, hypothesis, into_installed_package=into_installed_package)


def revert_at(inv: Investigation, target: Target, path: str) -> int:
    """Revert the remedy applied at *path* (a file or a tree); the application's id."""
    return revert_tree(inv, path, target) if is_tree(target, path) else revert_remedy(inv, path, target)


@contextmanager
def one_line(path: str | None) -> Iterator[None]:
    """Whatever a path makes the standard library raise (a NUL byte, a name that cannot be
    encoded, a folder that cannot be listed) as a RemedyError of one line that names it."""
    at = f"{path if path is not None else 'the code tree'!s:.300}"
    try:
        yield
    except OSError as exc:  # the file the system named, else the path given
        at = f"{exc.filename}" if exc.filename is not None else at
        raise RemedyError(f"{at}: {exc.strerror or exc}") from None
    except ValueError as exc:  # a NUL byte, a name that cannot be encoded, a path that is not one
        what = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RemedyError(f"{at}: not a usable path ({what})") from None


def installed_changed(records: list[dict[str, Any]], revert_with: str) -> list[str]:
    """What an apply says of each installed package it changed, and how to put it back."""
    out = []
    for r in records:
        pkg = r.get("installed_package")
        if pkg:
            out.append(f"changed the installed package {pkg['package']} ({pkg['folder']}): {pkg['relative']} — every "
                       f"program of that environment runs the changed code, and a reinstall of {pkg['package']} drops "
                       f"it; put the original bytes back with: {revert_with}")
    return out


def installed_restored(records: list[dict[str, Any]]) -> list[str]:
    """What a revert says of each installed package it put back."""
    pkgs = dict.fromkeys(f"{r['installed_package']['package']} ({r['installed_package']['folder']})"
                         for r in records if r.get("installed_package"))
    return [f"the installed package {pkg} is as it was installed again" for pkg in pkgs]

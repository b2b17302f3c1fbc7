"""Hop chains: the exact command each hop of a target receives, built as argv lists.

The far end runs ``[container prefix] [env K=V ...] [cd helper] program``. Every piece is
an argv element; only the ssh hop is parsed by a shell, and it gets exactly one
``shlex.join`` of that argv. Python probes are ``python -`` with the program on stdin, so
probe code is never quoted at all; a workdir is entered by a constant ``sh -c`` script that
takes the directory as an argument (``cd -- "$1"``), so no user text is pasted into it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from .config import Target

__all__ = ["Hop", "HopChain", "container_prefix", "CD_SCRIPT"]

# Enter $1, then exec the rest of argv: the directory is data, never code.
CD_SCRIPT = 'cd -- "$1" && shift && exec "$@"'


def container_prefix(target: Target) -> list[str]:
    c = target.container
    if c is None or c.kind == "none":
        return []
    if c.kind == "pct":
        return ["pct", "exec", c.id, "--"]
    if c.kind in ("docker", "podman"):
        return [c.kind, "exec", "-i", *(["--user", c.user] if c.user else []), c.id]
    if c.kind == "kubectl":
        ns = ["-n", c.namespace] if c.namespace else []
        ctr = ["-c", c.user] if c.user else []
        return ["kubectl", "exec", "-i", *ns, c.id, *ctr, "--"]
    if c.kind == "lxc-attach":
        return ["lxc-attach", "-n", c.id, "--"]
    if c.kind == "srun":
        node = ["--nodelist", c.node, "--nodes", "1", "--ntasks", "1"] if c.node else []
        return ["srun", "--jobid", c.id, *node, "--overlap", "--quiet"]
    raise ValueError(f"unknown container kind {c.kind!r}")  # config.py refuses these first


@dataclass(frozen=True)
class Hop:
    name: str  # "ssh bastion", "pct exec 200 --", "/root/venv/bin/python3 -"
    receives: str  # what arrives at this hop, exactly, in words a user can check


@dataclass(frozen=True)
class HopChain:
    """The command for one run on one target."""

    target: Target
    far_argv: list[str]  # what the far end executes (inside the container, if any)

    @classmethod
    def python(cls, target: Target, args: list[str] | None = None) -> HopChain:
        return cls.for_program(target, [target.python, "-", *(args or [])])

    @classmethod
    def for_program(cls, target: Target, program: list[str]) -> HopChain:
        """The chain that runs *program* (an argv) at the far end of *target*: inside its
        container, with its env, in its workdir (this machine applies both itself)."""
        argv = list(program)
        if target.workdir and not target.is_local:
            argv = ["sh", "-c", CD_SCRIPT, "sleuth-cd", target.workdir, *argv]
        if target.env and not target.is_local:
            argv = ["env", *(f"{k}={v}" for k, v in target.env.items()), *argv]
        return cls(target, [*container_prefix(target), *argv])

    @property
    def local_argv(self) -> list[str]:
        """argv for this machine: the far argv itself (local target) or ssh runs it."""
        return self.far_argv

    @property
    def remote_command(self) -> str:
        """The one string the ssh hop's login shell parses: a single shlex.join."""
        return shlex.join(self.far_argv)

    def hops(self, stdin_note: str = "") -> list[Hop]:
        t = self.target
        out: list[Hop] = []
        if t.is_local:
            out.append(Hop("local (this machine, no shell)", f"argv {self.far_argv!r}"))
        else:
            for jump in t.jump:
                out.append(Hop(f"ssh {jump} (jump)", "a TCP tunnel to the next hop; no command"))
            where = f"{t.ssh}" + (f" port {t.port}" if t.port else "")
            out.append(Hop(f"ssh {where}", f"one command string for its login shell: {self.remote_command}"))
            prefix = container_prefix(t)
            if prefix:
                out.append(Hop(" ".join(prefix), f"argv {self.far_argv[len(prefix):]!r}"))
        if stdin_note:
            out.append(Hop(f"{t.python} -", stdin_note))
        return out

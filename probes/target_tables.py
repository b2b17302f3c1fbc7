"""One ``[targets.NAME]`` table of sleuth.toml read into a :class:`Target`: every mistake is a
ConfigError at the file, line and column of its key (``Lines`` finds them in the text)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .targets import CONTAINER_KINDS, Container, Fleet, Target

__all__ = ["TARGET_NAME", "Lines", "target_from_table"]

TARGET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

_KEYS = {
    "ssh", "jump", "port", "user", "identity", "container", "python", "env", "workdir",
    "code", "connect_timeout", "timeout", "known_hosts", "members",
}
_MEMBER_KEYS = {"ssh_config": "pattern", "file": None, "slurm_job": "job", "kubernetes": "selector", "namespace": None,
                "gpus": None}


class Lines:
    """Where a target's header and keys are in the text, for an error's file:line:col."""

    def __init__(self, path: Path, text: str) -> None:
        self.path, self.lines = path, text.splitlines()

    def header(self, name: str) -> int:
        pattern = re.compile(rf"^\s*\[\s*targets\.[\"']?{re.escape(name)}[\"']?\s*\]")
        for i, line in enumerate(self.lines, 1):
            if pattern.match(line):
                return i
        for i, line in enumerate(self.lines, 1):  # inline: targets.NAME = {...} or [targets] NAME = ...
            if re.match(rf"^\s*(targets\.)?{re.escape(name)}\s*=", line):
                return i
        return 1

    def key(self, name: str, key: str) -> tuple[int, int]:
        start = self.header(name)
        pattern = re.compile(rf"^(\s*){re.escape(key)}\s*[.=]")
        for i in range(start + 1, len(self.lines) + 1):
            line = self.lines[i - 1]
            if re.match(r"^\s*\[", line):
                break
            m = pattern.match(line)
            if m:
                return i, len(m.group(1)) + 1
        return start, 1

    def error(self, name: str, key: str | None, message: str) -> ConfigError:
        line, col = self.key(name, key) if key else (self.header(name), 1)
        return ConfigError(self.path, line, col, message)



def target_from_table(name: str, t: dict[str, Any], loc: Lines) -> Target:
    where = f"targets.{name}"
    extra = sorted(set(t) - _KEYS)
    if extra:
        raise loc.error(name, extra[0], f"{where}.{extra[0]}: unknown key; known keys: {', '.join(sorted(_KEYS))}")

    def need(key: str, kind: type | tuple[type, ...], what: str) -> Any:
        value = t.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise loc.error(name, key, f"{where}.{key}: must be {what}, got {value!r}")
        return value

    ssh = need("ssh", str, "a host, user@host or ~/.ssh/config alias")
    jump = t.get("jump", [])
    if isinstance(jump, str):
        jump = [jump]
    if not isinstance(jump, list) or not all(isinstance(j, str) and j for j in jump):
        raise loc.error(name, "jump", f"{where}.jump: must be a host or a list of hosts, got {jump!r}")
    if jump and not ssh:
        raise loc.error(name, "jump", f"{where}.jump: a jump chain needs ssh = the host behind it")
    port = need("port", int, "a port number")
    if port is not None and not 0 < port < 65536:
        raise loc.error(name, "port", f"{where}.port: {port} is not a port number")
    container = None
    c = t.get("container")
    if c is not None:
        if isinstance(c, str):
            c = {"kind": c}
        if not isinstance(c, dict):
            raise loc.error(name, "container", f"{where}.container: must be {{ kind = ..., id = ... }}")
        kind = c.get("kind")
        if kind not in CONTAINER_KINDS:
            raise loc.error(
                name, "container", f"{where}.container.kind: {kind!r} is not one of {', '.join(CONTAINER_KINDS)}"
            )
        bad = sorted(set(c) - {"kind", "id", "user", "namespace"})
        if bad:
            raise loc.error(name, "container", f"{where}.container.{bad[0]}: unknown key")
        cid = str(c.get("id", ""))
        if kind != "none" and not cid:
            raise loc.error(name, "container", f"{where}.container.id: a {kind} container needs an id")
        container = Container(kind, cid, str(c.get("user", "")), str(c.get("namespace", "")))
    env = t.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in env.values()):
        raise loc.error(name, "env", f"{where}.env: must be a table of NAME = \"value\"")
    code = t.get("code")
    code_local = code_remote = None
    if code is not None:
        if isinstance(code, str):
            code = {"local": code}
        if not isinstance(code, dict) or not set(code) <= {"local", "remote"} or not code:
            raise loc.error(name, "code", f"{where}.code: must be {{ local = \"dir\", remote = \"/path\" }}")
        code_local, code_remote = code.get("local"), code.get("remote")
    timeouts = {}
    for key, default in (("connect_timeout", 10.0), ("timeout", 600.0)):
        value = need(key, (int, float), "a number of seconds")
        if value is not None and value <= 0:
            raise loc.error(name, key, f"{where}.{key}: must be more than 0 seconds")
        timeouts[key] = float(value) if value is not None else default
    return Target(
        name=name,
        ssh=ssh,
        jump=tuple(jump),
        port=port,
        user=need("user", str, "a user name"),
        identity=need("identity", str, "a path to a private key"),
        container=container,
        python=need("python", str, "a path to a python interpreter") or (sys.executable if not ssh else "python3"),
        env={k: str(v) for k, v in env.items()},
        workdir=need("workdir", str, "a directory"),
        code_local=code_local,
        code_remote=code_remote,
        connect_timeout=timeouts["connect_timeout"],
        timeout=timeouts["timeout"],
        known_hosts=need("known_hosts", str, "a path to a known_hosts file"),
        origin=f"{loc.path}:{loc.header(name)}",
        fleet=_fleet(name, t.get("members"), loc) if "members" in t else None,
    )


def _fleet(name: str, m: Any, loc: Lines) -> Fleet:
    where = f"targets.{name}.members"
    if isinstance(m, list):
        if not m or not all(isinstance(x, str) and TARGET_NAME.match(x) for x in m):
            raise loc.error(name, "members", f"{where}: a list of target names, got {m!r}")
        if name in m:
            raise loc.error(name, "members", f"{where}: a fleet cannot be its own member")
        return Fleet("list", names=tuple(m))
    if not isinstance(m, dict):
        raise loc.error(name, "members", f"{where}: a list of targets, or one of {{ ssh_config = \"gpu-*\" }}, "
                        "{ slurm_job = \"1234\" }, { kubernetes = \"app=train\" }, { gpus = \"all\" }")
    bad = sorted(set(m) - set(_MEMBER_KEYS))
    if bad:
        raise loc.error(name, "members", f"{where}.{bad[0]}: unknown key; known: {', '.join(sorted(_MEMBER_KEYS))}")
    kinds = [k for k in ("ssh_config", "slurm_job", "kubernetes", "gpus") if k in m]
    if len(kinds) != 1:
        raise loc.error(name, "members", f"{where}: exactly one of ssh_config, slurm_job, kubernetes, gpus"
                        + (f" (got {', '.join(kinds)})" if kinds else ""))
    kind = kinds[0]
    value = m[kind]
    if kind == "gpus":
        if value == "all":
            return Fleet("gpus")
        if not (isinstance(value, list) and value and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value)):
            raise loc.error(name, "members", f"{where}.gpus: \"all\" or a list of device indices, got {value!r}")
        return Fleet("gpus", gpus=tuple(value))
    if isinstance(value, int) and not isinstance(value, bool) and kind == "slurm_job":
        value = str(value)
    if not isinstance(value, str) or not value:
        raise loc.error(name, "members", f"{where}.{kind}: must be a non-empty string, got {value!r}")
    if kind == "ssh_config":
        return Fleet("ssh_config", pattern=value, file=str(m.get("file", "~/.ssh/config")))
    if kind == "slurm_job":
        return Fleet("slurm", job=value)
    return Fleet("kubernetes", selector=value, namespace=str(m.get("namespace", "")))

"""Targets from ``sleuth.toml``: where probes run and through which hops.

Each ``[targets.NAME]`` table is one target. ``local`` always exists (this machine, no hops)
unless the file redefines it. Every error names the file, line and column and the key::

    sleuth.toml:14:1: targets.ct200.container.kind: 'pctt' is not one of pct, docker, ...

Exceptions:
    ConfigError     the file does not parse or a target is malformed
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions

from .errors import ConfigError

__all__ = ["CONTAINER_KINDS", "Config", "ConfigError", "Container", "Fleet", "Target", "load_config", "TEMPLATE"]

CONTAINER_KINDS = ("pct", "docker", "podman", "kubectl", "lxc-attach", "srun", "none")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class Container:
    kind: str
    id: str = ""
    user: str = ""  # docker/podman --user, kubectl container (-c)
    namespace: str = ""  # kubectl -n
    node: str = ""  # srun --nodelist (one node of the job)


@dataclass(frozen=True)
class Fleet:
    """What a fleet target stands for: its members, found when it is used (and recorded).

    ``kind``: ``list`` (other targets, by name), ``ssh_config`` (the Host entries of an
    OpenSSH client config matching a pattern), ``slurm`` (the nodes of a job), ``kubernetes``
    (the pods of a label selector) or ``gpus`` (one member per CUDA device of the host)."""

    kind: str
    names: tuple[str, ...] = ()  # list
    pattern: str = ""  # ssh_config
    file: str = "~/.ssh/config"  # ssh_config
    job: str = ""  # slurm
    selector: str = ""  # kubernetes
    namespace: str = ""  # kubernetes
    gpus: tuple[int, ...] = ()  # gpus: these indices; () = every device nvidia-smi lists

    def describe(self) -> str:
        return {
            "list": f"targets {', '.join(self.names)}",
            "ssh_config": f"hosts {self.pattern!r} in {self.file}",
            "slurm": f"the nodes of Slurm job {self.job}",
            "kubernetes": f"the pods -l {self.selector}" + (f" -n {self.namespace}" if self.namespace else ""),
            "gpus": f"GPUs {', '.join(map(str, self.gpus))}" if self.gpus else "every GPU of the host",
        }[self.kind]


@dataclass(frozen=True)
class Target:
    name: str
    ssh: str | None = None  # host, user@host or an ~/.ssh/config alias
    jump: tuple[str, ...] = ()
    port: int | None = None
    user: str | None = None
    identity: str | None = None
    container: Container | None = None
    python: str = "python3"
    env: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    code_local: str | None = None
    code_remote: str | None = None
    connect_timeout: float = 10.0
    timeout: float = 600.0  # default run timeout of a probe
    known_hosts: str | None = None  # None: the user's ~/.ssh/known_hosts (enforced)
    origin: str = ""  # file:line
    fleet: Fleet | None = None  # a target that stands for many members

    @property
    def is_local(self) -> bool:
        return self.ssh is None

    def definition(self) -> dict[str, Any]:
        """What a run on this target goes through — hops, container, python, env, workdir:
        part of what a check asks (a redefined target is a new question)."""
        # (a container's node only where it has one: definitions recorded before it stay equal)
        container = {k: v for k, v in self.container.__dict__.items() if k != "node" or v} if self.container else None
        return {"ssh": self.ssh, "jump": list(self.jump), "port": self.port, "user": self.user, "container": container,
                "python": self.python, "env": dict(sorted(self.env.items())), "workdir": self.workdir,
                "code": self.code_remote if self.ssh else self.code_local}

    @property
    def far_hop(self) -> int:
        """The hop (1-based) that runs commands: the last ssh hop, or 1 for this machine."""
        return len(self.jump) + 1 if self.ssh else 1

    def describe(self) -> str:
        if self.fleet is not None:
            return f"fleet of {self.fleet.describe()}"
        hops = []
        if self.ssh:
            hops += [f"ssh {j}" for j in self.jump] + [f"ssh {self.ssh}"]
        else:
            hops.append("local")
        if self.container and self.container.kind != "none":
            hops.append(f"{self.container.kind} {self.container.id}".strip())
        hops.append(self.python)
        return " → ".join(hops)


@dataclass
class Config:
    path: Path | None
    targets: dict[str, Target]
    # [probes.ID] tables: default parameters of a probe here (a command line's --param wins)
    probe_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    # [remedies.NAME] tables: e.g. precompile's shapes, when no fx-trace-state run recorded them
    remedy_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    # targets whose table has a mistake: a warning until someone asks for one (then the error)
    broken: dict[str, ConfigError] = field(default_factory=dict)

    @property
    def warnings(self) -> list[str]:
        return [f"{exc} (target {name} cannot be used until this is fixed)" for name, exc in self.broken.items()]

    def params_for(self, probe: str, given: dict[str, Any] | None = None) -> dict[str, Any]:
        return {**self.probe_params.get(probe, {}), **(given or {})}

    def target(self, name: str) -> Target:
        if name in self.broken:
            raise self.broken[name]
        if name not in self.targets:
            known = ", ".join(self.targets)
            if self.path is None:
                raise ConfigError(None, None, None, f"no target {name!r}: there is no sleuth.toml here, so only "
                                  f"{known} exists (sleuth init writes one to add targets to)")
            unusable = f"; {', '.join(self.broken)} in it cannot be used (see the warning)" if self.broken else ""
            raise ConfigError(None, None, None, f"no target {name!r}; targets: {known} (from {self.path}{unusable})")
        return self.targets[name]


_KEYS = {
    "ssh", "jump", "port", "user", "identity", "container", "python", "env", "workdir",
    "code", "connect_timeout", "timeout", "known_hosts", "members",
}
_MEMBER_KEYS = {"ssh_config": "pattern", "file": None, "slurm_job": "job", "kubernetes": "selector", "namespace": None,
                "gpus": None}


class _Lines:
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


def load_config(path: Path | str | None) -> Config:
    """Parse *path* (None or missing file: just the ``local`` target)."""
    targets = {"local": Target(name="local", python=sys.executable, origin="built-in")}
    if path is None or not Path(path).is_file():
        return Config(None, targets)
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    # the same text as last time is not parsed again (the broker parses it before it forks a
    # command): keyed by the text itself, so an edit is always seen (a file rewritten within
    # one clock tick at the same size keeps its mtime)
    key = (str(path.resolve()), text)
    if key in _PARSED:
        config = _PARSED[key]
        for warning in config.warnings:
            _warn(warning, path, text)
        return config
    try:
        doc = tomlkit.parse(text).unwrap()
    except tomlkit.exceptions.ParseError as exc:
        raise ConfigError(path, exc.line, exc.col, str(exc).split(" at line")[0]) from None
    loc = _Lines(path, text)
    unknown = set(doc) - {"targets", "sleuth", "probes", "remedies"}
    if unknown:
        key = sorted(unknown)[0]
        line = next((i for i, ln in enumerate(loc.lines, 1) if key in ln), 1)
        raise ConfigError(path, line, 1, f"unknown top-level key {key!r}; sleuth.toml holds [targets.NAME], "
                          "[probes.ID] and [remedies.NAME] tables")
    raw = doc.get("targets", {})
    if not isinstance(raw, dict):
        raise ConfigError(path, 1, 1, "targets must be a table of [targets.NAME] tables")
    broken: dict[str, ConfigError] = {}
    for name, table in raw.items():
        if not _NAME.match(name):
            raise loc.error(name, None, f"targets.{name}: a target name is letters, digits, '.', '-', '_'")
        if not isinstance(table, dict):
            raise loc.error(name, None, f"targets.{name} must be a table")
        try:
            targets[name] = _target(name, table, loc)
        except ConfigError as exc:  # blocks only what uses this target; a warning for the rest
            broken[name] = exc

    probe_params: dict[str, dict[str, Any]] = {}
    for probe, table in (doc.get("probes") or {}).items():
        if not isinstance(table, dict):
            line = next((i for i, ln in enumerate(loc.lines, 1) if re.match(rf"^\s*(probes\.)?{re.escape(probe)}\s*=", ln)), 1)
            raise ConfigError(path, line, 1, f"probes.{probe} must be a table of parameters: [probes.{probe}]")
        probe_params[probe] = dict(table)
    remedy_params: dict[str, dict[str, Any]] = {}
    for remedy, table in (doc.get("remedies") or {}).items():
        line = next((i for i, ln in enumerate(loc.lines, 1) if re.match(rf"^\s*\[\s*remedies\.{re.escape(remedy)}\s*\]", ln)), 1)
        if not isinstance(table, dict):
            raise ConfigError(path, line, 1, f"remedies.{remedy} must be a table: [remedies.{remedy}]")
        shapes = table.get("shapes")
        if shapes is not None and not (isinstance(shapes, list) and all(isinstance(s, dict) for s in shapes)):
            raise ConfigError(path, line, 1, f"remedies.{remedy}.shapes: a list of shape tables "
                              "(as fx-trace-state records them: q, k, v, block_mask, grad)")
        remedy_params[remedy] = dict(table)
    config = Config(path, targets, probe_params, remedy_params, broken)
    _PARSED.clear()
    _PARSED[key] = config
    for warning in config.warnings:
        _warn(warning, path, text)
    return config


_PARSED: dict[tuple[str, str], Config] = {}


_WARNED: set[str] = set()


def _warn(message: str, path: Path, text: str) -> None:
    """On stderr (before any screen opens: config is read first), once per change of the
    file: what was said of this very text is noted in the project's .sleuth/ folder, so the
    next command stays quiet until sleuth.toml changes (or, without that folder, once per
    process)."""
    if message in _WARNED:
        return
    _WARNED.add(message)
    stamp = hashlib.sha256(f"{path.resolve()}\0{text}\0{message}".encode()).hexdigest()[:24]
    said = path.parent / ".sleuth" / "config-warnings"
    try:
        if stamp in said.read_text(encoding="utf-8").split():
            return
    except OSError:
        pass
    print(f"sleuth: warning: {message}", file=sys.stderr)
    try:
        if said.parent.is_dir():
            with open(said, "a", encoding="utf-8") as fh:
                fh.write(stamp + "\n")
    except OSError:
        pass  # a read-only project: said again next time, never lost


def _target(name: str, t: dict[str, Any], loc: _Lines) -> Target:
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


def _fleet(name: str, m: Any, loc: _Lines) -> Fleet:
    where = f"targets.{name}.members"
    if isinstance(m, list):
        if not m or not all(isinstance(x, str) and _NAME.match(x) for x in m):
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


TEMPLATE = '''\
# sleuth.toml — where sleuth runs its probes. One [targets.NAME] table per target.
# `local` (this machine, no hops) always exists; define it here only to change it.
# Every key a target takes is below. `sleuth target show NAME` prints exactly what each hop
# receives; `sleuth target check NAME` round-trips argv and env through every hop.

[targets.local]
# python = ".venv/bin/python"      # the interpreter probes run with (a venv's python: no activate)
# workdir = "."                    # where probes start
# code = { local = "." }           # the training code remedies apply to
# env = { PYTORCH_CUDA_ALLOC_CONF = "expandable_segments:True" }

# A GPU box behind a jump host, inside an LXC container on Proxmox:
#
# [targets.ct200]
# ssh = "root@10.1.2.6"            # host, user@host or an alias from ~/.ssh/config
# jump = ["bastion"]               # ProxyJump chain, first hop first
# port = 22                       # user = "root"      identity = "~/.ssh/id_ed25519"
# known_hosts = "~/.ssh/known_hosts"   # enforced: an unknown or changed host key is refused
# container = { kind = "pct", id = "200" }   # pct | docker | podman | kubectl | lxc-attach | srun
#   (docker/podman: user = "…"; kubectl: namespace = "…", user = the container name; srun: id = the job id)
# python = "/root/venv/bin/python3"
# workdir = "/root/dflash"
# code = { local = "drafter/", remote = "/root/dflash" }
# env = { PYTORCH_CUDA_ALLOC_CONF = "expandable_segments:True" }
# connect_timeout = 10             # seconds
# timeout = 600                    # default run timeout of a probe, seconds

# Default parameters of a probe here (`sleuth probe list` shows each probe's own;
# --param KEY=VALUE on the command line wins):
#
# [probes.compile-race]                 # your entry, run as you wrote it: nothing else is added
# entry = "train.py"
# args = ["--steps", "20"]                # given to every run
# threaded_args = []                      # added for the threaded trials (e.g. ["--workers", "4"])
# control_args = ["--workers", "1"]       # how it runs with ONE worker: the single-thread control
# control_env = {}                        # or an environment variable that makes it single-threaded
# trials = 3                              # threaded trials, each on fresh compile caches
#
# [probes.fx-trace-state]               # the same entry, watched: compile sites, flags, uncompiled calls
# entry = "train.py"
# args = ["--steps", "20"]
#
# [probes.compile-cache]                # the entry compiled against the cache folder it uses
# entry = "train.py"
# env = { TORCHINDUCTOR_CACHE_DIR = "/data/inductor-cache" }   # the entry's own, if it sets one
'''

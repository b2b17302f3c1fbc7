"""Reading ``sleuth.toml``: its targets (where probes run and through which hops), probe and
remedy defaults, and the warnings for what cannot be used; ``TEMPLATE`` is what init writes.

Each ``[targets.NAME]`` table is one target. ``local`` always exists (this machine, no hops)
unless the file redefines it. Every error names the file, line and column and the key::

    sleuth.toml:14:1: targets.ct200.container.kind: 'pctt' is not one of pct, docker, ...

The records are in probes/targets.py, a target's table is read by probes/target_tables.py;
both are importable from here.

Exceptions:
    ConfigError     the file does not parse or a target is malformed
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions

from .errors import ConfigError
from .target_tables import TARGET_NAME, Lines, target_from_table
from .targets import CONTAINER_KINDS, Config, Container, Fleet, Target

__all__ = ["CONTAINER_KINDS", "Config", "ConfigError", "Container", "Fleet", "Target", "load_config", "TEMPLATE"]


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
    loc = Lines(path, text)
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
        if not TARGET_NAME.match(name):
            raise loc.error(name, None, f"targets.{name}: a target name is letters, digits, '.', '-', '_'")
        if not isinstance(table, dict):
            raise loc.error(name, None, f"targets.{name} must be a table")
        try:
            targets[name] = target_from_table(name, table, loc)
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

"""What a target is: where a probe runs and through which hops (``Target``, its ``Container``
and ``Fleet``), and ``Config``, what sleuth.toml holds (read by probes/config.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["CONTAINER_KINDS", "Config", "Container", "Fleet", "Target"]

CONTAINER_KINDS = ("pct", "docker", "podman", "kubectl", "lxc-attach", "srun", "none")



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

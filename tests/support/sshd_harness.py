"""Real OpenSSH servers on 127.0.0.1 for the transport tests and benchmarks.

Two sshd processes with throwaway host and user keys: a *jump* host and the *gpu* host
behind it (reached through the jump with a tunnel). On the gpu host's PATH sits a ``pct``
program that stands in for Proxmox's ``pct exec <vmid> -- argv…`` (it checks the syntax,
refuses unknown container ids like the real one, marks the environment as inside the
container, and execs argv), and a real venv whose python is the target's interpreter.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

from sleuth.probes import Container, Target

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"

PCT = textwrap.dedent(
    """\
    #!/bin/sh
    # Stands in for Proxmox VE's `pct exec <vmid> -- <argv…>` in tests: runs argv "inside"
    # container <vmid> (here: the same host, with the container's marker variables set).
    [ "$1" = exec ] || { echo "pct: only 'exec' is emulated here" >&2; exit 2; }
    vmid=$2; shift 2
    [ "$1" = "--" ] || { echo "400 unable to parse option: expected -- before the command" >&2; exit 2; }
    shift
    [ -d "$PCT_ROOT/$vmid" ] || { echo "Configuration file 'nodes/pve/lxc/$vmid.conf' does not exist" >&2; exit 255; }
    export container=lxc SLEUTH_TEST_CT="$vmid"
    exec "$@"
    """
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Sshd:
    name: str
    port: int
    config: Path
    proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.config)], stderr=subprocess.PIPE)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd {self.name} exited: {self.proc.stderr.read().decode()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    if s.recv(4).startswith(b"SSH-"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"sshd {self.name} did not listen on {self.port}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def kill_all(self) -> None:
        """SIGKILL the listener and every session process it forked (sshd-session too)."""
        if self.proc is None:
            return
        table = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout.split()
        children: dict[int, list[int]] = {}
        for pid, ppid in zip(table[::2], table[1::2]):
            children.setdefault(int(ppid), []).append(int(pid))
        doomed, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            doomed.append(pid)
            todo.extend(children.get(pid, []))
        for pid in doomed:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        self.proc.wait()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class SshHarness:
    root: Path
    user: str = field(default_factory=getpass.getuser)
    servers: dict[str, Sshd] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.bin = self.root / "bin"
        self.client_key = self.root / "id_ed25519"
        self.host_key = self.root / "ssh_host_ed25519_key"
        self.known_hosts = self.root / "known_hosts"
        self.authorized = self.root / "authorized_keys"
        self.pct_root = self.root / "pct"
        self.venv = self.root / "venv"

    def setup(self) -> SshHarness:
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        for key in (self.client_key, self.host_key):
            if not key.exists():
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        self.authorized.write_text(Path(f"{self.client_key}.pub").read_text())
        os.chmod(self.authorized, 0o600)
        self.bin.mkdir(exist_ok=True)
        (self.bin / "pct").write_text(PCT)
        os.chmod(self.bin / "pct", 0o755)
        (self.pct_root / "200").mkdir(parents=True, exist_ok=True)
        if not (self.venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(self.venv)], check=True)
        host_pub = Path(f"{self.host_key}.pub").read_text().split()
        lines = []
        for name in ("jump", "gpu"):
            port = free_port()
            cfg = self.root / f"sshd_{name}.conf"
            cfg.write_text(
                textwrap.dedent(
                    f"""\
                    Port {port}
                    ListenAddress 127.0.0.1
                    HostKey {self.host_key}
                    PidFile {self.root}/sshd_{name}.pid
                    AuthorizedKeysFile {self.authorized}
                    PubkeyAuthentication yes
                    PasswordAuthentication no
                    KbdInteractiveAuthentication no
                    UsePAM no
                    StrictModes no
                    PermitRootLogin yes
                    AllowTcpForwarding yes
                    MaxSessions 200
                    MaxStartups 200:30:400
                    SetEnv PATH={self.bin}:/usr/local/bin:/usr/bin:/bin PCT_ROOT={self.pct_root}
                    Subsystem sftp internal-sftp
                    LogLevel ERROR
                    """
                )
            )
            self.servers[name] = Sshd(name, port, cfg)
            lines.append(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}")
        self.known_hosts.write_text("\n".join(lines) + "\n")
        return self

    def start(self) -> SshHarness:
        for server in self.servers.values():
            if not server.running:
                server.start()
        return self

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    def target(self, name: str = "ct200", jump: bool = True, container: str | None = "200", **over) -> Target:
        gpu = self.servers["gpu"]
        fields = dict(
            name=name,
            ssh=f"{self.user}@127.0.0.1",
            port=gpu.port,
            jump=(f"127.0.0.1:{self.servers['jump'].port}",) if jump else (),
            identity=str(self.client_key),
            known_hosts=str(self.known_hosts),
            container=Container("pct", container) if container else None,
            python=self.python,
            connect_timeout=5.0,
            timeout=60.0,
        )
        fields.update(over)
        return Target(**fields)

    def ssh_config(self) -> Path:
        """An OpenSSH client config for the same hosts (for the baselines in bench/)."""
        path = self.root / "ssh_config"
        jump, gpu = self.servers["jump"], self.servers["gpu"]
        common = (
            f"  HostName 127.0.0.1\n  User {self.user}\n  IdentityFile {self.client_key}\n"
            f"  UserKnownHostsFile {self.known_hosts}\n  StrictHostKeyChecking yes\n  BatchMode yes\n"
            "  IdentitiesOnly yes\n"
        )
        path.write_text(
            f"Host jump\n  Port {jump.port}\n{common}\nHost gpu\n  Port {gpu.port}\n{common}"
        )
        return path

    def toml(self, name: str = "ct200", jump: bool = True, container: str | None = "200") -> str:
        t = self.target(name, jump, container)
        out = [f"[targets.{name}]", f'ssh = "{t.ssh}"', f"port = {t.port}"]
        if t.jump:
            out.append(f'jump = ["{t.jump[0]}"]')
        out += [f'identity = "{t.identity}"', f'known_hosts = "{t.known_hosts}"', f'python = "{t.python}"']
        if container:
            out.append(f'container = {{ kind = "pct", id = "{container}" }}')
        out.append("connect_timeout = 5")
        return "\n".join(out) + "\n"

"""A real Slurm cluster on this machine for the fleet tests: munged with a throwaway key,
one slurmctld and four slurmd (node1..node4, Debian's build runs several with -N), all on
ports of their own, and a batch job holding the four nodes. Needs root (slurmd runs jobs as
their user) and Debian's slurmctld, slurmd and munge (.ci/run installs them)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

from support.sshd_harness import free_port

NODES = ("node1", "node2", "node3", "node4")


@dataclass
class Slurm:
    root: Path
    procs: list[subprocess.Popen] = field(default_factory=list)
    job: str = ""

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, timeout: float = 30) -> str:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, check=True, timeout=timeout).stdout

    def start(self) -> Slurm:
        missing = [b for b in ("munged", "slurmctld", "slurmd", "sbatch") if not shutil.which(b) and not Path(f"/usr/sbin/{b}").exists()]
        assert not missing, f"Slurm is not installed ({', '.join(missing)}): apt-get install -y slurmctld slurmd munge (.ci/run does)"
        assert os.geteuid() == 0, "the Slurm tests start slurmd, which must run as root"
        r = self.root
        for d in ("state", "log", *(f"spool/{n}" for n in NODES)):
            (r / d).mkdir(parents=True, exist_ok=True)
        key = r / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        sock = r / "munge.sock"
        self.procs.append(subprocess.Popen(
            [shutil.which("munged") or "/usr/sbin/munged", "-F", f"--socket={sock}", f"--key-file={key}",
             f"--pid-file={r}/munged.pid", f"--log-file={r}/log/munged.log", f"--seed-file={r}/munge.seed", "--force"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self._wait(lambda: sock.exists(), "munged's socket")
        host = socket.gethostname()
        ports = [free_port() for _ in range(2 + len(NODES))]
        self.conf.write_text(textwrap.dedent(f"""\
            ClusterName=sleuthtest
            SlurmctldHost={host}
            SlurmctldPort={ports[0]}
            SlurmdPort={ports[1]}
            AuthType=auth/munge
            AuthInfo=socket={sock}
            CredType=cred/munge
            SlurmUser=root
            SlurmdUser=root
            StateSaveLocation={r}/state
            SlurmdSpoolDir={r}/spool/%n
            SlurmctldPidFile={r}/slurmctld.pid
            SlurmdPidFile={r}/slurmd-%n.pid
            SlurmctldLogFile={r}/log/slurmctld.log
            SlurmdLogFile={r}/log/slurmd-%n.log
            ProctrackType=proctrack/linuxproc
            TaskPlugin=task/none
            SelectType=select/cons_tres
            SelectTypeParameters=CR_CPU
            MpiDefault=none
            JobAcctGatherType=jobacct_gather/none
            AccountingStorageType=accounting_storage/none
            ReturnToService=2
            SchedulerType=sched/builtin
            """) + "".join(
                f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={ports[2 + i]} CPUs=2 State=UNKNOWN\n"
                for i, n in enumerate(NODES))
            + "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE\n")
        self.procs.append(subprocess.Popen([shutil.which("slurmctld") or "/usr/sbin/slurmctld", "-D", "-c", "-i"],
                                           env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for n in NODES:
            self.procs.append(subprocess.Popen([shutil.which("slurmd") or "/usr/sbin/slurmd", "-D", "-N", n],
                                               env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self._wait(lambda: self._idle() == len(NODES), "four idle nodes", 60)
        self.job = self.run("sbatch", "--parsable", "-N", str(len(NODES)), "-n", str(len(NODES)), "-o", "/dev/null",
                            "--wrap", "sleep 3600").strip()
        self._wait(lambda: self.run("squeue", "-j", self.job, "-h", "-o", "%T").strip() == "RUNNING", "the job to run", 60)
        return self

    def _idle(self) -> int:
        try:
            out = self.run("sinfo", "-h", "-N", "-o", "%N %t", timeout=10)
        except subprocess.SubprocessError:
            return 0
        return sum(1 for line in out.splitlines() if line.split()[-1] == "idle")

    def _wait(self, ready, what: str, timeout: float = 20) -> None:
        end = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > end:
                logs = "\n".join(p.read_text()[-600:] for p in (self.root / "log").glob("*.log"))
                raise AssertionError(f"Slurm: never saw {what}\n{logs}")
            time.sleep(0.3)

    def _job_gone(self) -> bool:
        try:
            return not self.run("squeue", "-j", self.job, "-h", "-o", "%T", timeout=10).strip()
        except subprocess.SubprocessError:  # "Invalid job id": it has left the queue
            return True

    def stop(self) -> None:
        if self.job:
            subprocess.run(["scancel", self.job], env=self.env, capture_output=True, timeout=30)
            try:  # the batch step ends while its slurmd is still there to hear it (else it lingers)
                self._wait(self._job_gone, "the job to end", 30)
            except AssertionError:
                pass
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        if self.job and shutil.which("pkill"):  # whatever of the job's steps outlived the daemons
            subprocess.run(["pkill", "-KILL", "-f", rf"^slurmstepd: \[{self.job}\."], capture_output=True)

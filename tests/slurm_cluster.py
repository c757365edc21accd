"""A one-node SLURM cluster for the tests, started from a generated config in a temporary folder.

Nothing is installed here: with Debian's ``slurm-wlm`` and ``munge`` packages present (``.ci/run`` installs them) and
running as root, :func:`slurm_cluster` starts ``munged``, ``slurmctld`` and ``slurmd`` for this host, each in the
foreground as a child process, with every state, spool, log and pid file and the munge key and socket under the
folder and the SLURM ports chosen free on 127.0.0.1. It waits until ``sinfo`` shows the node idle and at teardown
cancels the jobs, then stops exactly the daemons it started, by their process ids. Otherwise the tests skip with
the reason. Commands reach the cluster through ``SLURM_CONF`` (:attr:`SlurmCluster.env`).

The generated ``slurm.conf`` (docs/scale.md shows it): ``proctrack/linuxproc`` (no cgroups), ``task/none``,
``select/cons_tres`` with ``CR_Core``, ``auth/munge`` on the private munge socket (``AuthInfo=socket=...``),
no accounting, one partition with the node ``CPUs=2`` ``RealMemory=4000`` (``SlurmdParameters=config_overrides``,
so the node is usable whatever the machine reports), ``KillWait=5``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "sinfo", "squeue", "scancel")
SBIN = ("/usr/sbin", "/sbin")  # where Debian puts the daemons (not on every user's PATH)
START_TIMEOUT_S = 90
NODE_CPUS = 2


def find(program: str) -> str | None:
    """The path of ``program`` on PATH or in the sbin folders."""
    return shutil.which(program, path=os.pathsep.join([os.environ.get("PATH", ""), *SBIN]))


def unavailable() -> str | None:
    """Why a SLURM cluster cannot start here, or None."""
    missing = [program for program in (*DAEMONS, *CLIENTS) if find(program) is None]
    if missing:
        return f"SLURM is not installed ({', '.join(missing)} missing): apt-get install -y slurm-wlm munge"
    if os.geteuid() != 0:
        return "starting slurmd for a test needs root"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def slurm_conf(root: Path, node: str, ctld_port: int, slurmd_port: int) -> str:
    return "\n".join(
        [
            "ClusterName=fairnastest",
            f"SlurmctldHost={node}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={root / 'munge' / 'munge.socket'}",
            f"StateSaveLocation={root / 'state'}",
            f"SlurmdSpoolDir={root / 'spool'}",
            f"SlurmctldPidFile={root / 'slurmctld.pid'}",
            f"SlurmdPidFile={root / 'slurmd.pid'}",
            f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            "KillWait=5",
            f"NodeName={node} NodeAddr=127.0.0.1 CPUs={NODE_CPUS} RealMemory=4000 State=UNKNOWN",
            f"PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


class SlurmCluster:
    """The running cluster: ``env`` (the environment with ``SLURM_CONF``), ``root`` (its folder), and helpers."""

    def __init__(self, root: Path):
        self.root = root
        self.node = socket.gethostname().split(".")[0]
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.daemons: dict[str, subprocess.Popen] = {}

    def start(self) -> None:
        for folder in ("state", "spool", "log"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        munge = self.root / "munge"
        munge.mkdir(mode=0o700)
        (munge / "munge.key").write_bytes(os.urandom(1024))
        os.chmod(munge / "munge.key", 0o600)
        self.conf.write_text(slurm_conf(self.root, self.node, free_port(), free_port()))
        self._daemon(
            "munged",
            "-F",
            "--force",  # as root, in a folder munged would call insecure
            f"--key-file={munge / 'munge.key'}",
            f"--socket={munge / 'munge.socket'}",
            f"--pid-file={munge / 'munged.pid'}",
            f"--seed-file={munge / 'munged.seed'}",
            f"--log-file={self.root / 'log' / 'munged.log'}",
        )
        self._wait(lambda: (munge / "munge.socket").exists(), "munged's socket")
        self._daemon("slurmctld", "-D", "-f", str(self.conf))
        self._wait(lambda: self.run("sinfo", check=False).returncode == 0, "slurmctld to answer")
        self._daemon("slurmd", "-D", "-f", str(self.conf))
        self._wait(lambda: self.node_state() == "idle", f"node {self.node} idle")

    def _daemon(self, name: str, *args: str) -> None:
        log = open(self.root / "log" / f"{name}.out", "ab")  # noqa: SIM115 (closed with the daemon at stop)
        self.daemons[name] = subprocess.Popen(
            [str(find(name)), *args], stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
        )
        log.close()

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            dead = [name for name, process in self.daemons.items() if process.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"SLURM did not start ({what}; ended: {dead}):\n{self.logs()}")
            time.sleep(0.2)

    def logs(self) -> str:
        return "\n".join(
            f"== {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-20:])
            for path in sorted((self.root / "log").glob("*"))
        )

    def run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(find(command[0])), *command[1:]], env=self.env, capture_output=True, text=True, check=check, timeout=60
        )

    def node_state(self) -> str:
        done = self.run("sinfo", "-h", "-N", "-n", self.node, "-o", "%t", check=False)
        return done.stdout.strip()

    def sbatch(self, *args: str, env: dict[str, str] | None = None) -> str:
        """Submit a job; its id (of an array: the array's id)."""
        done = subprocess.run(
            [str(find("sbatch")), "--parsable", *args],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            raise RuntimeError(f"sbatch failed: {done.stderr}")
        return done.stdout.strip().split(";")[0]

    def jobs(self) -> list[str]:
        """The ids of the jobs pending or running (array elements as ``<array>_<index>``)."""
        return self.run("squeue", "-h", "-o", "%i").stdout.split()

    def running(self) -> set[str]:
        """The running jobs, as ``scancel`` takes them (array elements as ``<array>_<index>``)."""
        return set(self.run("squeue", "-h", "-t", "R", "-o", "%i").stdout.split())

    def cancel_all(self, timeout_s: float = 60) -> None:
        self.run("scancel", "-u", "root", check=False)
        deadline = time.monotonic() + timeout_s
        while self.jobs() and time.monotonic() < deadline:
            time.sleep(0.5)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.cancel_all()
        for name in reversed(DAEMONS):  # slurmd, slurmctld, munged
            process = self.daemons.pop(name, None)
            if process is None or process.poll() is not None:
                continue
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def slurm_cluster(root: Path) -> Iterator[SlurmCluster]:
    """A started cluster under ``root``, stopped on exit (raises RuntimeError with the logs if it cannot start)."""
    cluster = SlurmCluster(root)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()

"""A real single-node Slurm for tests: munged, slurmctld and slurmd as daemons in a tmp folder.

Debian's packages (``slurm-wlm``, ``munge``; ``.ci/run`` installs them), no systemd, no
accounting (``sacct`` answers "accounting storage is disabled", as on many clusters for users):
one node named ``gpubench-node`` (this host, 2 CPUs, ``config_overrides`` so a smaller machine
still schedules), partition ``debug``, ``proctrack/linuxproc`` and ``task/none`` (no cgroups
needed in a container), ``cred_expire=10`` (a requeued job may start again after 10 s, not
120). Ports are drawn free, so two test sessions never share a controller.
:func:`start` returns the cluster, or raises :class:`Unavailable` with the reason. It starts
system daemons only when asked (:func:`opted_in`: ``CI=true``, as ``.ci/run`` sets, or
``GPUBENCH_TEST_SLURM=1``): a root shell with the packages installed is not a request.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "scontrol", "squeue", "scancel", "sinfo")
NODE = "gpubench-node"
PARTITION = "debug"
START_TIMEOUT_SECONDS = 60
OPT_IN = "GPUBENCH_TEST_SLURM"


class Unavailable(RuntimeError):
    """A real Slurm cannot be started here (what is missing is the message)."""


@dataclass
class Cluster:
    root: Path
    conf: Path
    env: dict[str, str]  # SLURM_CONF for clients
    pid_files: list[Path] = field(default_factory=list)

    def run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(command), env=self.env, capture_output=True, text=True, check=check, timeout=60
        )

    def logs(self) -> str:
        """The daemons' logs, for a failure message."""
        texts = []
        for path in sorted((self.root / "log").glob("*.log")):
            tail = path.read_text(errors="replace").splitlines()[-15:]
            texts.append(f"--- {path.name}\n" + "\n".join(tail))
        return "\n".join(texts)

    def stop(self) -> None:
        """Stop every daemon and job step of this cluster; safe twice and after a failed start.

        Jobs are cancelled and drained first (a step still finishing would keep slurmd
        waiting for a controller that is gone); the PIDs are read before ``scontrol shutdown``
        (the daemons delete their pid files); whatever still runs with this cluster's
        SLURM_CONF in its environment (slurmstepd included) is then killed.
        """
        pids = [pid for pid in map(_read_pid, self.pid_files) if pid is not None]
        if (self.root / "slurmctld.pid").exists():
            self.run("scancel", "--full", "--partition", PARTITION, check=False)
            deadline = time.monotonic() + 40  # KillWait (30 s) bounds a step's end
            while time.monotonic() < deadline:
                queue = self.run("squeue", "-h", "-o", "%i", check=False)
                if queue.returncode != 0 or not queue.stdout.strip():
                    break
                time.sleep(0.5)
            self.run("scontrol", "shutdown", check=False)
        for pid in reversed(pids):  # munged is not stopped by scontrol; SIGTERM stops each
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for pid in [*reversed(pids), *_processes_of(self.conf)]:
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid):
                _signal(pid, signal.SIGKILL)


def _processes_of(conf: Path) -> list[int]:
    """PIDs whose environment names this cluster's slurm.conf (slurmd, slurmstepd, jobs)."""
    marker = f"SLURM_CONF={conf}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours counts as gone
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tool(name: str) -> str:
    for folder in ("/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        if os.access(f"{folder}/{name}", os.X_OK):
            return f"{folder}/{name}"
    found = shutil.which(name)
    if found is None:
        raise Unavailable(
            f"`{name}` not found: install Debian's slurm-wlm and munge packages "
            "(`.ci/run` does, as root)"
        )
    return found


def _conf(root: Path, host: str) -> str:
    ctld, slurmd = _free_port(), _free_port()
    return f"""\
ClusterName=gpubenchtest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld}
SlurmdPort={slurmd}
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.socket,cred_expire=10
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
KillWait=30
MinJobAge=300
SchedulerParameters=sched_interval=2
NodeName={NODE} NodeHostname={host} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
"""


def opted_in(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether real daemons may be started: under ``CI=true`` or ``GPUBENCH_TEST_SLURM=1``."""
    return environ.get("CI", "").lower() == "true" or environ.get(OPT_IN) == "1"


def start(root: Path) -> Cluster:
    """Start munged, slurmctld and slurmd under ``root``; wait until the node is idle."""
    if not opted_in():
        raise Unavailable(
            "it starts real Slurm daemons (munged, slurmctld, slurmd) on this machine, as "
            f"root; run it with {OPT_IN}=1 (CI=true, as .ci/run sets, runs it too)"
        )
    if not Path("/proc/self").is_dir():
        raise Unavailable("a real Slurm needs Linux")
    if os.geteuid() != 0:
        raise Unavailable("slurmd runs jobs as their user and must be started as root")
    tools = {name: _tool(name) for name in (*DAEMONS, *CLIENTS)}
    for folder in ("munge", "state", "spool", "log"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "munge").chmod(0o711)  # munged wants its socket folder reachable, not writable
    host = socket.gethostname().split(".")[0]
    conf = root / "slurm.conf"
    conf.write_text(_conf(root, host), encoding="utf-8")
    cluster = Cluster(root, conf, {**os.environ, "SLURM_CONF": str(conf)})
    key = root / "munge" / "munge.key"
    steps = [
        [tools["mungekey"], "--create", f"--keyfile={key}"],
        [
            tools["munged"],
            "--force",
            f"--socket={root}/munge/munge.socket",
            f"--key-file={key}",
            f"--pid-file={root}/munge/munged.pid",
            f"--log-file={root}/log/munged.log",
            f"--seed-file={root}/munge/seed",
        ],
        [tools["slurmctld"], "-f", str(conf), "-i"],
        [tools["slurmd"], "-f", str(conf), "-N", NODE],
    ]
    pid_files = [None, root / "munge" / "munged.pid", root / "slurmctld.pid", root / "slurmd.pid"]
    try:
        for command, pid_file in zip(steps, pid_files, strict=True):
            done = cluster.run(*command, check=False)
            if pid_file is not None:
                cluster.pid_files.append(pid_file)
            if done.returncode != 0:
                raise Unavailable(
                    f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()}\n"
                    + cluster.logs()
                )
            if pid_file is not None:
                _wait_for(pid_file.exists, f"{pid_file.name} to appear", cluster)
        _wait_for(lambda: _node_idle(cluster), f"node {NODE} to be idle", cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _node_idle(cluster: Cluster) -> bool:
    done = cluster.run("sinfo", "-h", "-n", NODE, "-o", "%T", check=False)
    return done.returncode == 0 and done.stdout.strip() == "idle"


def _wait_for(ready, what: str, cluster: Cluster) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not ready():
        if time.monotonic() > deadline:
            raise Unavailable(f"gave up waiting for {what}\n{cluster.logs()}")
        time.sleep(0.2)

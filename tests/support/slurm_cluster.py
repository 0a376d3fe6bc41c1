"""A real Slurm for tests: munged, slurmctld and one slurmd per node as daemons in a tmp folder.

Debian's packages (``slurm-wlm``, ``munge``; ``.ci/run`` installs them), no systemd, no
accounting (``sacct`` answers "accounting storage is disabled", as on many clusters for users).
A cluster is its partitions, each a tuple of node names: :data:`SINGLE` is one node named
``gpubench-node`` in partition ``debug``; :data:`THREE_NODES` is ``a`` = n1 and ``b`` = n2, n3.
Every node is this host on loopback (127.0.0.1), one ``slurmd -N <node>`` each, with a ``Port=``
of its own and ``%n`` in the spool, pid and log paths (several slurmd on one host, as Debian's
build allows). Each node claims 2 CPUs (``config_overrides`` so a smaller machine still
schedules); ``proctrack/linuxproc`` and ``task/none`` (no cgroups needed in a container);
``cred_expire=10`` (a requeued job may start again after 10 s, not 120); ``SlurmdTimeout`` of
:data:`SLURMD_TIMEOUT_SECONDS` (a node whose slurmd is killed is down in well under a minute).
Ports are drawn free, so two test sessions never share a controller.

:func:`start` returns the cluster, or raises :class:`Unavailable` with the reason. It starts
system daemons only when asked (:func:`opted_in`: ``CI=true``, as ``.ci/run`` sets, or
``GPUBENCH_TEST_SLURM=1``): a root shell with the packages installed is not a request.
:func:`running` is the fixture's body: the cluster, stopped when the fixture ends; every
started cluster is also stopped at interpreter exit and on SIGTERM, so no daemon outlives the
test session.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "scontrol", "squeue", "scancel", "sinfo")
NODE = "gpubench-node"
PARTITION = "debug"
SINGLE: Mapping[str, tuple[str, ...]] = {PARTITION: (NODE,)}
THREE_NODES: Mapping[str, tuple[str, ...]] = {"a": ("n1",), "b": ("n2", "n3")}
START_TIMEOUT_SECONDS = 60
SLURMD_TIMEOUT_SECONDS = 15
OPT_IN = "GPUBENCH_TEST_SLURM"


class Unavailable(RuntimeError):
    """A real Slurm cannot be started here (what is missing is the message)."""


@dataclass(eq=False)
class Cluster:
    root: Path
    conf: Path
    env: dict[str, str]  # SLURM_CONF for clients
    partitions: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: dict(SINGLE))
    tools: dict[str, str] = field(default_factory=dict)
    pid_files: list[Path] = field(default_factory=list)

    @property
    def nodes(self) -> list[str]:
        return [node for nodes in self.partitions.values() for node in nodes]

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

    def slurmd_pid_file(self, node: str) -> Path:
        return self.root / f"slurmd-{node}.pid"

    def start_slurmd(self, node: str) -> None:
        """Start (or start again) the slurmd of ``node``; wait until it runs."""
        pid_file = self.slurmd_pid_file(node)
        pid_file.unlink(missing_ok=True)
        self._daemon([self.tools["slurmd"], "-f", str(self.conf), "-N", node], pid_file)

    def stop_controller(self) -> None:
        """Stop slurmctld (SIGTERM, as a restart by an admin); jobs and slurmd go on."""
        pid = _read_pid(self.root / "slurmctld.pid")
        if pid is not None:
            _signal(pid, signal.SIGTERM)
            _wait_for(lambda: not _alive(pid), "slurmctld to stop", self)

    def start_controller(self) -> None:
        """Start slurmctld again from its saved state (jobs kept); wait until it answers."""
        (self.root / "slurmctld.pid").unlink(missing_ok=True)
        self._daemon([self.tools["slurmctld"], "-f", str(self.conf)], self.root / "slurmctld.pid")
        _wait_for(
            lambda: self.run("scontrol", "ping", check=False).returncode == 0,
            "slurmctld to answer",
            self,
        )

    def kill_node(self, node: str) -> list[int]:
        """SIGKILL the slurmd of ``node``, its job steps (slurmstepd) and their processes: a
        node that dies without a word. The PIDs killed."""
        pids = [pid for pid in [_read_pid(self.slurmd_pid_file(node))] if pid is not None]
        jobs = self.run("squeue", "-h", "-w", node, "-o", "%i", check=False).stdout.split()
        for pid in _processes_of(self.conf):
            environ = _environ(pid)
            stepd = _cmdline(pid).startswith("slurmstepd:") and any(
                f"[{job}." in _cmdline(pid) for job in jobs
            )
            if stepd or f"SLURMD_NODENAME={node}".encode() in environ:
                pids.append(pid)
        for pid in pids:
            _signal(pid, signal.SIGKILL)
        return pids

    def node_of(self, job_id: str) -> str:
        """The node a job runs on now ("" when it runs nowhere)."""
        return self.run("squeue", "-h", "-j", job_id, "-o", "%N", check=False).stdout.strip()

    def _daemon(self, command: list[str], pid_file: Path | None) -> None:
        done = self.run(*command, check=False)
        if pid_file is not None and pid_file not in self.pid_files:
            self.pid_files.append(pid_file)
        if done.returncode != 0:
            raise Unavailable(
                f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()}\n"
                + self.logs()
            )
        if pid_file is not None:
            _wait_for(pid_file.exists, f"{pid_file.name} to appear", self)

    def stop(self, drain: bool = True) -> None:
        """Stop every daemon and job step of this cluster; safe twice and after a failed start.

        ``drain``: jobs are cancelled and drained first (a step still finishing would keep
        slurmd waiting for a controller that is gone); the PIDs are read before ``scontrol
        shutdown`` (the daemons delete their pid files); whatever still runs with this
        cluster's SLURM_CONF in its environment (slurmstepd included) is then killed.
        """
        with contextlib.suppress(ValueError):
            _STARTED.remove(self)
        pids = [pid for pid in map(_read_pid, self.pid_files) if pid is not None]
        if drain and (self.root / "slurmctld.pid").exists():
            jobs = self.run("squeue", "-h", "-o", "%i", check=False).stdout.split()
            if jobs:
                self.run("scancel", "--full", *jobs, check=False)
            deadline = time.monotonic() + 40  # KillWait (30 s) bounds a step's end
            while time.monotonic() < deadline:
                queue = self.run("squeue", "-h", "-t", "R,CG", "-o", "%i", check=False)
                if queue.returncode != 0 or not queue.stdout.strip():
                    break
                time.sleep(0.5)
            self.run("scontrol", "shutdown", check=False)
        for pid in reversed(pids):  # munged is not stopped by scontrol; SIGTERM stops each
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + (15 if drain else 3)
        for pid in [*reversed(pids), *_processes_of(self.conf)]:
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid):
                _signal(pid, signal.SIGKILL)


_STARTED: list[Cluster] = []  # stopped at exit and on SIGTERM, whatever the tests did


def _stop_all() -> None:
    for cluster in list(_STARTED):
        cluster.stop(drain=False)


def _on_sigterm(signum: int, frame: object) -> None:
    _stop_all()
    signal.signal(signal.SIGTERM, _PREVIOUS_SIGTERM or signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


_PREVIOUS_SIGTERM: object = None


def _guard(cluster: Cluster) -> None:
    """Register ``cluster`` to be stopped at interpreter exit and on SIGTERM (installed once)."""
    global _PREVIOUS_SIGTERM
    if not _STARTED and not getattr(_guard, "installed", False):
        atexit.register(_stop_all)
        if threading.current_thread() is threading.main_thread():
            _PREVIOUS_SIGTERM = signal.signal(signal.SIGTERM, _on_sigterm)
        _guard.installed = True  # type: ignore[attr-defined]
    _STARTED.append(cluster)


def _processes_of(conf: Path) -> list[int]:
    """PIDs whose environment names this cluster's slurm.conf (slurmd, slurmstepd, jobs)."""
    marker = f"SLURM_CONF={conf}".encode()
    return [
        pid
        for pid in (int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit())
        if pid != os.getpid() and marker in _environ(pid).split(b"\0")
    ]


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


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


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports (held open together, so none is drawn twice)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]


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


def _conf(root: Path, host: str, partitions: Mapping[str, tuple[str, ...]]) -> str:
    nodes = [node for members in partitions.values() for node in members]
    ctld, *ports = _free_ports(1 + len(nodes))
    node_lines = "".join(
        f"NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} CPUs=2 State=UNKNOWN\n"
        for node, port in zip(nodes, ports, strict=True)
    )
    partition_lines = "".join(
        f"PartitionName={name} Nodes={','.join(members)} Default={'YES' if i == 0 else 'NO'} "
        "MaxTime=INFINITE State=UP\n"
        for i, (name, members) in enumerate(partitions.items())
    )
    return f"""\
ClusterName=gpubenchtest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld}
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.socket,cred_expire=10
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=1
SlurmdTimeout={SLURMD_TIMEOUT_SECONDS}
MpiDefault=none
SwitchType=switch/none
KillWait=30
MinJobAge=300
SchedulerParameters=sched_interval=2
{node_lines}{partition_lines}"""


def opted_in(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether real daemons may be started: under ``CI=true`` or ``GPUBENCH_TEST_SLURM=1``."""
    return environ.get("CI", "").lower() == "true" or environ.get(OPT_IN) == "1"


def start(root: Path, partitions: Mapping[str, tuple[str, ...]] = SINGLE) -> Cluster:
    """Start munged, slurmctld and a slurmd per node under ``root``; wait until every node is
    idle. ``partitions``: partition name -> its nodes (the first is the default partition)."""
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
    conf.write_text(_conf(root, host, partitions), encoding="utf-8")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    cluster = Cluster(root, conf, env, dict(partitions), tools)
    _guard(cluster)
    key = root / "munge" / "munge.key"
    munged = [
        tools["munged"],
        "--force",
        f"--socket={root}/munge/munge.socket",
        f"--key-file={key}",
        f"--pid-file={root}/munge/munged.pid",
        f"--log-file={root}/log/munged.log",
        f"--seed-file={root}/munge/seed",
    ]
    try:
        cluster._daemon([tools["mungekey"], "--create", f"--keyfile={key}"], None)
        cluster._daemon(munged, root / "munge" / "munged.pid")
        cluster._daemon([tools["slurmctld"], "-f", str(conf), "-i"], root / "slurmctld.pid")
        for node in cluster.nodes:
            (root / "spool" / node).mkdir(exist_ok=True)
            cluster.start_slurmd(node)
        _wait_for(lambda: _idle(cluster), f"nodes {','.join(cluster.nodes)} to be idle", cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@contextlib.contextmanager
def running(root: Path, partitions: Mapping[str, tuple[str, ...]] = SINGLE) -> Iterator[Cluster]:
    """A module fixture's body: the started cluster (see :func:`start`) with SLURM_CONF set for
    this process's clients, stopped at the end whatever happened. Where it cannot start, the
    test skips with the reason, except under ``CI=true``, where the real Slurm is required."""
    import pytest

    try:
        cluster = start(root, partitions)
    except Unavailable as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but a real Slurm could not be started: {exc}")
        pytest.skip(f"no real Slurm here: {exc}")
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield cluster
    finally:
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous
        cluster.stop()


def _idle(cluster: Cluster) -> bool:
    done = cluster.run("sinfo", "-h", "-N", "-o", "%N %T", check=False)
    states = dict(line.split() for line in done.stdout.splitlines() if line.strip())
    return done.returncode == 0 and all(states.get(n) == "idle" for n in cluster.nodes)


def _wait_for(ready, what: str, cluster: Cluster) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not ready():
        if time.monotonic() > deadline:
            raise Unavailable(f"gave up waiting for {what}\n{cluster.logs()}")
        time.sleep(0.2)

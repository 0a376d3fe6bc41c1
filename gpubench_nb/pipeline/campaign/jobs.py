"""A campaign target as a submitit job (Slurm, or ``local`` / ``debug`` here): its executor, the
job (``run_experiment`` into its own bundle, frozen lock, R1.3, whole GPUs), its result."""

from __future__ import annotations

import os
import shlex
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import submitit
from submitit.core.utils import JobPaths, pickle_load

from gpubench_nb.engine.allocation import GPUS_REQUESTED_ENV
from gpubench_nb.errors import GpubenchError
from gpubench_nb.pipeline.campaign.file import Target
from gpubench_nb.pipeline.campaign.slurm import JobState, job_state
from gpubench_nb.pipeline.campaign.state import bundle_progress

LOCAL_EXECUTORS = ("local", "debug")
SIGNAL_DELAY_SECONDS = 120  # Slurm warns the job this long before its time limit (requeue)
MAX_REQUEUES = 3


@dataclass
class TargetJob(submitit.helpers.Checkpointable):
    """What runs on the node: the pipeline into the target's bundle, with the frozen lock.
    Checkpointable: warned before its time limit (USR2), it is requeued and resumes (R3.6)."""

    experiment: str
    lock: str
    bundle_dir: str
    pricing: dict[str, Any]
    run_timeout_seconds: int
    gpus: int | None = None  # also the value read from a job pickled before the field existed

    def __call__(self) -> dict[str, Any]:
        from gpubench_nb.pipeline.interrupt import Interrupted, stop_on_signals, terminate_children
        from gpubench_nb.pipeline.orchestrate import run_experiment

        progress = _ProgressLog(Path(self.bundle_dir))
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)")  # from --gres, or `gpus`
        print(f"bundle {self.bundle_dir} with lock {self.lock}", flush=True)
        print(f"CUDA_VISIBLE_DEVICES={visible!r} on {os.uname().nodename}", flush=True)
        if self.gpus is not None:  # kernels record the request beside the allocation (R2.4)
            os.environ[GPUS_REQUESTED_ENV] = str(self.gpus)
        try:
            with stop_on_signals():
                result = run_experiment(
                    self.experiment,
                    protocol=self.lock,
                    bundle_dir=self.bundle_dir,
                    pricing=self.pricing,
                    run_timeout_seconds=self.run_timeout_seconds,
                    on_progress=progress,
                )
        except Interrupted as stop:
            terminate_children()
            print(
                f"gpubench: interrupted by {stop.signal_name}; the run in progress is discarded "
                "(not an observation, R3.6), recorded in the bundle's logs/interruptions.jsonl, "
                "and redone when the campaign resumes",
                file=sys.stderr,
                flush=True,
            )
            if stop.then is not None:  # USR2: submitit checkpoints and requeues, then exits
                stop.then()
            raise SystemExit(128 + int(getattr(signal, stop.signal_name))) from None
        failed = sum(1 for row in result.rows if row["elapsed_seconds"] is None)
        print(f"done: {len(result.rows)} rows, {failed} failed observations", flush=True)
        return {"bundle_dir": str(result.bundle_dir), "rows": len(result.rows), "failed": failed}


@dataclass
class _ProgressLog:
    """The job log's run count over the whole schedule, a resumed job included (``run 5/6``)."""

    bundle_dir: Path
    base: tuple[int, int] | None = None  # runs done before this job, schedule size
    started: set[str] = field(default_factory=set)

    def __call__(self, run: Any, number: int, total: int) -> None:
        if self.base is None:  # schedule.json is written before the first run starts
            progress = bundle_progress(self.bundle_dir)
            self.base = (progress.runs_done, progress.runs_total or progress.runs_done + total)
        done, size = self.base
        if run.key in self.started:
            print(f"finished run {done + number - 1}/{size}: {run.key}", flush=True)
        else:
            self.started.add(run.key)
            print(f"run {done + number}/{size}: {run.key}", flush=True)


def executor_for(target: Target, folder: Path, local_executor: str = "local") -> Any:
    """The submitit executor of one target, its parameters set (whole GPUs, time, setup)."""
    if target.reach == "slurm":  # submitit's own Slurm executor: its None means "no option"
        executor = submitit.SlurmExecutor(
            folder=folder, max_num_timeout=MAX_REQUEUES, python=target.python
        )
        executor.update_parameters(**slurm_parameters(target))
        return executor
    if local_executor not in LOCAL_EXECUTORS:
        raise GpubenchError(f"local executor {local_executor!r} is not one of {LOCAL_EXECUTORS}")
    executor = submitit.AutoExecutor(folder=folder, cluster=local_executor)
    if local_executor == "local":
        # the shell's stderr into the job's .err log (PID = job id): a failed setup line shows there
        head, _, tail = str(job_paths(folder, "@").stderr).partition("@")
        into_log = f"exec 2>>{shlex.quote(head)}$${shlex.quote(tail)}"
        executor.update_parameters(
            name=f"gpubench-{target.id}",
            timeout_min=target.time_limit_minutes,
            gpus_per_node=target.gpus,  # CUDA_VISIBLE_DEVICES=0..gpus-1 ("" for 0: CPU only)
            local_setup=[into_log, *checked_setup(target.setup)] if target.setup else [],
        )
    return executor


def checked_setup(lines: tuple[str, ...] | list[str]) -> list[str]:
    """Each setup line stops the job when it fails, naming the line and its exit code in the
    .err log; it stays on a line of its own inside ``{ ... }`` (a ``# comment`` is harmless)."""
    checked = []
    for number, line in enumerate(lines, start=1):
        say = shlex.quote(f"gpubench: setup line {number} failed with exit code")
        checked.append(
            f'{{ {line}\n}} || {{ rc=$?; echo {say} "$rc:" {shlex.quote(line)} >&2; exit "$rc"; }}'
        )
    return checked


def slurm_parameters(target: Target) -> dict[str, Any]:
    """sbatch options of a Slurm target (SlurmExecutor names); submitit's default
    ``--wckey=submitit`` is dropped, as a cluster enforcing workload keys would refuse it."""
    params: dict[str, Any] = {
        "job_name": f"gpubench-{target.id}",
        "time": target.time_limit_minutes,
        "nodes": 1,
        "ntasks_per_node": 1,
        "partition": target.partition,
        "signal_delay_s": SIGNAL_DELAY_SECONDS,
        "setup": checked_setup(target.setup),
        "wckey": None,
    }
    optional = {"gres": target.gres, "account": target.account, "exclusive": target.exclusive}
    params.update((name, value) for name, value in optional.items() if value)
    if target.sbatch:
        params["additional_parameters"] = {
            str(k).replace("_", "-"): v for k, v in target.sbatch.items()
        }
    return params


@dataclass(frozen=True)
class Outcome:
    """What a finished job left: success with its result, or the error and its trace."""

    ok: bool
    result: Any = None
    error: str | None = None
    trace: str | None = None


def job_paths(folder: Path, job_id: str) -> JobPaths:
    """Where submitit keeps a job's logs, sbatch file and result pickle."""
    return JobPaths(folder, job_id=job_id, task_id=0)


def read_outcome(folder: Path, job_id: str) -> Outcome | None:
    """The job's result pickle, if it wrote one (None: still running, or it died without one)."""
    path = job_paths(folder, job_id).result_pickle
    if not path.exists():
        return None
    try:
        status, value = pickle_load(path)
    except Exception as exc:  # a torn or foreign pickle: say so, never crash the campaign
        return Outcome(ok=False, error=f"unreadable result file {path}: {exc}")
    if status == "success":
        return Outcome(ok=True, result=value)
    return Outcome(ok=False, error=error_of_trace(str(value)), trace=str(value))


def error_of_trace(trace: str) -> str:
    """The exception's own lines at the end of a Python traceback (its message may span lines)."""
    lines = trace.rstrip().splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith('  File "')]
    start = frames[-1] + 1 if frames else 0
    while start < len(lines) and (lines[start].startswith("    ") or not lines[start].strip()):
        start += 1
    return "\n".join(lines[start:]).strip() or trace.strip()


def process_alive(pid: int) -> bool:
    """Whether a local job's controller still runs (a `campaign run` that was killed left it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        pass
    return True


def job_now(folder: Path, entry: dict[str, Any]) -> tuple[Outcome | None, JobState | None, bool]:
    """The recorded job now: its result, else Slurm's state, and whether it may still run
    (Slurm's UNKNOWN included: never submit a job twice)."""
    outcome = read_outcome(folder, entry["job_id"])
    if outcome is not None:
        return outcome, None, False
    if entry.get("executor") == "slurm":
        slurm = job_state(entry["job_id"])  # sacct, else scontrol / squeue (no accounting)
        return None, slurm, slurm.live
    return None, None, entry.get("executor") == "local" and process_alive(int(entry["job_id"]))

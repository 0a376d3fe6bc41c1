"""What Slurm gave this process, from the ``SLURM_*`` variables it inherits (R2.4); beside
it ``gpus_requested`` (from a campaign job), so "no GPU was requested" is written down (R2.5)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

# Exported by a campaign's job (pipeline/campaign/jobs.py) to its kernels: the target's `gpus`.
GPUS_REQUESTED_ENV = "GPUBENCH_GPUS_REQUESTED"
_INT = re.compile(r"^\d+")


def _first_int(text: str | None) -> int | None:
    match = _INT.match(text or "")
    return int(match.group()) if match else None


def slurm_job_id(environ: Mapping[str, str] | None = None) -> str | None:
    """The Slurm job this process runs in (SLURM_JOB_ID, else the older SLURM_JOBID), or None."""
    env = os.environ if environ is None else environ
    return env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or None


def slurm_allocation(environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The Slurm job this process runs in, or None outside Slurm."""
    env = os.environ if environ is None else environ
    job_id = slurm_job_id(env)
    if not job_id:
        return None
    requested = _first_int(env.get(GPUS_REQUESTED_ENV))
    # GPUs bound on this node: SLURM_GPUS_ON_NODE, else SLURM_JOB_GPUS's indices; none is 0 (R4.3)
    allocated = _first_int(env.get("SLURM_GPUS_ON_NODE"))
    if allocated is None:
        allocated = len([i for i in (env.get("SLURM_JOB_GPUS") or "").split(",") if i.strip()])
    return {
        "job_id": job_id,
        "array_task_id": env.get("SLURM_ARRAY_TASK_ID"),
        "restart_count": _first_int(env.get("SLURM_RESTART_COUNT")) or 0,  # requeued: >0
        "cluster": env.get("SLURM_CLUSTER_NAME"),
        "partition": env.get("SLURM_JOB_PARTITION"),
        "node_list": env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST"),
        "node": env.get("SLURMD_NODENAME"),
        "cpus_allocated": _first_int(env.get("SLURM_CPUS_ON_NODE")),
        "cpus_per_node": env.get("SLURM_JOB_CPUS_PER_NODE"),
        "gpus_allocated": allocated,
        "gpu_indices": env.get("SLURM_JOB_GPUS"),
        "gpus_requested": requested,
    }


def allocation_note(slurm: Mapping[str, Any] | None) -> str | None:
    """The R2.5 part of `notes` for a Slurm job: job, partition, nodes, CPUs, GPUs."""
    if not slurm:
        return None
    requested = slurm.get("gpus_requested")
    request = {0: " (no GPU requested)", None: ""}.get(requested, f" ({requested} requested)")
    return (
        f"slurm job={slurm.get('job_id')} partition={slurm.get('partition')} "
        f"nodes={slurm.get('node_list')} cpus={slurm.get('cpus_allocated')} "
        f"gpus={slurm.get('gpus_allocated')}{request}"
    )

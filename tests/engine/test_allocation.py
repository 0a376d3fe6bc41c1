"""The Slurm allocation a bundle records (R2.4, R2.5), from SLURM_* variables (issue 26 §5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench_nb.engine.allocation import (
    GPUS_REQUESTED_ENV,
    allocation_note,
    slurm_allocation,
)
from gpubench_nb.engine.environment import capture_environment, environment_notes
from gpubench_nb.errors import BundleError
from gpubench_nb.protocol.records import read_environment, write_environment

# What Slurm 22.05 exported to the batch step of a CPU-only job on the test cluster.
CPU_JOB = {
    "SLURM_JOB_ID": "7",
    "SLURM_JOB_PARTITION": "debug",
    "SLURM_JOB_NODELIST": "gpubench-node",
    "SLURMD_NODENAME": "gpubench-node",
    "SLURM_CPUS_ON_NODE": "1",
    "SLURM_JOB_CPUS_PER_NODE": "1",
    "SLURM_CLUSTER_NAME": "gpubenchtest",
    GPUS_REQUESTED_ENV: "0",
}


def test_a_cpu_only_job_records_its_job_partition_nodes_and_no_gpu() -> None:
    slurm = slurm_allocation(CPU_JOB)
    assert slurm is not None
    assert (slurm["job_id"], slurm["partition"], slurm["node_list"]) == (
        "7",
        "debug",
        "gpubench-node",
    )
    assert (slurm["cpus_allocated"], slurm["gpus_allocated"], slurm["gpus_requested"]) == (1, 0, 0)
    assert slurm["restart_count"] == 0
    note = allocation_note(slurm)
    assert note == (
        "slurm job=7 partition=debug nodes=gpubench-node cpus=1 gpus=0 (no GPU requested)"
    )


def test_gpus_allocated_come_from_gpus_on_node_or_the_job_gpu_indices() -> None:
    two = {"SLURM_JOB_ID": "9", "SLURM_JOB_GPUS": "2,3", "SLURM_JOB_CPUS_PER_NODE": "16(x2)"}
    slurm = slurm_allocation(two)
    assert slurm is not None
    assert (slurm["gpus_allocated"], slurm["gpu_indices"]) == (2, "2,3")
    assert slurm["cpus_per_node"] == "16(x2)" and slurm["gpus_requested"] is None
    assert slurm_allocation({**two, "SLURM_GPUS_ON_NODE": "4"})["gpus_allocated"] == 4
    assert slurm_allocation({"SLURM_RESTART_COUNT": "1"}) is None  # not in a job: nothing
    assert allocation_note(None) is None


def test_environment_json_and_notes_name_the_slurm_job(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_GPUS_ON_NODE", "SLURM_JOB_GPUS"):
        monkeypatch.delenv(key, raising=False)
    assert capture_environment("cpu")["slurm"] is None  # outside Slurm: said, not guessed
    for key, value in CPU_JOB.items():
        monkeypatch.setenv(key, value)
    env = capture_environment("cpu")
    assert env["slurm"]["job_id"] == "7" and env["slurm"]["gpus_requested"] == 0
    assert "slurm job=7 partition=debug" in environment_notes(env)


def test_the_environment_record_types_the_slurm_allocation(tmp_path: Path) -> None:
    env = {"hostname": "n1", "slurm": slurm_allocation(CPU_JOB)}
    record = write_environment(tmp_path, env)
    assert read_environment(tmp_path).slurm == record.slurm
    assert record.slurm is not None
    assert (record.slurm.job_id, record.slurm.partition, record.slurm.gpus_requested) == (
        "7",
        "debug",
        0,
    )
    with pytest.raises(BundleError) as caught:  # R2.4: a record no stage can trust is refused
        write_environment(tmp_path, {"slurm": {**env["slurm"], "cpus_allocated": "two"}})
    assert "'slurm.cpus_allocated': expected an integer, got 'two'" in str(caught.value)
    assert read_environment(tmp_path).slurm == record.slurm  # the bad one was never written
    assert write_environment(tmp_path, {"hostname": "n1", "slurm": None}).slurm is None

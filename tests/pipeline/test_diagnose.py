"""An asynchronous CUDA error is located by a diagnosis rerun outside the schedule, with
CUDA_LAUNCH_BLOCKING=1, recorded as such and never as a row (issue 23 §5, R3.6)."""

from __future__ import annotations

import json

import pytest

from gpubench_nb.engine import faults
from gpubench_nb.pipeline.diagnose import diagnose_run, needs_diagnosis
from gpubench_nb.pipeline.run import execute_run
from gpubench_nb.protocol.bundle import DIAGNOSIS_NAME, run_dir
from tests.support.experiments import frozen


@pytest.fixture(autouse=True)
def _async_fault(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CUDA_LAUNCH_BLOCKING", raising=False)
    monkeypatch.setenv("GPUBENCH_FAULT", "cudaerror@batch:2@variant:b4")
    monkeypatch.setattr(faults, "_PENDING", [])  # no CUDA error launched by an earlier test


def test_a_cuda_error_is_located_by_a_blocking_rerun_outside_the_schedule(workspace, tmp_path):
    """The run says where the error surfaced and which batches were launched (1-10 of b4's
    10 batches); the diagnosis, a fresh process with CUDA_LAUNCH_BLOCKING=1, finds batch 2,
    writes diagnosis.json (kind, environment) and leaves run.json as it was."""
    bundle = frozen(workspace / "experiment.yaml", tmp_path)
    record = execute_run(workspace / "experiment.yaml", "b4", "cold", 1, bundle)
    assert record.status == "failed" and "CUDA error" in record.error
    assert "during the synchronisation after batch 10 of 10" in record.notes
    assert "launched in batches 1-10" in record.notes
    assert needs_diagnosis(record.error)
    folder = run_dir(bundle, "b4", "cold", 1)
    before = (folder / "run.json").read_bytes()

    diagnosis = diagnose_run(workspace / "experiment.yaml", "b4", "cold", 1, bundle)
    assert diagnosis["reproduced"] is True
    assert "during batch 2 of 10 (a CUDA error; CUDA_LAUNCH_BLOCKING=1" in diagnosis["located"]
    assert diagnosis["environment"] == {"CUDA_LAUNCH_BLOCKING": "1"}
    assert diagnosis["kind"].startswith("diagnosis rerun: outside the schedule, untimed")
    assert json.loads((folder / DIAGNOSIS_NAME).read_text()) == diagnosis
    assert (folder / "run.json").read_bytes() == before  # the observation is untouched
    assert not (folder / "predictions.jsonl").exists()


def test_other_failures_need_no_diagnosis() -> None:
    assert not needs_diagnosis("ValueError: bad shape")
    assert not needs_diagnosis(None)
    assert needs_diagnosis("AcceleratorError: CUDA error: device-side assert triggered")

"""A kernel that dies or never answers, at any moment of its run, is an event: the run keeps a
failed row with the reason (R3.6), and a notebook step that times out or dies is a sentence
with what to do, never a traceback.

Kernels are stood in for by a fake ``execute_notebook`` that fails as papermill does: the
client's "Kernel didn't respond" before anything ran, nbclient's CellTimeoutError, a kernel
dead after writing its run.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from gpubench_nb.cli import main
from gpubench_nb.errors import BundleError
from gpubench_nb.pipeline import orchestrate
from gpubench_nb.protocol.results import read_rows
from tests.support.experiments import stop_experiment

FINISHED = {
    "status": "finished",
    "elapsed_seconds": 0.25,
    "load_seconds": 0.5,
    "precision": "fp32",
    "batch": 4,
    "context": 32,
}


def _kernels(monkeypatch: pytest.MonkeyPatch, fail: dict[str, tuple[dict | None, Exception]]):
    """10_measure writes FINISHED; a step or run named in ``fail`` writes its run.json (or
    none) and then raises the exception."""

    def fake(name: str, output: Path, parameters: dict[str, Any], timeout: int) -> None:
        bundle = Path(parameters["bundle_dir"])
        step = name.removesuffix(".ipynb")
        if step in fail:
            raise fail[step][1]
        if step == "00_environment":
            (bundle / "environment.json").write_text("{}", encoding="utf-8")
        if step != "10_measure":
            return
        key = f"{parameters['variant_id']}/{parameters['phase']}-{parameters['run_index']}"
        folder = bundle / "runs" / parameters["variant_id"]
        folder = folder / f"{parameters['phase']}-{parameters['run_index']}"
        record, error = fail.get(key, (FINISHED, None))
        if record is not None:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "run.json").write_text(json.dumps(record), encoding="utf-8")
        if error is not None:
            raise error

    monkeypatch.setattr(orchestrate, "execute_notebook", fake)
    monkeypatch.setattr(orchestrate, "_render_report", lambda bundle: None)


RUNNING = {"status": "running", "error": "the process ended before the run finished"}


@pytest.mark.parametrize(
    ("record", "error", "reason"),
    [
        (None, RuntimeError("Kernel didn't respond in 60 seconds"), "Kernel didn't respond"),
        (RUNNING, DeadKernelError("Kernel died"), "DeadKernelError: Kernel died"),
        (FINISHED, DeadKernelError("Kernel died"), "DeadKernelError: Kernel died"),
        (None, CellTimeoutError("Cell execution timed out"), "within --run-timeout 30 s"),
    ],
    ids=["before-run-json", "during", "after-run-json", "timeout"],
)
def test_a_kernel_that_dies_at_any_moment_leaves_a_failed_row_r3_6(
    tmp_path: Path,
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    record: dict | None,
    error: Exception,
    reason: str,
) -> None:
    experiment = stop_experiment(tmp_path, data_dir)
    _kernels(monkeypatch, {"b4/warm-1": (record, error)})
    result = orchestrate.run_experiment(
        experiment, output_dir=tmp_path / "out", run_timeout_seconds=30
    )
    warm = [r for r in result.rows if r["phase"] == "warm"]
    assert len(warm) == 1 and warm[0]["elapsed_seconds"] is None  # never a time, never 0
    assert reason in warm[0]["notes"]
    schedule = json.loads((result.bundle_dir / "schedule.json").read_text(encoding="utf-8"))
    assert [r["status"] for r in schedule["runs"]] == ["done", "done"]


@pytest.mark.parametrize("step", ["00_environment", "20_quality", "30_economics"])
def test_a_notebook_step_timeout_is_a_sentence_with_the_fix(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys, step: str
) -> None:
    experiment = stop_experiment(tmp_path, data_dir)
    _kernels(monkeypatch, {step: (None, CellTimeoutError("Cell execution timed out"))})
    argv = ["run", str(experiment), "--output-dir", str(tmp_path / "out"), "--run-timeout", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{step}: the kernel did not finish within --run-timeout 1 s" in err
    assert "with a larger --run-timeout" in err and "Traceback" not in err
    assert not (tmp_path / "out" / "stop" / "MANIFEST.sha256").exists()  # nothing sealed


def test_a_step_kernel_that_dies_is_a_bundle_error(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    experiment = stop_experiment(tmp_path, data_dir)
    _kernels(monkeypatch, {"20_quality": (None, DeadKernelError("Kernel died"))})
    with pytest.raises(BundleError, match="20_quality: kernel run failed: DeadKernelError"):
        orchestrate.run_experiment(experiment, output_dir=tmp_path / "out")
    rows = read_rows(tmp_path / "out" / "stop" / "resultats-bruts.csv")
    assert [r["phase"] for r in rows] == ["load", "cold", "warm"]  # the runs are kept

"""End to end through real papermill kernels: schedule, failures, resume, refusal, audit.

One small experiment (60 eval texts, the real `bow` model trained on a train subset, 2 variants
× 2 repeats) is run once per module and shared; each test asserts through the files written.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from gpubench_nb.errors import ProtocolError
from gpubench_nb.pipeline.orchestrate import run_experiment
from gpubench_nb.protocol.audit import check_bundle
from gpubench_nb.protocol.results import read_rows, validate_csv
from tests.support.experiments import EVAL_ITEMS, make_experiment
from tests.support.in_process import steps_in_process

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> tuple[Path, Path]:
    """One full run, with an injected OOM, a dead kernel and an asynchronous CUDA error in
    variant b4 (R3.6, R5.8, issue 23 §5)."""
    root = tmp_path_factory.mktemp("e2e")
    experiment = make_experiment(root, data_dir, "e2e")
    # An OOM in b4's first warm pass, a kernel that dies in b4's second cold run, and a CUDA
    # error launched at batch 2 of b4's first cold run (it surfaces at the synchronisation).
    os.environ["GPUBENCH_FAULT"] = (
        "oom@batch:3@variant:b4@phase:warm@run:1;crash@batch:2@variant:b4@phase:cold@run:2;"
        "cudaerror@batch:2@variant:b4@phase:cold@run:1"
    )
    try:
        result = run_experiment(experiment, output_dir=root / "outputs")
    finally:
        del os.environ["GPUBENCH_FAULT"]
    return experiment, result.bundle_dir


def test_bundle_holds_every_artifact(finished: tuple[Path, Path]) -> None:
    _, bundle = finished
    # R5.6: the filled-in protocol, outputs, checks, raw CSV and report are all kept.
    for name in (
        "protocol.lock.json",
        "expected_ids.txt",
        "environment.json",
        "schedule.json",
        "resultats-bruts.csv",
        "economics.json",
        "report.html",
        "MANIFEST.sha256",
        "notebooks/00_environment.ipynb",
        "notebooks/20_quality.ipynb",
        "notebooks/30_economics.ipynb",
        "runs/b1/cold-1/predictions.jsonl",
        "runs/b1/cold-1/checks.json",
        "runs/b4/warm-2/run.json",
    ):
        assert (bundle / name).is_file(), name
    assert len((bundle / "expected_ids.txt").read_text().splitlines()) == EVAL_ITEMS


def test_rows_one_per_run_and_the_csv_validates(finished: tuple[Path, Path]) -> None:
    _, bundle = finished
    rows = read_rows(bundle / "resultats-bruts.csv")
    phases = sorted((r["variant_id"], r["phase"], r["run_index"]) for r in rows)
    expected = sorted(
        (v, p, n) for v in ("b1", "b4") for p in ("load", "cold", "warm") for n in (1, 2)
    )
    assert phases == expected  # R3.2: load, cold, warm kept apart; one row per run (R4.1)
    assert validate_csv(bundle / "resultats-bruts.csv") == []
    for row in rows:
        assert row["package_total_usd_minor"] is not None  # one spend, on every row (R5.3)
        assert row["gpu_model"] is None  # CPU run: not recorded, never a made-up value (R4.3)
        assert row["peak_allocated_bytes"] is None


def test_cold_runs_ran_in_distinct_fresh_processes_r3_7(finished: tuple[Path, Path]) -> None:
    _, bundle = finished
    schedule = json.loads((bundle / "schedule.json").read_text())
    pids = [run["pid"] for run in schedule["runs"]]
    assert all(isinstance(pid, int) for pid in pids)
    assert len(set(pids)) == len(pids) and os.getpid() not in pids
    order = [(r["variant_id"], r["phase"]) for r in schedule["runs"]][:4]
    assert order == [("b1", "cold"), ("b4", "cold"), ("b1", "warm"), ("b4", "warm")]


def test_injected_oom_is_a_failed_row_not_a_zero_r5_8(finished: tuple[Path, Path]) -> None:
    _, bundle = finished
    rows = read_rows(bundle / "resultats-bruts.csv")
    failed = [
        r for r in rows if r["variant_id"] == "b4" and r["phase"] == "warm" and r["run_index"] == 1
    ][0]
    assert failed["elapsed_seconds"] is None
    assert "OutOfMemoryError" in failed["notes"] and "FAILED" in failed["notes"]
    assert failed["corpus_accepted"] is False
    died = [
        r for r in rows if r["variant_id"] == "b4" and r["phase"] == "cold" and r["run_index"] == 2
    ][0]
    assert died["elapsed_seconds"] is None and "DeadKernelError" in died["notes"]
    assert died["corpus_accepted"] is False  # detected, not waited on; the schedule went on
    device = [
        r for r in rows if r["variant_id"] == "b4" and r["phase"] == "cold" and r["run_index"] == 1
    ][0]
    assert device["elapsed_seconds"] is None and "CUDA error" in device["notes"]
    others = [r for r in rows if r["phase"] in ("cold", "warm") and r not in (failed, died, device)]
    assert all(r["elapsed_seconds"] > 0 for r in others)
    # b1 is accepted on every run; b4 is not, since one of its runs failed (R5.7).
    assert all(r["corpus_accepted"] for r in others if r["variant_id"] == "b1")
    b1 = {r["accepted_unique_corpora"] for r in rows if r["variant_id"] == "b1"}
    b4 = {r["accepted_unique_corpora"] for r in rows if r["variant_id"] == "b4"}
    assert (b1, b4) == ({1}, {0})


def test_a_cuda_error_is_located_truthfully_then_diagnosed_outside_the_schedule(
    finished: tuple[Path, Path],
) -> None:
    """The row says where the error surfaced and which batches were launched; after the
    schedule, a CUDA_LAUNCH_BLOCKING=1 rerun located it at batch 2 in diagnosis.json, sealed
    in the manifest and never a row (issue 23 §5)."""
    _, bundle = finished
    rows = read_rows(bundle / "resultats-bruts.csv")
    row = [
        r for r in rows if r["variant_id"] == "b4" and r["phase"] == "cold" and r["run_index"] == 1
    ][0]
    assert "during the synchronisation after batch" in row["notes"]
    assert "launched in batches 1-" in row["notes"]
    diagnosis = json.loads((bundle / "runs" / "b4" / "cold-1" / "diagnosis.json").read_text())
    assert diagnosis["reproduced"] is True
    assert diagnosis["environment"] == {"CUDA_LAUNCH_BLOCKING": "1"}
    assert "batch 2 of" in diagnosis["located"] and "CUDA_LAUNCH_BLOCKING=1" in diagnosis["located"]
    assert "runs/b4/cold-1/diagnosis.json" in (bundle / "MANIFEST.sha256").read_text()
    assert not (bundle / "runs" / "b4" / "warm-1" / "diagnosis.json").exists()  # an OOM: none


def test_check_bundle_passes_then_detects_a_tampered_prediction(
    finished: tuple[Path, Path], tmp_path: Path
) -> None:
    _, bundle = finished
    assert check_bundle(bundle) == []
    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    predictions = copy / "runs" / "b1" / "warm-1" / "predictions.jsonl"
    lines = predictions.read_text().splitlines()
    first = json.loads(lines[0])
    first["label"] = "web" if first["label"] != "web" else "admin"
    predictions.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    problems = check_bundle(copy)
    assert any("runs/b1/warm-1/predictions.jsonl: changed" in p for p in problems)
    # Rewriting the manifest too does not hide it: the checks are re-derived (R1.6).
    from gpubench_nb.protocol.bundle import write_manifest

    write_manifest(copy)
    problems = check_bundle(copy)
    assert any("b1/warm-1" in p and "re-derived" in p for p in problems), problems


def test_kernels_the_pipeline_starts_print_no_tcp_warning(finished: tuple[Path, Path]) -> None:
    # Issue 16 §3: every kernel (00, 10 x runs, 20, 30, the report's) wrote its stderr here.
    _, bundle = finished
    log = (bundle / "logs" / "kernels.stderr.log").read_text(encoding="utf-8")
    assert "Kernel is running over TCP without encryption" not in log


def test_cli_check_bundle_exit_codes(finished: tuple[Path, Path]) -> None:
    _, bundle = finished
    ok = subprocess.run(
        [sys.executable, "-m", "gpubench_nb.cli", "check-bundle", str(bundle)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr


def test_a_changed_protocol_is_refused_before_any_run_r1_3(finished: tuple[Path, Path]) -> None:
    experiment, bundle = finished
    declaration = yaml.safe_load(experiment.read_text())
    declaration["quality"]["threshold"] = 0.3
    edited = experiment.with_name("edited.yaml")
    edited.write_text(yaml.safe_dump(declaration), encoding="utf-8")
    before = (bundle / "resultats-bruts.csv").read_bytes()
    with pytest.raises(ProtocolError, match=r"quality\.threshold: 0\.2 -> 0\.3"):
        run_experiment(edited, output_dir=bundle.parent)
    assert (bundle / "resultats-bruts.csv").read_bytes() == before


def _copy(finished: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """The shared bundle copied under ``tmp_path``, for a test that runs over it."""
    experiment, bundle = finished
    copy = tmp_path / "outputs" / bundle.name
    shutil.copytree(bundle, copy)
    return experiment, copy


def test_rerun_of_a_finished_bundle_redoes_no_run(
    finished: tuple[Path, Path], tmp_path: Path
) -> None:
    experiment, bundle = _copy(finished, tmp_path)
    before = read_rows(bundle / "resultats-bruts.csv")
    with steps_in_process():  # what runs again, not the kernel it runs in, is tested here
        result = run_experiment(experiment, output_dir=bundle.parent)
    after = read_rows(bundle / "resultats-bruts.csv")
    assert [r["elapsed_seconds"] for r in after] == [r["elapsed_seconds"] for r in before]
    assert len(result.rows) == len(before)


def test_repricing_a_finished_bundle_redoes_no_run_and_reseals_it(
    finished: tuple[Path, Path], tmp_path: Path
) -> None:
    from gpubench_nb.economics.offers import load_offers

    experiment, bundle = _copy(finished, tmp_path)
    declaration = yaml.safe_load(experiment.read_text())
    declaration["pricing"]["days"] = 30  # pricing is not frozen (R1.3): a new package length
    repriced = experiment.with_name("repriced.yaml")
    repriced.write_text(yaml.safe_dump(declaration), encoding="utf-8")
    before = read_rows(bundle / "resultats-bruts.csv")
    with steps_in_process():  # the economics step's call, made in this process
        run_experiment(repriced, output_dir=bundle.parent)
    after = read_rows(bundle / "resultats-bruts.csv")
    price = load_offers(Path(declaration["pricing"]["offers"]))["h100-example"]
    assert [r["elapsed_seconds"] for r in after] == [r["elapsed_seconds"] for r in before]
    # R5.1, R5.3: the whole 30-day package x 1 lot, the same one spend on every row.
    assert {(r["duration_days"], r["package_total_usd_minor"]) for r in after} == {
        (30, price.price_usd_minor(30))
    }
    economics = json.loads((bundle / "economics.json").read_text(encoding="utf-8"))
    assert economics["pricing"]["days"] == 30
    assert check_bundle(bundle) == []  # R5.6: resealed, every check re-derived


def test_kill_mid_warm_phase_then_resume(tmp_path: Path, data_dir: Path) -> None:
    # one repeat: 2 variants x (load, cold, warm) = 6 rows, enough to be killed mid-warm-phase
    experiment = make_experiment(tmp_path, data_dir, "resume", repeats=1)
    outputs = tmp_path / "outputs"
    csv_path = outputs / "resume" / "resultats-bruts.csv"
    command = [
        sys.executable,
        "-m",
        "gpubench_nb.cli",
        "run",
        str(experiment),
        "--output-dir",
        str(outputs),
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            if csv_path.exists() and ",warm," in csv_path.read_text():
                break  # the first warm row is in: the schedule is mid-warm-phase
            time.sleep(0.2)
        else:
            pytest.fail("no warm row appeared in time")
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # kill -9 the CLI and its kernel alike
        process.wait()
    partial = read_rows(csv_path)
    assert 0 < len(partial) < 6
    finished = subprocess.run(command, capture_output=True, text=True, check=False)
    assert finished.returncode == 0, finished.stderr[-2000:]
    rows = read_rows(csv_path)
    keys = [(r["variant_id"], r["phase"], r["run_index"]) for r in rows]
    assert len(keys) == len(set(keys)) == 6  # nothing lost, nothing twice
    now = {(r["variant_id"], r["phase"], r["run_index"]): r["elapsed_seconds"] for r in rows}
    for r in partial:  # finished runs were not redone
        assert now[(r["variant_id"], r["phase"], r["run_index"])] == r["elapsed_seconds"]
    assert "accepted" in finished.stdout and "report:" in finished.stdout


def _papermill(notebook: str, out: Path, *params: str) -> subprocess.CompletedProcess:
    papermill = Path(sys.executable).with_name("papermill")
    return subprocess.run(
        [str(papermill), f"notebooks/{notebook}", str(out), *params],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )


def test_every_notebook_runs_under_the_plain_papermill_cli(
    finished: tuple[Path, Path], tmp_path: Path
) -> None:
    experiment, bundle = finished
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    (copy / "MANIFEST.sha256").unlink()  # a step alone never writes into a finished bundle
    common = ["-p", "experiment", str(experiment), "-p", "bundle_dir", str(copy)]
    (copy / "environment.json").unlink()
    done = _papermill("00_environment.ipynb", tmp_path / "00.ipynb", *common)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((copy / "environment.json").read_text())["device"] == "cpu"
    done = _papermill(
        "10_measure.ipynb",
        tmp_path / "10.ipynb",
        *common,
        "-p",
        "variant_id",
        "b4",
        "-p",
        "phase",
        "warm",
        "-p",
        "run_index",
        "3",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((copy / "runs" / "b4" / "warm-3" / "run.json").read_text())
    assert record["error"] is None and record["elapsed_seconds"] > 0
    lines = (copy / "runs" / "b4" / "warm-3" / "predictions.jsonl").read_text().splitlines()
    assert len(lines) == EVAL_ITEMS
    for name in ("20_quality.ipynb", "30_economics.ipynb"):
        done = _papermill(name, tmp_path / name, *common)
        assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((copy / "economics.json").read_text())["offers"]
    done = _papermill("90_report.ipynb", tmp_path / "90.ipynb", "-p", "bundle_dirs", str(copy))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Elapsed time" in (tmp_path / "90.ipynb").read_text()


def test_a_kernel_under_plain_papermill_refuses_an_edited_declaration_r1_3(
    finished: tuple[Path, Path], tmp_path: Path
) -> None:
    # issue 11.1: the check lives in the kernel itself, whoever starts it.
    experiment, bundle = finished
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    (copy / "MANIFEST.sha256").unlink()
    edited = experiment.with_name("context8.yaml")
    edited.write_text(experiment.read_text().replace("context: 64", "context: 8"), "utf-8")
    done = _papermill(
        "10_measure.ipynb",
        tmp_path / "10.ipynb",
        *["-p", "experiment", str(edited), "-p", "bundle_dir", str(copy)],
        *["-p", "variant_id", "b1", "-p", "phase", "warm", "-p", "run_index", "3"],
    )
    assert done.returncode != 0
    assert "ProtocolError" in done.stderr and "fixed.context: 64 -> 8" in done.stderr
    assert not (copy / "runs" / "b1" / "warm-3").exists()


def test_refusal_inside_a_kernel_is_our_error_not_a_traceback() -> None:
    from papermill.exceptions import PapermillExecutionError

    from gpubench_nb.pipeline.orchestrate import refusal_from_kernel

    exc = PapermillExecutionError(3, 1, "", "ProtocolError", "R1.3: 10_measure refused: x", [])
    refused = refusal_from_kernel(exc)
    assert isinstance(refused, ProtocolError) and str(refused) == "R1.3: 10_measure refused: x"
    other = PapermillExecutionError(3, 1, "", "RuntimeError", "boom", [])
    assert refusal_from_kernel(other) is None  # an observation (R3.6), kept as a row

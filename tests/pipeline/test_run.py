"""execute_run: one scheduled run in this process -> run.json + predictions (R3.2, R3.4, R3.6,
R5.8); declaration errors raise, observed failures are written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench_nb.engine import phases
from gpubench_nb.engine.faults import CRASH_EXIT_CODE, FaultSpecError
from gpubench_nb.engine.memory import MEMORY_FIELDS
from gpubench_nb.errors import ProtocolError
from gpubench_nb.pipeline.run import execute_run, run_dir
from gpubench_nb.protocol.records import DIED
from tests.support.experiments import CLASSES, frozen, write_yaml

CONTRACT_KEYS = {  # ARCHITECTURE.md, run.json
    "variant_id",
    "phase",
    "run_index",
    "pid",
    "elapsed_seconds",
    "load_seconds",
    "memory",
    "truncated_texts",
    "dropped_tokens",
    "error",
    "notes",
}
ROW_KEYS = {
    "gpu_model",
    "gpu_count",
    "device",
    "driver_version",
    "python_version",
    "torch_version",
    "runtime_version",
}


def read_run(bundle: Path, variant: str, phase: str, n: int) -> tuple[dict, Path]:
    folder = run_dir(bundle, variant, phase, n)
    return json.loads((folder / "run.json").read_text(encoding="utf-8")), folder


@pytest.fixture(autouse=True)
def _no_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUBENCH_FAULT", raising=False)


def test_cold_run_writes_run_json_and_predictions_in_corpus_order(workspace, tmp_path) -> None:
    record = execute_run(
        workspace / "experiment.yaml",
        "b4",
        "cold",
        1,
        frozen(workspace / "experiment.yaml", tmp_path),
    )
    on_disk, folder = read_run(tmp_path, "b4", "cold", 1)
    assert on_disk == record.to_dict()
    assert set(on_disk) >= CONTRACT_KEYS and set(on_disk["environment"]) >= ROW_KEYS
    assert record.error is None and record.status == "finished"
    assert record.pid == os.getpid()
    assert record.load_seconds > 0 and record.elapsed_seconds > 0
    assert record.warmup_iterations == 0
    # CPU: memory not recorded (R4.3), GPU fields empty, GPUs used truly zero
    assert record.memory == dict.fromkeys(MEMORY_FIELDS)
    env = record.environment
    assert env.gpu_model is None and env.gpu_count == 0 and env.device == "cpu"
    assert len(record.model_revision) == 64 and len(record.tokenizer_revision) == 64
    assert record.started_utc <= record.finished_utc
    ids = [json.loads(x)["id"] for x in (workspace / "eval.jsonl").read_text().splitlines()]
    predictions = [json.loads(x) for x in (folder / "predictions.jsonl").read_text().splitlines()]
    assert [p["id"] for p in predictions] == ids
    assert {p["label"] for p in predictions} <= set(CLASSES)
    assert record.truncated_texts > 0  # context 32 cuts most descriptions (R2.3)
    assert "scope=processing" in record.notes and "code=" in record.notes
    assert "phase=cold" in record.notes


def test_warm_run_does_the_declared_warmups_then_one_measured_pass(
    workspace, tmp_path, monkeypatch
) -> None:
    kinds: list[str] = []
    real = phases.measure_pass

    def spy(*args, **kwargs):
        kinds.append(kwargs.get("pass_kind", "measured"))
        return real(*args, **kwargs)

    monkeypatch.setattr(phases, "measure_pass", spy)
    yaml_path = write_yaml(workspace, "e2e.yaml", scope="end_to_end")
    record = execute_run(yaml_path, "b1", "warm", 2, frozen(yaml_path, tmp_path))
    assert kinds == ["warmup", "warmup", "measured"]  # R3.4
    assert record.warmup_iterations == 2 and record.error is None
    assert "scope=end_to_end" in record.notes
    lines = (run_dir(tmp_path, "b1", "warm", 2) / "predictions.jsonl").read_text().splitlines()
    assert len(lines) == 40


def test_injected_oom_is_recorded_not_raised_r5_8(workspace, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GPUBENCH_FAULT", "oom@batch:2@variant:b4")
    failed = execute_run(
        workspace / "experiment.yaml",
        "b4",
        "cold",
        3,
        frozen(workspace / "experiment.yaml", tmp_path),
    )
    assert failed.elapsed_seconds is None and failed.status == "failed"
    assert failed.error.startswith("OutOfMemoryError") and failed.out_of_memory is True
    assert "R5.8" in failed.notes and "GPUBENCH_FAULT=oom@batch:2@variant:b4" in failed.notes
    assert failed.load_seconds > 0  # the load row still has its time
    assert not (run_dir(tmp_path, "b4", "cold", 3) / "predictions.jsonl").exists()
    other = execute_run(workspace / "experiment.yaml", "b1", "cold", 3, tmp_path)
    assert other.error is None  # scoped to b4 only


def test_failed_warmup_means_no_measured_pass(workspace, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GPUBENCH_FAULT", "error@batch:1@pass:warmup@run:1")
    bundle = frozen(workspace / "experiment.yaml", tmp_path)
    record = execute_run(workspace / "experiment.yaml", "b1", "warm", 1, bundle)
    assert record.error.startswith("warm-up pass 1 of 2 failed: InjectedFault")
    assert record.elapsed_seconds is None
    assert not (run_dir(tmp_path, "b1", "warm", 1) / "predictions.jsonl").exists()


def test_load_failure_is_recorded_r3_6(workspace, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GPUBENCH_FAULT", "error@load@phase:cold")
    bundle = frozen(workspace / "experiment.yaml", tmp_path)
    record = execute_run(workspace / "experiment.yaml", "b1", "cold", 1, bundle)
    assert record.error.startswith("load failed: InjectedFault")
    assert record.load_seconds is None and record.elapsed_seconds is None
    assert record.model_revision is None
    assert "R3.6 load failed" in record.notes
    assert not (run_dir(tmp_path, "b1", "cold", 1) / "predictions.jsonl").exists()


def test_missing_model_folder_is_a_recorded_load_failure(workspace, tmp_path) -> None:
    yaml_path = write_yaml(workspace, "nomodel.yaml", model="no-such-model")
    record = execute_run(yaml_path, "b1", "cold", 1, frozen(yaml_path, tmp_path))
    assert record.error.startswith("load failed: BackendError")
    on_disk, _ = read_run(tmp_path, "b1", "cold", 1)
    assert on_disk == record.to_dict()


def test_declaration_errors_raise(workspace, tmp_path, monkeypatch) -> None:
    bad = workspace / "bad.yaml"
    bad.write_text("experiment_id: [unclosed\n", encoding="utf-8")
    with pytest.raises(ProtocolError):
        execute_run(bad, "b1", "cold", 1, tmp_path)
    good = workspace / "experiment.yaml"
    frozen(good, tmp_path)
    with pytest.raises(ProtocolError, match="no variant 'b9'"):
        execute_run(good, "b9", "cold", 1, tmp_path)
    with pytest.raises(ProtocolError, match="R3.2"):
        execute_run(good, "b1", "load", 1, tmp_path)
    with pytest.raises(ProtocolError, match="run_index"):
        execute_run(good, "b1", "cold", 0, tmp_path)
    monkeypatch.setenv("GPUBENCH_FAULT", "oom@batch:zero")
    with pytest.raises(FaultSpecError):
        execute_run(good, "b1", "cold", 1, tmp_path)
    assert not (tmp_path / "runs").exists()  # nothing written for a declaration error


@pytest.mark.slow
def test_dead_process_leaves_a_failed_run_json_r3_6(workspace, tmp_path) -> None:
    code = (
        "import sys; from gpubench_nb.pipeline.run import execute_run; "
        "execute_run(sys.argv[1], 'b1', 'cold', 4, sys.argv[2])"
    )
    env = dict(os.environ, GPUBENCH_FAULT="crash@load")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            str(workspace / "experiment.yaml"),
            str(frozen(workspace / "experiment.yaml", tmp_path)),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == CRASH_EXIT_CODE, proc.stderr
    record, _ = read_run(tmp_path, "b1", "cold", 4)
    assert record["status"] == "running" and record["error"] == DIED
    assert record["elapsed_seconds"] is None and record["pid"] != os.getpid()


def test_kernel_refuses_a_declaration_edited_after_freezing_r1_3(workspace, tmp_path) -> None:
    # issue 11.1: `context: 32` -> `8` in the YAML between freezing and a kernel is refused
    # with the difference listed, before anything runs or is written.
    yaml_path = write_yaml(workspace, "edited.yaml")
    bundle = frozen(yaml_path, tmp_path)
    text = yaml_path.read_text(encoding="utf-8")
    yaml_path.write_text(text.replace("context: 32", "context: 8"), encoding="utf-8")
    with pytest.raises(ProtocolError, match=r"10_measure refused(.|\n)*fixed\.context: 32 -> 8"):
        execute_run(yaml_path, "b1", "cold", 1, bundle)
    assert not (bundle / "runs").exists()
    yaml_path.write_text(text, encoding="utf-8")  # back as frozen: the kernel runs
    assert execute_run(yaml_path, "b1", "cold", 1, bundle).context == 32


def test_kernel_refuses_a_corpus_changed_after_freezing_r1_1(workspace, tmp_path) -> None:
    root = tmp_path / "exp"
    root.mkdir()
    for name in ("eval.jsonl", "train.jsonl", "tune.jsonl"):
        (root / name).write_bytes((workspace / name).read_bytes())
    yaml_path = write_yaml(root, "experiment.yaml", model=str(workspace / "bow"))
    bundle = frozen(yaml_path, tmp_path / "bundle")
    lines = (root / "eval.jsonl").read_text(encoding="utf-8").splitlines()
    (root / "eval.jsonl").write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    with pytest.raises(ProtocolError, match=r"fingerprints\.corpus_revision"):
        execute_run(yaml_path, "b1", "cold", 1, bundle)
    assert not (bundle / "runs").exists()


def test_kernel_refuses_model_files_other_than_the_frozen_ones_r1_1(workspace, tmp_path) -> None:
    # The model actually loaded is fingerprinted at load; it must be the frozen one.
    bundle = frozen(workspace / "experiment.yaml", tmp_path, model_revision="0" * 64)
    with pytest.raises(ProtocolError, match=r"fingerprints\.model_revision: 000000000000 ->"):
        execute_run(workspace / "experiment.yaml", "b1", "cold", 1, bundle)
    record, folder = read_run(bundle, "b1", "cold", 1)
    assert record["status"] == "refused" and "R1.3" in record["error"]
    assert record["elapsed_seconds"] is None
    assert not (folder / "predictions.jsonl").exists()  # no pass ran with it


def test_an_edited_lock_is_refused_too(workspace, tmp_path) -> None:
    bundle = frozen(workspace / "experiment.yaml", tmp_path)
    lock = json.loads((bundle / "protocol.lock.json").read_text(encoding="utf-8"))
    lock["declaration"]["fixed"]["context"] = 8
    (bundle / "protocol.lock.json").write_text(json.dumps(lock), encoding="utf-8")
    with pytest.raises(ProtocolError, match="sha256 does not match its content"):
        execute_run(workspace / "experiment.yaml", "b1", "cold", 1, bundle)

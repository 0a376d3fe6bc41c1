"""scripts/gpu_check.py's verdict logic: a timer that skipped the synchronise, a forward during
load or a peak below the weights must FAIL (the GPU runs themselves need a GPU)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_timer_bounds_catch_a_missing_synchronise(gpu_check) -> None:
    events = 0.050  # 50 ms of GPU work between the two events
    assert gpu_check.within(0.0505, events)  # sync + perf_counter: a little more
    assert not gpu_check.within(0.00004, events)  # no sync: only the launch was timed
    assert not gpu_check.within(0.049, events)  # shorter than the GPU work: impossible
    assert not gpu_check.within(0.060, events)  # 20 % more: something else was timed


def _row(**changes):
    memory = {
        "baseline_allocated_bytes": 100,
        "baseline_reserved_bytes": 200,
        "peak_allocated_bytes": 1000,
        "peak_reserved_bytes": 2000,
    }
    row = {
        "error": None,
        "forwards_during_load": 0,
        "cuda_context_seconds": 0.4,
        "fingerprint_seconds": 0.01,
        "load_seconds": 0.2,
        "weight_bytes": 900,
        "cold_seconds": 0.0502,
        "cold_event_seconds": 0.0500,
        "warm_seconds": 0.0301,
        "warm_event_seconds": 0.0300,
        "cold_memory": memory,
        "warm_memory": memory,
    }
    row.update(changes)
    return row


def test_cold_row_verdicts(gpu_check, capsys) -> None:
    gpu_check.VERDICTS.clear()
    gpu_check.judge_cold("good", _row())
    gpu_check.judge_cold("probe", _row(forwards_during_load=1))
    gpu_check.judge_cold("nosync", _row(warm_seconds=0.0001))
    gpu_check.judge_cold("weights", _row(weight_bytes=5000))
    gpu_check.judge_cold("failed", _row(error="load failed: OutOfMemoryError: ..."))
    gpu_check.judge_cold("cpu", _row(cuda_context_seconds=None, cold_event_seconds=None), False)
    status = {name: result for name, result, _ in gpu_check.VERDICTS}
    assert status == {
        "good": "PASS",
        "probe": "FAIL",
        "nosync": "FAIL",
        "weights": "FAIL",
        "failed": "FAIL",
        "cpu": "PASS",
    }
    assert "VERDICT probe: FAIL (1 forward(s) ran during load)" in capsys.readouterr().out


def test_every_check_fails_on_its_planted_fault(gpu_check, capsys) -> None:
    """The CPU smoke mode: each judge PASSes its good case and FAILs its planted fault (a check
    that cannot fail proves nothing), and every check of the GPU run has a judge."""
    figures = gpu_check.figures
    verdicts: list[tuple[str, str, str]] = []
    shown = figures.smoke(lambda name, status, detail: verdicts.append((name, status, detail)))
    assert shown and len(verdicts) == len(figures.JUDGES) == len(figures.PLANTED) == 14
    assert all(status == "PASS" for _, status, _ in verdicts), verdicts
    planted = [line for line in capsys.readouterr().out.splitlines() if line.startswith("PLANTED")]
    assert len(planted) == 14 and all(": FAIL (" in line for line in planted)


def test_a_broken_judge_never_passes(gpu_check) -> None:
    """A check whose data cannot be judged (a child that died, nvidia-smi absent) FAILs."""
    verdicts: list[tuple[str, str, str]] = []
    record = lambda *v: verdicts.append(v)  # noqa: E731
    gpu_check.figures.report(record, "clocks/sampled-during-pass", {"error": "child died"})
    gpu_check.figures.report(record, "cuda/module-loading", {"cases": [{"error": "no CUDA"}]})
    assert [v[1] for v in verdicts] == ["FAIL", "FAIL"]
    assert gpu_check.parse_rows("bow/fp32/b16,hf/bf16/b1/compile=default") == [
        ("bow", "fp32", 16, ""),
        ("hf", "bf16", 1, "compile=default"),
    ]


def test_optimised_rows_fail_without_their_own_figures(gpu_check) -> None:
    done = {"compile": "default", "compile_seconds": 41.0, "compiled_graphs": 1}
    done.update(quantization="none", quantize_seconds=None, quantized_layers=None)
    row = {"setting": "compile=default", "optimised": done, "warm_recompiles": 0}
    assert gpu_check.optimised_problems(row) == []
    assert gpu_check.optimised_problems(dict(row, warm_recompiles=2)) == [
        "warm pass recompiled 2 graph(s)"
    ]
    assert gpu_check.optimised_problems(dict(row, optimised=None)) == [
        "compile=default: not applied"
    ]
    quant = dict(done, compile="none", quantization="int8_weight_only", quantized_layers=0)
    assert gpu_check.optimised_problems(dict(row, optimised=quant)) == [
        "quantization: 0 layers quantised"
    ]


def test_the_gpu_check_has_an_onnxruntime_cuda_provider_row() -> None:
    """runtime onnxruntime on CUDA: the GPU route installs onnxruntime-gpu and the check runs the
    benchmark with --check, which fails unless the session ran on CUDAExecutionProvider."""
    root = SCRIPT.parent.parent
    shell = (root / "scripts" / "gpu_check.sh").read_text(encoding="utf-8")
    assert "step onnxruntime-cuda" in shell and "benchmarks/onnx_runtime.py" in shell
    assert '--device "$DEVICE" --limit 300 --repeats 1 --check' in shell
    assert "onnxruntime-gpu" in (root / "scripts" / "gpu-requirements.txt").read_text()
    bench = (root / "benchmarks" / "onnx_runtime.py").read_text(encoding="utf-8")
    assert '"CUDAExecutionProvider" if args.device.startswith("cuda")' in bench
    assert "record.providers" in bench  # read back from the session, not the providers asked

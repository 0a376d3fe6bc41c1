"""The runtime onnxruntime beside torch (R2.1): exported once before the runs and frozen in the
lock (R1.1), its session's creation the load (R3.2), its memory seen by a probe that can see it
(R3.9), its int8 onnxruntime's own, refused where it cannot run, and answering as torch does."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from gpubench_nb.engine.backends import onnx_runtime
from gpubench_nb.engine.optimise import refuse_unrunnable
from gpubench_nb.errors import BackendError
from gpubench_nb.pipeline.orchestrate import run_experiment
from gpubench_nb.protocol.audit import check_bundle
from gpubench_nb.protocol.corpus import load_experiment_corpus
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.results import read_rows
from tests.support.experiments import CLASSES, declaration, subset
from tests.support.in_process import steps_in_process
from tests.support.models import tiny_bert_folder

REPO = Path(__file__).resolve().parents[2]


def _write(root: Path, data: dict) -> Path:
    path = root / f"{data['experiment_id']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _hf_runtime(root: Path, data_dir: Path, knob: str, values: list, **fixed) -> Path:
    """The tiny hf classifier on 80 Debian texts, ``knob`` the variants' setting."""
    subset(data_dir / "eval.jsonl", root / "eval.jsonl", 80, 12)
    if not (root / "hf").exists():
        tiny_bert_folder(root / "hf", dict(enumerate(CLASSES)), initializer_range=0.5)
    return _write(root, {
        "experiment_id": f"hf-{knob}", "seed": 3, "corpus": {"path": "eval.jsonl"},
        "classes": CLASSES,
        "quality": {"metric": "accuracy", "threshold": 0.0, "tolerance": 1.0,
                    "reference_variant": "v0"},
        "model": {"backend": "hf", "path": "hf"}, "tokenizer": {"path": "hf"},
        "fixed": {"precision": "fp32", "context": 64, "batch": 8, "device": "cpu", **fixed},
        "knob": knob, "variants": [{"id": f"v{i}", knob: v} for i, v in enumerate(values)],
        "timing": {"scope": "processing", "warmup_iterations": 1, "repeats": 1,
                   "repeats_reason": "a test of the pipeline, not a measurement (CI time)"},
    })  # fmt: skip


def _runs(bundle: Path) -> dict[str, dict]:
    return {
        f"{p.parent.parent.name}/{p.parent.name}": json.loads(p.read_text())
        for p in sorted((bundle / "runs").glob("*/*/run.json"))
    }


@pytest.mark.slow
def test_a_runtime_knob_gives_a_checked_bundle_that_records_what_ran(tmp_path, data_dir) -> None:
    """torch against onnxruntime, then onnxruntime's own int8: sealed bundles check-bundle
    accepts; each run.json says which runtime ran, its version and the provider its session
    used; the export is frozen in the lock and timed as a figure of its own (R1.1, R3.2)."""
    experiment = _hf_runtime(tmp_path, data_dir, "runtime", ["torch", "onnxruntime"])
    with steps_in_process():
        bundle = run_experiment(experiment, output_dir=tmp_path / "out").bundle_dir
    assert check_bundle(bundle) == []
    lock = json.loads((bundle / "protocol.lock.json").read_text())
    assert len(lock["fingerprints"]["onnx_revision"]) == 64  # the graph, frozen (R1.1)
    export = json.loads((bundle / "onnx" / "export.json").read_text())
    assert export["export_seconds"] > 0 and export["opset"] == onnx_runtime.OPSET
    assert export["answers_changed"] == 0 and export["max_logit_difference"] < 1e-4
    assert set(export["dynamic_axes"]) == {"input_ids", "attention_mask"}
    runs = _runs(bundle)
    assert all(r["status"] == "finished" for r in runs.values()), [
        r["error"] for r in runs.values()
    ]
    torch_run, onnx_run = runs["v0/cold-1"], runs["v1/cold-1"]
    assert torch_run["runtime"] == "torch" and torch_run.get("onnx") is None
    assert onnx_run["runtime"] == "onnxruntime" and onnx_run["load_seconds"] > 0
    assert onnx_run["onnx"]["providers"] == ["CPUExecutionProvider"]
    assert onnx_run["onnx"]["version"] == importlib.import_module("onnxruntime").__version__
    assert onnx_run["onnx"]["export"]["export_seconds"] == export["export_seconds"]
    # torch's allocator cannot see onnxruntime: its readings stay empty, RSS says what it saw
    assert onnx_run["memory"]["peak_allocated_bytes"] is None
    assert onnx_run["memory"]["rss_peak_bytes"] >= onnx_run["memory"]["rss_baseline_bytes"] > 0
    environment = json.loads((bundle / "environment.json").read_text())["onnxruntime"]
    assert environment["providers"] == ["CPUExecutionProvider"]
    assert environment["export"]["dynamic_axes"] == export["dynamic_axes"]
    notes = {r["variant_id"]: r["notes"] for r in read_rows(bundle / "resultats-bruts.csv")}
    assert "R2.1 runtime onnxruntime" in notes["v1"] and "runtime onnxruntime" not in notes["v0"]
    # reproducible: the same versions export the same bytes, so a campaign's machines agree
    exp = load_experiment(experiment)
    onnx_runtime.export(exp, tmp_path / "again", load_experiment_corpus(exp, "eval").texts)
    graphs = [folder / onnx_runtime.GRAPH for folder in (tmp_path / "again", bundle / "onnx")]
    assert graphs[0].read_bytes() == graphs[1].read_bytes()
    answers = [
        (bundle / "runs" / v / "cold-1" / "predictions.jsonl").read_text() for v in ("v0", "v1")
    ]
    assert answers[0] == answers[1]

    int8 = _hf_runtime(tmp_path, data_dir, "quantization", ["none", "int8_dynamic"],
                       runtime="onnxruntime")  # fmt: skip
    with steps_in_process():
        bundle = run_experiment(int8, output_dir=tmp_path / "out").bundle_dir
    assert check_bundle(bundle) == []
    done = _runs(bundle)["v1/warm-1"]["optimisation"]
    assert done["quantization"] == "int8_dynamic" and done["quantized_layers"] >= 6
    assert done["quantize_seconds"] > 0
    assert done["weight_bytes"] < (bundle / "onnx" / "model.onnx").stat().st_size


def test_validate_refuses_onnxruntime_without_the_extra_with_the_install_line(
    tmp_path, monkeypatch, capsys
) -> None:
    from gpubench_nb.cli import main

    (tmp_path / "eval.jsonl").write_text('{"id": "1", "text": "x", "label": "a"}\n')
    (tmp_path / "train.jsonl").write_text('{"id": "2", "text": "y", "label": "b"}\n')
    data = declaration(knob="runtime", fixed={"batch": 4, "device": "cpu"})
    data["variants"] = [{"id": "b1", "runtime": "torch"}, {"id": "o", "runtime": "onnxruntime"}]
    path = _write(tmp_path, data)
    refuse_unrunnable(load_experiment(path))  # installed here (the dev stamp installs [onnx])
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if "onnx" in n else real(n))
    assert main(["validate", str(path)]) == 2  # as without the extra
    said = capsys.readouterr().err
    assert "o: runtime onnxruntime needs onnx, onnxscript, onnxruntime" in said
    assert "pip install 'gpubench-nb[onnx]'" in said and "Traceback" not in said


def test_a_runtime_that_is_not_the_declared_one_is_refused() -> None:
    step = SimpleNamespace(backend=object())
    assert onnx_runtime.apply_runtime(step, "torch") == ({}, None)
    with pytest.raises(BackendError, match="runtime onnxruntime was declared but torch runs"):
        onnx_runtime.apply_runtime(step, "onnxruntime")


def test_the_rss_probe_sees_what_the_process_holds_never_an_allocator_number() -> None:
    probe = onnx_runtime.RssProbe("cpu")
    probe.begin()
    held = bytearray(64 * 2**20)  # touched: resident
    reading = probe.end()
    del held
    assert reading.rss_peak_bytes - reading.rss_baseline_bytes >= 60 * 2**20
    assert reading.peak_allocated_bytes is None and reading.probe == onnx_runtime.RSS
    cuda = onnx_runtime.RssProbe("cuda:0")
    cuda.begin()
    assert cuda.end().rss_peak_bytes is None and "not observable" in cuda.end().probe


def test_old_locks_mean_torch() -> None:
    exp = load_experiment(REPO / "parameters" / "minilm-runtime.yaml")
    assert [v.settings.runtime for v in exp.variants] == ["torch", "onnxruntime"]
    demo = load_experiment(REPO / "parameters" / "demo.yaml")
    assert {v.settings.runtime for v in demo.variants} == {"torch"}
    assert "runtime" not in demo.normalised()["fixed"]  # left out: old locks stay the same


@pytest.mark.slow
def test_minilm_onnxruntime_answers_as_torch_on_the_demo_corpus(tmp_path, data_dir) -> None:
    """The minilm preset exported and run by onnxruntime, fp32 both, on the whole demo corpus:
    logits within 1e-3 of torch's and at least 99.5 % of the answers the same."""
    for name in ("eval", "train", "tune"):
        subset(data_dir / f"{name}.jsonl", tmp_path / f"{name}.jsonl", 1000)
    data = declaration(
        corpus={"path": "eval.jsonl", "train": "train.jsonl", "tune": "tune.jsonl"},
        classes=CLASSES, knob="runtime", fixed={"context": 128, "batch": 16, "device": "cpu"},
        model={"backend": "minilm", "path": "model",
               "build": {"train_limit": 300, "tune_limit": 100, "device": "cpu"}},
        variants=[{"id": "torch", "runtime": "torch"}, {"id": "o", "runtime": "onnxruntime"}],
    )  # fmt: skip
    data["quality"]["reference_variant"] = "torch"
    exp = load_experiment(_write(tmp_path, data))
    from gpubench_nb.engine.backends import build_model

    build_model(exp)
    texts = load_experiment_corpus(exp, "eval").texts
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(onnx_runtime, "COMPARED_ITEMS", len(texts))
        onnx_runtime.export_for(exp, tmp_path / "bundle", texts)
    export = onnx_runtime.OnnxExport.read(tmp_path / "bundle" / onnx_runtime.FOLDER)
    assert export.compared_items == 1000
    assert export.max_logit_difference < 1e-3
    assert export.answers_changed <= 5  # answers equal on >= 99.5 % of the items

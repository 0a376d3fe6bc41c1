"""An hf experiment whose knob is how the model is run, end to end on the CPU (R2.1, R3.2):
int8 quantisation and torch.compile each give a sealed, checked bundle whose runs record the
setting and its own seconds apart from the load, and whose report puts quality next to speed;
with a tight tolerance the gate refuses the quantised variant (R1.3, R5.7). The compile runs in
real kernels (each cold and warm run compiles in its own process: the hf backend end to end);
the int8 runs make the same steps' calls in this process (tests/support/in_process.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gpubench_nb.engine.backends import load_backend
from gpubench_nb.pipeline.orchestrate import run_experiment
from gpubench_nb.protocol.audit import check_bundle
from gpubench_nb.protocol.experiment_spec import ModelSpec, TokenizerSpec
from gpubench_nb.report.bundles import load_bundles, summary_of
from gpubench_nb.report.decision import optimisation_sentences
from tests.support.in_process import steps_in_process
from tests.support.models import quick_compiles, tiny_bert_folder

pytestmark = pytest.mark.slow
CLASSES = ["admin", "games", "graphics", "mail", "math", "net", "science", "sound", "text", "web"]


def _corpus(root: Path, data_dir: Path, folder: Path) -> None:
    """200 Debian texts whose gold labels are the fp32 model's own answers: the reference
    scores 1.0, so any answer int8 changes is a drop below it."""
    lines = (data_dir / "eval.jsonl").read_text(encoding="utf-8").splitlines()[::5][:200]
    items = [json.loads(line) for line in lines]
    backend = load_backend(
        ModelSpec(backend="hf", path=folder),
        TokenizerSpec(path=folder),
        classes=CLASSES,
        device="cpu",
        precision="fp32",
    )
    tokenized = backend.tokenize([i["text"] for i in items], 64)
    for batch in backend.batches(tokenized, 8, "corpus_order"):
        for index, label in zip(batch.indices, backend.predict(batch).tolist(), strict=True):
            items[index]["label"] = CLASSES[label]
    text = "".join(json.dumps(i) + "\n" for i in items)
    (root / "eval.jsonl").write_text(text, encoding="utf-8")


def _experiment(root: Path, knob: str, values: list[str], tolerance: float) -> Path:
    declaration = {
        "experiment_id": f"hf-{knob}",
        "seed": 3,
        "corpus": {"path": "eval.jsonl"},
        "classes": CLASSES,
        "quality": {
            "metric": "accuracy",
            "threshold": 0.0,
            "tolerance": tolerance,
            "reference_variant": "v0",
        },
        "model": {"backend": "hf", "path": "hf"},
        "tokenizer": {"path": "hf"},
        "fixed": {"precision": "fp32", "context": 64, "batch": 8, "device": "cpu"},
        "knob": knob,
        "variants": [{"id": f"v{i}", knob: value} for i, value in enumerate(values)],
        "timing": {
            "scope": "processing",
            "warmup_iterations": 1,
            "repeats": 1,
            "repeats_reason": "a test of the pipeline, not a measurement (CI time)",
        },
    }
    path = root / f"{knob}.yaml"
    path.write_text(yaml.safe_dump(declaration, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module", autouse=True)
def _quick_compiles() -> Iterator[None]:
    with quick_compiles():
        yield


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    root = tmp_path_factory.mktemp("optimised")
    # wide random weights: answers differ between texts, and int8 flips some of them
    model = tiny_bert_folder(root / "hf", dict(enumerate(CLASSES)), initializer_range=0.5)
    _corpus(root, data_dir, model)
    return root


def _sentences(bundle: Path) -> list[str]:
    bundles = load_bundles([bundle])
    return optimisation_sentences(bundles[0], summary_of(bundles))


def _runs(bundle: Path) -> dict[str, dict]:
    return {
        f"{p.parent.parent.name}/{p.parent.name}": json.loads(p.read_text())
        for p in sorted((bundle / "runs").glob("*/*/run.json"))
    }


def test_int8_is_timed_apart_recorded_and_refused_by_a_tight_tolerance(root: Path) -> None:
    experiment = _experiment(root, "quantization", ["none", "int8_dynamic"], 0.0)
    with steps_in_process(real_report=True):
        bundle = run_experiment(experiment, output_dir=root / "outputs").bundle_dir
    assert check_bundle(bundle) == []  # sealed and checked
    runs = _runs(bundle)
    cold = runs["v1/cold-1"]
    assert cold["optimisation"]["quantization"] == "int8_dynamic"
    assert cold["optimisation"]["quantize_seconds"] > 0 and cold["load_seconds"] > 0
    assert cold["optimisation"]["quantized_layers"] == 8  # q, k, v, 3 dense, pooler, classifier
    assert "quantization int8_dynamic" in cold["notes"]
    assert runs["v0/cold-1"].get("optimisation") is None or (
        runs["v0/cold-1"]["optimisation"]["quantization"] == "none"
    )
    assert all(r["threads"]["intra_op"] >= 1 for r in runs.values())
    (sentence,) = _sentences(bundle)
    assert sentence.startswith("v1 (quantization=int8_dynamic): ")
    assert "refused: accuracy 0.940 < 1.00 − 0 (reference v0" in sentence, sentence
    report = (bundle / "report.html").read_text(encoding="utf-8")
    assert "v1 (quantization=int8_dynamic)" in report and "refused: accuracy" in report


def test_compile_is_timed_apart_in_a_new_cache_and_recompilations_counted(root: Path) -> None:
    experiment = _experiment(root, "compile", ["none", "default"], 0.05)
    bundle = run_experiment(experiment, output_dir=root / "outputs").bundle_dir
    assert check_bundle(bundle) == []
    runs = _runs(bundle)
    for key in ("v1/cold-1", "v1/warm-1"):
        done = runs[key]["optimisation"]
        assert done["compile"] == "default" and done["compile_seconds"] > 0
        assert done["compiled_graphs"] >= 1
        assert done["compiler_cache"]["state_at_start"].startswith("empty")
        assert done["compiler_cache"]["files_at_end"] > 0
        assert runs[key]["recompilations"] is not None
    assert runs["v1/warm-1"]["recompilations"] == 0  # the warm-up covered the new shapes
    assert runs["v0/warm-1"].get("recompilations") is None  # nothing compiled: not counted
    (sentence,) = _sentences(bundle)
    assert (
        sentence.startswith("v1 (compile=default): ")
        and "accepted: accuracy 1.00 ≥ 1.00 − 0.05" in sentence
    ), sentence

"""Experiments the tests declare: Debian-section subsets, the tiny bow experiment, its lock.

:func:`write_yaml` declares the 40-text bow experiment of the in-process run tests (a
``dim: 8``, one-epoch model; :func:`frozen` gives a bundle its lock, R1.3);
:func:`make_experiment` declares the small real one the end-to-end tests run (60 eval texts, the
bow preset, batch 1 vs 4, 2 repeats, priced, R5.3).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.corpus import load_experiment_corpus
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.lock import freeze

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = REPO_ROOT / "data" / "debian-sections"
EVAL_ITEMS = 60  # make_experiment's eval texts
CLASSES = ["admin", "games", "graphics", "mail", "math", "net", "science", "sound", "text", "web"]


def subset(source: Path, target: Path, count: int, step: int = 1) -> None:
    """Every ``step``-th line of ``source``, the first ``count`` of them, into ``target``."""
    lines = source.read_text(encoding="utf-8").splitlines()[::step][:count]
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")


YAML = """\
experiment_id: run-test
seed: 7
corpus:
  path: eval.jsonl
  train: train.jsonl
  tune: tune.jsonl
classes: {classes}
output_format: predictions_jsonl
quality: {{metric: macro_f1, threshold: 0.1, tolerance: 0.5, reference_variant: b1}}
model:
  backend: bow
  path: {model}
  build: {{dim: 8, max_epochs: 1, train_limit: 200, tune_limit: 50}}
tokenizer: {{path: {model}}}
fixed: {{precision: fp32, context: 32, device: {device}, batching: corpus_order}}
knob: batch
variants:
  - {{id: b1, batch: 1}}
  - {{id: b4, batch: 4}}
timing: {{scope: {scope}, warmup_iterations: 2, repeats: 5, order: alternating}}
"""


def write_yaml(root: Path, name: str, *, scope="processing", device="cpu", model="bow") -> Path:
    path = root / name
    text = YAML.format(classes=json.dumps(CLASSES), model=model, device=device, scope=scope)
    path.write_text(text, encoding="utf-8")
    return path


def frozen(yaml_path: Path, bundle: Path, **fingerprints: str) -> Path:
    """``bundle`` with the protocol lock of ``yaml_path`` (R1.3), as `gpubench-nb run` freezes
    it; every kernel refuses to run without one. ``fingerprints`` override the real ones."""
    from gpubench_nb.engine.backends import fingerprints_for

    exp = load_experiment(yaml_path)
    try:
        model_revision, tokenizer_revision = fingerprints_for(exp.model, exp.tokenizer)
    except BackendError:  # a missing model folder: its load failure is what a test observes
        model_revision = tokenizer_revision = "absent"
    real = {
        "corpus_revision": load_experiment_corpus(exp, "eval").revision,
        "model_revision": model_revision,
        "tokenizer_revision": tokenizer_revision,
    }
    freeze(bundle, exp, {**real, **fingerprints})
    return bundle


def make_experiment(root: Path, data_dir: Path, experiment_id: str, **timing: object) -> Path:
    """A small but real experiment: Debian texts, the bow preset, batch 1 vs 4."""
    root.mkdir(parents=True, exist_ok=True)
    subset(data_dir / "eval.jsonl", root / "eval.jsonl", EVAL_ITEMS, step=16)
    subset(data_dir / "train.jsonl", root / "train.jsonl", 1500, step=3)
    subset(data_dir / "tune.jsonl", root / "tune.jsonl", 300, step=3)
    declaration = {
        "experiment_id": experiment_id,
        "seed": 11,
        "corpus": {"path": "eval.jsonl", "train": "train.jsonl", "tune": "tune.jsonl"},
        "classes": CLASSES,
        "quality": {
            "metric": "macro_f1",
            "threshold": 0.2,
            "tolerance": 0.05,
            "reference_variant": "b1",
        },
        "model": {"backend": "bow", "path": "model", "build": {}},
        "tokenizer": {"path": "model"},
        "fixed": {"precision": "fp32", "context": 64, "device": "cpu"},
        "knob": "batch",
        "variants": [{"id": "b1", "batch": 1}, {"id": "b4", "batch": 4}],
        "timing": {
            "scope": "processing",
            "warmup_iterations": 1,
            "repeats": 2,
            "repeats_reason": "a test of the pipeline, not a measurement (CI time)",
            "order": "alternating",
            **timing,
        },
        "pricing": {
            "offers": str(REPO_ROOT / "parameters" / "offers.yaml"),
            "offer": "h100-example",
            "days": 7,
            "lots": 1,
        },
    }
    path = root / "experiment.yaml"
    path.write_text(yaml.safe_dump(declaration, sort_keys=False), encoding="utf-8")
    return path

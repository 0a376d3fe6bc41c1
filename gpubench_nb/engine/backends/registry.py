"""The backend registry: one entry per declared ``model.backend`` name (R2.1).

The names and which are presets are declared once, in ``protocol.experiment_spec``, which take
a prompt in ``protocol.prompting``; each name's code is the module of that name under this package,
imported only when asked (torch and transformers load only for the backend used). That module
gives ``BACKEND`` (its class), ``model_files(folder)`` (what its model revision covers, R1.1),
and, for a preset, ``preset_options``, ``preset_source`` and ``build_preset`` (build-model).
``load_backend``, ``fingerprints_for``, ``build_model``, ``import_backend_modules``,
``model_check`` and the pipeline read this table; nothing else dispatches on the name.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.experiment_spec import (
    BACKENDS,
    PRESET_BACKENDS,
    USER_BACKENDS,
)
from gpubench_nb.protocol.prompting import PROMPT_BACKENDS

_PACKAGE = "gpubench_nb.engine.backends"


@dataclass(frozen=True)
class BackendEntry:
    """What the tool knows of one backend name, without importing its model code."""

    name: str

    @property
    def preset(self) -> bool:
        """Built by ``build-model`` from a seed (bow, minilm); else the user's folder."""
        return self.name in PRESET_BACKENDS

    @property
    def prompt(self) -> bool:
        """Takes the declared model.prompt (R2.5)."""
        return self.name in PROMPT_BACKENDS

    @property
    def module_name(self) -> str:
        return f"{_PACKAGE}.{self.name}"

    def module(self) -> ModuleType:
        """The backend's module (imported now)."""
        return importlib.import_module(self.module_name)

    def backend_class(self) -> type:
        """The Backend class (its module imported now)."""
        return self.module().BACKEND

    def model_files(self, folder: Path) -> list[Path]:
        """The files of ``folder`` that ``load`` reads, so the model revision covers (R1.1)."""
        return self.module().model_files(folder)


REGISTRY: dict[str, BackendEntry] = {name: BackendEntry(name) for name in BACKENDS}
PRESETS = PRESET_BACKENDS
USER_FOLDERS = USER_BACKENDS


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

"""Import what a backend's load uses before its clock (``import_seconds``), so ``load_seconds`` is
reading and placing weights only (R3.2); the shipped WordPiece files never import transformers."""

from __future__ import annotations

import contextlib
import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

from gpubench_nb.engine.backends.base import METADATA_FILE
from gpubench_nb.engine.backends.tokenization import WORDPIECE_REVISION
from gpubench_nb.protocol.records import read_json

# Modules a tokenizer load may import lazily, depending on the transformers version.
_TOKENIZER_SUPPORT = (
    "transformers.tokenization_utils_base",
    "transformers.tokenization_utils_fast",
    "transformers.tokenization_utils_tokenizers",
    "transformers.convert_slow_tokenizer",
    "tokenizers.trainers",
    "encodings.unicode_escape",  # a codec reading a chat template (causal_lm) imports
)
# Modules every backend's load uses besides its own (the registry imports that one).
_COMMON_MODULES = ("safetensors.torch", "gpubench_nb.engine.backends.device_errors")


def _json(path: Path) -> dict[str, Any]:
    """A config file's object, or {} where it is absent or unreadable (the load then says so)."""
    value = read_json(path, error=None)
    return value if isinstance(value, dict) else {}


def _optional(name: str) -> None:
    with contextlib.suppress(ImportError):
        importlib.import_module(name)


def _transformers_class(name: Any) -> None:
    """``transformers.<name>`` (its module imported), where that name exists."""
    if not isinstance(name, str) or not name:
        return
    import transformers

    with contextlib.suppress(AttributeError, ImportError, RuntimeError):
        getattr(transformers, name)


def _tokenizer_class(name: str) -> None:
    with contextlib.suppress(ImportError, AttributeError, ValueError):
        from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

        tokenizer_class_from_name(name)


def _model_classes(module: ModuleType, model_path: Path) -> list[str]:
    """The transformers classes a backend's load names (its module's ``AUTO_CLASSES``) and the
    model class its folder's config.json maps to in the module's ``MODEL_MAPPING``."""
    mapping_name = getattr(module, "MODEL_MAPPING", None)
    if mapping_name is None:
        return []  # no Hugging Face model (bow)
    from transformers.models.auto import modeling_auto

    config = _json(Path(model_path) / "config.json")
    model_type = config.get("model_type") or getattr(module, "DEFAULT_MODEL_TYPE", None)
    mapped = getattr(modeling_auto, mapping_name, {}).get(model_type)
    names = [*module.AUTO_CLASSES, *(mapped if isinstance(mapped, (list, tuple)) else [mapped])]
    return [n for n in names if n]


def _tokenizer_classes(tokenizer_path: Path) -> list[str]:
    name = _json(Path(tokenizer_path) / "tokenizer_config.json").get("tokenizer_class")
    if not isinstance(name, str):
        return ["AutoTokenizer"]
    base = name.removesuffix("Fast")
    return ["AutoTokenizer", base, f"{base}Fast"]


def _declares_shipped_wordpiece(model_path: Path) -> bool:
    """Whether a built folder declares the shipped WordPiece files as its tokenizer: read, not
    hashed (hashing is fingerprinting's, never in ``import_seconds``, R1.1, R3.2)."""
    meta = _json(Path(model_path) / METADATA_FILE)  # none: not a built folder, its load refuses it
    return meta.get("tokenizer_revision") == WORDPIECE_REVISION


def import_backend_modules(model: Any, tokenizer: Any) -> list[str]:
    """Import everything the load of ``model`` with ``tokenizer`` will use; return the names asked
    for (none for an unknown backend: load_backend refuses it)."""
    import torch  # noqa: F401

    from gpubench_nb.engine.backends.registry import REGISTRY

    asked = ["torch"]
    for name in _COMMON_MODULES:
        _optional(name)
        asked.append(name)
    entry = REGISTRY.get(model.backend)  # unknown: load_backend refuses it with the list
    module = entry.module() if entry is not None else None  # the backend's module (registry)
    if entry is not None:
        asked.append(entry.module_name)
    if module and module.BACKEND.plain_tokenizer and _declares_shipped_wordpiece(model.path):
        import tokenizers  # noqa: F401  (the shipped WordPiece files, read without transformers)

        return [*asked, "tokenizers"]
    import transformers  # noqa: F401  (a Hugging Face tokenizer folder)

    asked.append("transformers")
    for name in _TOKENIZER_SUPPORT:
        _optional(name)
    tokenizer_classes = _tokenizer_classes(tokenizer.path)
    classes = tokenizer_classes + (_model_classes(module, model.path) if module else [])
    for name in classes:
        _transformers_class(name)
    for name in tokenizer_classes[1:]:  # as AutoTokenizer will look it up
        _tokenizer_class(name)
    return asked + [f"transformers.{n}" for n in classes]

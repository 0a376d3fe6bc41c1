"""The backend registry: one table, used by load, fingerprints, build-model and validate."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench_nb.engine.backends import registry
from gpubench_nb.engine.backends.registry import REGISTRY, backend_entry
from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.experiment_spec import BACKENDS


def test_the_registry_names_exactly_the_declared_backends() -> None:
    assert tuple(REGISTRY) == BACKENDS
    assert [name for name, entry in REGISTRY.items() if entry.preset] == ["bow", "minilm"]
    assert [name for name, entry in REGISTRY.items() if not entry.preset] == ["hf", "causal_lm"]
    assert [name for name, entry in REGISTRY.items() if entry.prompt] == ["causal_lm"]


@pytest.mark.parametrize("name", BACKENDS)
def test_every_entry_gives_its_class_and_file_lister(name: str) -> None:
    entry = backend_entry(name)
    cls = entry.backend_class()
    assert cls.name == name
    assert callable(entry.model_files)


def test_an_unknown_name_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(BackendError, match=r"R2.1: model.backend 'onnx' is not one of \['bow'"):
        backend_entry("onnx")


def test_causal_lm_fingerprints_the_same_files_as_hf(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "model.safetensors").write_bytes(b"w")
    assert backend_entry("causal_lm").model_files(tmp_path) == backend_entry("hf").model_files(
        tmp_path
    )


def test_nothing_else_dispatches_on_a_backend_name() -> None:
    """load_backend, fingerprints_for, build_model, model_check and orchestrate read the
    registry: no chain of `== "bow"` / `"minilm"` comparisons is left in them."""
    package = Path(registry.__file__).resolve().parents[2]
    for relative in (
        "engine/backends/__init__.py",
        "engine/backends/model_check.py",
        "engine/backends/build.py",
        "engine/backends/imports.py",
        "protocol/prompting.py",
        "pipeline/orchestrate.py",
    ):
        source = (package / relative).read_text(encoding="utf-8")
        for name in BACKENDS:
            assert f'== "{name}"' not in source, (relative, name)
            assert f'"{name}": ' not in source, (relative, name)
            assert f'!= "{name}"' not in source, (relative, name)

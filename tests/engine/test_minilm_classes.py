"""The minilm preset refuses a declared class its train subset never shows (R1.4)."""

from __future__ import annotations

import pytest

from gpubench_nb.engine.backends.minilm import build_minilm
from gpubench_nb.engine.backends.presets import BuildSpec
from gpubench_nb.errors import BackendError


def test_a_class_absent_from_train_is_refused_before_anything_is_built(tmp_path) -> None:
    spec = BuildSpec(
        ["a b", "c d"], ["x", "x"], ["e f"], ["y"], ["x", "y"], 0, 32, {"device": "cpu"}
    )
    with pytest.raises(BackendError, match=r"R1\.4.*classes \['y'\] have no item"):
        build_minilm(spec, tmp_path / "minilm")
    assert not (tmp_path / "minilm").exists()

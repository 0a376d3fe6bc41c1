"""A relative path that is not found says which folder it was read from: a notebook copied
and run by hand (Jupyter, nbconvert) works in its own folder, and said only "not found"."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench_nb.errors import BundleError, ProtocolError
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.report.bundles import load_bundles


def test_a_missing_relative_experiment_names_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ProtocolError) as refused:
        load_experiment("parameters/demo.yaml")
    text = str(refused.value)
    assert f"not found (read from the working folder {tmp_path};" in text
    assert "give absolute paths in its parameters cell" in text
    with pytest.raises(ProtocolError) as absolute:
        load_experiment(tmp_path / "nowhere.yaml")
    assert "working folder" not in str(absolute.value)  # an absolute path needs no hint


def test_a_missing_relative_bundle_names_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BundleError, match=f"read from the working folder {tmp_path};"):
        load_bundles(["outputs/demo-bow-batch"])

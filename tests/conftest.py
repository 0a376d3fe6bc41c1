"""Shared test setup: offline model loading, the `gpu` marker's skip, repository paths, and the
set-ups several test files share, made once per session (helpers: tests/support/)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = REPO_ROOT / "data" / "debian-sections"


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files holding `slow` tests first (parallel workers then end together: the long files do
    not start last), each file's tests in their own order; `gpu` tests skip, with a visible
    reason, where CUDA is absent."""
    slow_files = {item.path for item in items if "slow" in item.keywords}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: files keep their order
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device (marker `gpu`); none on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA_DIR


@pytest.fixture(autouse=True)
def _unfreeze_the_heap():
    """A timed pass freezes the heap it leaves (engine.measure._settle, issue 25): fine in a
    kernel that ends with the run, not in this long test process, whose later garbage would
    then never be collected. Each test's frozen objects go back to the oldest generation."""
    yield
    import gc

    gc.unfreeze()


@pytest.fixture(scope="session")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny bow workspace: a 40-text eval corpus, ``experiment.yaml`` (support.experiments
    .write_yaml) and its ``dim: 8`` model, built once per session. Tests add their own
    declarations beside it under their own names; one that must change a shared file copies
    the folder first."""
    from gpubench_nb.engine.backends import build_model
    from gpubench_nb.protocol.experiment import load_experiment
    from tests.support.experiments import subset, write_yaml

    root = tmp_path_factory.mktemp("run")
    subset(DATA_DIR / "eval.jsonl", root / "eval.jsonl", 40)
    subset(DATA_DIR / "train.jsonl", root / "train.jsonl", 400)
    subset(DATA_DIR / "tune.jsonl", root / "tune.jsonl", 100)
    write_yaml(root, "experiment.yaml")
    build_model(load_experiment(root / "experiment.yaml"))
    return root

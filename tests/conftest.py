"""Shared test setup: offline model loading, the `gpu` marker's skip, repository paths."""

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
    """Skip `gpu` tests, with a visible reason, where CUDA is absent."""
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

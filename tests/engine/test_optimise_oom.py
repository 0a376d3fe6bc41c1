"""An optimisation that runs out of memory is a failed observation recorded as out of memory,
by the same rule as the load and the passes (engine.memory.is_out_of_memory, R5.8)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from gpubench_nb.engine import optimise


@pytest.mark.parametrize(
    ("raised", "oom"),
    [
        (torch.cuda.OutOfMemoryError("CUDA error: 2.00 GiB"), True),
        (RuntimeError("a message that says out of memory"), False),  # the type decides
    ],
)
def test_an_optimisation_failure_records_out_of_memory_by_its_type(monkeypatch, raised, oom):
    def fails(*_: object) -> None:
        raise raised

    monkeypatch.setattr(optimise, "apply_optimisations", fails)
    monkeypatch.setattr(optimise, "apply_threads", lambda declared: {"declared": declared})
    settings = SimpleNamespace(
        threads="auto", batch=2, context=8, batching="corpus_order", optimisations=lambda: "x"
    )
    outcome = optimise.optimise_phase(object(), None, settings, ["a", "b"])
    assert outcome.backend is None and outcome.record.out_of_memory is oom
    assert outcome.events[0].startswith("R5.8 out of memory" if oom else "R3.6")

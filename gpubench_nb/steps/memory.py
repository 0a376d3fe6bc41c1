"""memory_mlp: how to read PyTorch's four memory counters on a small MLP (R3.3, R3.8, R3.9)."""

from __future__ import annotations

from typing import Any

from gpubench_nb.engine.memory import memory_mlp_demo


def step(device: str = "auto") -> Any:
    """The demo's table (a DataFrame; empty memory cells on a CPU, R4.3)."""
    return memory_mlp_demo(device)

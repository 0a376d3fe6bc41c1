"""memory_mlp: how to read PyTorch's four memory counters on a small MLP (R3.3, R3.8, R3.9):
``step(device)``, the demo's table (empty memory cells on a CPU, R4.3)."""

from gpubench_nb.engine.memory import memory_mlp_demo as step

__all__ = ["step"]

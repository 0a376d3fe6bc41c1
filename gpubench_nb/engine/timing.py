"""A device-synchronised stopwatch and the CUDA context clock (R3.2)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def synchronizer(device: Any) -> Callable[[], None]:
    """A callable that waits for ``device``'s queued work (ROCm's HIP devices are ``cuda`` too); a
    no-op on CPU (``resolve_device`` admits no other kind)."""
    import torch

    device = torch.device("cpu" if device is None else device)
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)


def cuda_context_seconds(
    device: Any, *, cuda: Any = None, clock: Callable[[], int] = time.perf_counter_ns
) -> float | None:
    """Create ``device``'s CUDA/ROCm context now, before any other CUDA work, and return its seconds
    (None on CPU); allocates nothing (R3.8)."""
    import torch

    device = torch.device("cpu" if device is None else device)
    if device.type != "cuda":
        return None
    cuda = torch.cuda if cuda is None else cuda
    start = clock()
    cuda.init()
    cuda.synchronize(device)
    return (clock() - start) / 1e9


class Stopwatch:
    """``perf_counter_ns`` timer that synchronises the device before start and after end (R3.1);
    clock and synchronise are injected so tests see their order."""

    def __init__(
        self,
        clock: Callable[[], int] = time.perf_counter_ns,
        sync: Callable[[], None] | None = None,
    ) -> None:
        self._clock = clock
        self._sync = sync or (lambda: None)
        self._start_ns: int | None = None
        self.span_ns: tuple[int, int] | None = None  # (start, stop) clock readings, once stopped

    def start(self) -> None:
        """Synchronise, then read the clock (queued work must not leak into the timed span)."""
        self._sync()
        self._start_ns = self._clock()

    def stop(self) -> float:
        """Synchronise, read the clock and return the elapsed seconds."""
        if self._start_ns is None:
            raise RuntimeError("Stopwatch.stop() called before start()")
        self._sync()
        end_ns = self._clock()
        self.span_ns, self._start_ns = (self._start_ns, end_ns), None
        return (end_ns - self.span_ns[0]) / 1e9

    def span_so_far(self) -> tuple[int, int] | None:
        """(start, now) while running, the stopped span after ``stop``, None before ``start``."""
        return self.span_ns if self._start_ns is None else (self._start_ns, self._clock())

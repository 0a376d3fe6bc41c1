"""A device-synchronised stopwatch and the CUDA context clock (R3.2)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def _no_sync() -> None:
    return None


def synchronizer(device: Any) -> Callable[[], None]:
    """A callable that waits for ``device``'s queued work (ROCm's HIP devices are ``cuda`` too); a
    no-op on CPU."""
    import torch

    device = torch.device(device) if device is not None else torch.device("cpu")
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    if device.type == "mps":  # pragma: no cover - not a target, but never time async work
        return torch.mps.synchronize
    return _no_sync


def cuda_context_seconds(
    device: Any, *, cuda: Any = None, clock: Callable[[], int] = time.perf_counter_ns
) -> float | None:
    """Create ``device``'s CUDA/ROCm context now, before any other CUDA work, and return its seconds
    (None on CPU); allocates nothing (R3.8)."""
    import torch

    device = torch.device(device) if device is not None else torch.device("cpu")
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
        self._sync = sync or _no_sync
        self._start_ns: int | None = None
        self.elapsed_seconds: float | None = None
        self.span_ns: tuple[int, int] | None = None  # (start, stop) clock readings, once stopped

    def start(self) -> None:
        """Synchronise, then read the clock (queued work must not leak into the timed span)."""
        self._sync()
        self._start_ns = self._clock()
        self.elapsed_seconds = None

    def stop(self) -> float:
        """Synchronise, read the clock and return the elapsed seconds."""
        if self._start_ns is None:
            raise RuntimeError("Stopwatch.stop() called before start()")
        self._sync()
        end_ns = self._clock()
        self.elapsed_seconds = (end_ns - self._start_ns) / 1e9
        self.span_ns, self._start_ns = (self._start_ns, end_ns), None
        return self.elapsed_seconds

    def span_so_far(self) -> tuple[int, int] | None:
        """(start, now) while running, the stopped span after ``stop``, None before ``start``."""
        return self.span_ns if self._start_ns is None else (self._start_ns, self._clock())

    def __enter__(self) -> Stopwatch:
        self.start()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        # A failed span has no duration (R5.8): leave elapsed_seconds None on an exception.
        if exc_type is None:
            self.stop()
        else:
            self._start_ns = None

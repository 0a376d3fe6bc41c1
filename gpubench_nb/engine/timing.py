"""A device-synchronised stopwatch and the CUDA context clock (R3.2)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def _no_sync() -> None:
    return None


def synchronizer(device: Any) -> Callable[[], None]:
    """A callable that waits for all queued work on ``device``; a no-op on CPU.

    ROCm builds of PyTorch expose HIP devices as ``cuda``, so one branch covers both.
    """
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
    """Create the CUDA (or ROCm) context of ``device`` now and return how long it took, so that
    no timer charges it to a phase: ``torch.cuda.init()`` then a device synchronise (the first
    runtime call on the device creates its primary context). ``None`` on CPU, where there is
    no context. Allocates nothing, so the load's memory baseline is untouched (R3.8). Call it
    before any other CUDA work of the process; a second call measures almost nothing."""
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
    """``perf_counter_ns`` timer that synchronises the device before start and after end.

    Both the clock and the synchronise call are injected so that tests can record their order
    (STYLE habit 8).
    """

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

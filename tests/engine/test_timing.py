"""Stopwatch order (sync -> clock, sync -> clock) and the declared scope (R3.1, R3.2)."""

from __future__ import annotations

import pytest
import torch

from gpubench_nb.engine.timing import Stopwatch, synchronizer


class Recorder:
    """Logs every call of the fake clock and the fake synchronise, in order."""

    def __init__(self, ticks: list[int]) -> None:
        self.log: list[str] = []
        self._ticks = iter(ticks)

    def clock(self) -> int:
        self.log.append("clock")
        return next(self._ticks)

    def sync(self) -> None:
        self.log.append("sync")


def test_stopwatch_synchronises_before_start_and_after_end() -> None:
    rec = Recorder([1_000_000_000, 3_500_000_000])
    watch = Stopwatch(clock=rec.clock, sync=rec.sync)
    watch.start()
    assert rec.log == ["sync", "clock"]  # queued work finishes before the clock is read
    rec.log.append("work")
    elapsed = watch.stop()
    assert rec.log == ["sync", "clock", "work", "sync", "clock"]
    assert elapsed == 2.5  # (3.5e9 - 1.0e9) ns in seconds
    assert watch.span_ns == (1_000_000_000, 3_500_000_000)


def test_stop_before_start_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="before start"):
        Stopwatch(clock=lambda: 0).stop()


def test_real_clock_measures_positive_time() -> None:
    watch = Stopwatch()
    watch.start()
    assert watch.stop() >= 0.0


def test_synchronizer_is_a_noop_on_cpu() -> None:
    sync = synchronizer(torch.device("cpu"))
    assert sync() is None
    assert synchronizer(None)() is None


@pytest.mark.gpu
def test_synchronizer_waits_for_cuda_work() -> None:
    dev = torch.device("cuda")
    x = torch.randn(2048, 2048, device=dev)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        x = x @ x / 2048
    end.record()
    synchronizer(dev)()
    assert end.query()  # all queued work finished

"""A fake NVML for one GPU, a tiny CPU backend for a real measure_pass, and a sampler whose
start raises: the telemetry tests' shared set-up (engine/clocks.py, engine/measure.py)."""

from __future__ import annotations

import time

from gpubench_nb.engine.clocks import ClockSampler


class FakeNvml:
    """One GPU at ``sm`` MHz (max 1980), 600 W, energy following the real clock at 600 W."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 2, 0

    def __init__(self, sm=1980, power_mw=600_000) -> None:
        self.sm, self.power_mw, self.t0 = sm, power_mw, time.perf_counter()
        self.energy_offset_mj = 0

    def nvmlDeviceGetClockInfo(self, handle, kind):  # noqa: N802 (pynvml's names)
        return self.sm if kind == self.NVML_CLOCK_SM else 3201

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):  # noqa: N802
        return 1980

    def nvmlDeviceGetPowerUsage(self, handle):  # noqa: N802
        return self.power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):  # noqa: N802
        return 700_000

    def nvmlDeviceGetTemperature(self, handle, sensor):  # noqa: N802
        return 60

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):  # noqa: N802
        return 0

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):  # noqa: N802
        now = time.perf_counter() - self.t0
        return 5_000_000 + int(600 * now * 1000) + self.energy_offset_mj


class TinyBackend:
    """Two batches of zeros on the CPU: a real measure_pass around a sampler."""

    name, classes = "tiny", ("a",)

    def __init__(self) -> None:
        import torch

        self.device, self.torch = torch.device("cpu"), torch

    def tokenize(self, texts, context):
        from gpubench_nb.engine.backends.base import Tokenized

        return Tokenized([[1] for _ in texts], 0, 0)

    def batches(self, tokenized, batch, batching):
        from gpubench_nb.engine.backends.base import Batch, batch_order

        order = batch_order([1] * len(tokenized.input_ids), batch, batching)
        return [Batch(ix, {}) for ix in order]

    def predict(self, batch):
        return self.torch.zeros(len(batch.indices), dtype=self.torch.long)


class ExplodingSampler(ClockSampler):
    """A sampler whose start raises, as a refused thread once did inside it."""

    def start(self) -> None:
        raise RuntimeError("can't start new thread")

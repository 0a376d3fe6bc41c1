"""Clocks, power, reasons and energy sampled during a pass from a fake NVML (issue 23 §3)."""

from __future__ import annotations

import itertools
import threading
import time

from hypothesis import given
from hypothesis import strategies as st

from gpubench_nb.engine.clocks import (
    NOT_OBSERVABLE,
    ClockSampler,
    reason_names,
    sampler_for,
    summarise,
    telemetry_text,
)


class FakeNvml:
    """What pynvml answers for one busy GPU: the SM clock cycles through ``sm_mhz`` (the H200
    case: idle snapshot 1980 MHz, 1507 median while working, 1215 min), the SW power cap
    reason is set, the energy counter advances at 612 W of the real clock."""

    NVML_CLOCK_SM = 0
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, sm_mhz=(1507, 1215, 1507, 1980, 1507), reasons=0x4 | 0x1) -> None:
        self._sm = itertools.cycle(sm_mhz)
        self.reasons = reasons
        self.started = time.perf_counter()
        self.calls = 0
        self.lock = threading.Lock()

    def nvmlDeviceGetClockInfo(self, handle, kind):  # noqa: N802 (pynvml's names)
        with self.lock:
            self.calls += 1
            return next(self._sm) if kind == self.NVML_CLOCK_SM else 3201

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):  # noqa: N802
        return 1980

    def nvmlDeviceGetPowerUsage(self, handle):  # noqa: N802
        return 612_000  # mW

    def nvmlDeviceGetTemperature(self, handle, sensor):  # noqa: N802
        return 71

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):  # noqa: N802
        return self.reasons

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):  # noqa: N802
        return 1_000_000 + int(612_000 * (time.perf_counter() - self.started))


def test_reason_bits_are_named() -> None:
    assert reason_names(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert reason_names(0) == []
    assert reason_names(0x1000) == ["bit_0x1000"]


def test_sampler_records_min_median_reasons_and_energy_per_pass() -> None:
    """A pass at a median 1507 MHz under a 1980 MHz maximum with SW power capping is flagged
    throttled and low-clock; energy is the counter's difference in joules."""
    nvml = FakeNvml()
    sampler = ClockSampler(nvml, "h0", interval_seconds=0.001)
    sampler.start()
    done = threading.Event()
    while len(sampler.samples) < 5:  # the side thread samples while the "pass" runs
        done.wait(0.001)
    sampler.stop()
    count = len(sampler.samples)
    sampler.stop()  # a failure after the timer stops it again: nothing changes
    assert len(sampler.samples) == count
    summary = sampler.summary()
    assert summary["observable"] is True
    assert summary["samples"] == len(sampler.samples) >= 5  # no span given: every sample
    assert summary["sm_clock_mhz"]["min"] == 1215
    assert summary["sm_clock_mhz"]["max"] == 1980
    assert summary["memory_clock_mhz"]["median"] == 3201
    assert summary["power_watts"]["median"] == 612.0
    assert summary["temperature_c"]["max"] == 71
    assert summary["clock_event_reasons"] == ["gpu_idle", "sw_power_cap"]
    assert summary["energy_reason"] is None and summary["energy_joules"] > 0
    assert summary["throttled"] is True
    text = telemetry_text(summary)
    assert "clock-event reasons gpu_idle+sw_power_cap" in text and " J (counter read " in text
    assert "FLAG throttled" in text


def test_summary_flags_a_low_clock_run_without_reasons() -> None:
    """The H200 figures: median 1507 MHz of a 1980 MHz maximum and no reason recorded is
    still a run 'well below the maximum clock'."""
    samples = [{"sm_clock_mhz": v, "reasons": 0} for v in (1507, 1215, 1507)]
    summary = summarise(samples, max_sm_clock_mhz=1980)
    assert summary["throttled"] is False and summary["low_clock"] is True
    assert summary["flags"] == [
        "low clock: median SM clock 1507 MHz is below 85% of the maximum 1980 MHz"
    ]
    assert summary["energy_joules"] == NOT_OBSERVABLE  # no counter read: not observable
    fast = summarise([{"sm_clock_mhz": 1980, "reasons": 0}], max_sm_clock_mhz=1980)
    assert fast["flags"] == [] and fast["clock_event_reasons"] == []


def test_without_nvml_nothing_is_sampled_and_it_says_so() -> None:
    sampler = ClockSampler(None, None)
    sampler.start()
    sampler.stop()
    assert sampler.samples == []
    assert sampler.summary()["observable"] is False
    assert telemetry_text(sampler.summary()).startswith(
        "gpu clocks during the pass: not observable"
    )


def test_a_gpu_without_energy_counter_or_reason_query() -> None:
    """An older GPU or driver: no energy counter (not supported), no reason query at all."""

    class Older:
        NVML_CLOCK_SM = 0

        def nvmlDeviceGetClockInfo(self, handle, kind):  # noqa: N802
            return 1410

        def nvmlDeviceGetTotalEnergyConsumption(self, handle):  # noqa: N802
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    sampler = ClockSampler(Older(), "h0", interval_seconds=0.001)
    sampler.start()
    while len(sampler.samples) < 2:
        threading.Event().wait(0.001)
    sampler.stop()
    summary = sampler.summary()
    assert summary["energy_joules"] == NOT_OBSERVABLE
    assert summary["clock_event_reasons"] == NOT_OBSERVABLE
    assert summary["power_watts"] == NOT_OBSERVABLE
    assert summary["samples"] >= 2 and summary["sm_clock_mhz"]["median"] == 1410


def test_cpu_device_gets_an_unobservable_sampler() -> None:
    import torch

    assert sampler_for(torch.device("cpu")).observable is False


@given(st.lists(st.floats(-1e9, 1e9, allow_nan=False), min_size=1, max_size=50))
def test_the_local_median_is_statistics_median(values: list[float]) -> None:
    """clocks keeps its own median so a measuring kernel never loads ``decimal`` (issue 25)."""
    import statistics

    from gpubench_nb.engine.clocks import _median

    assert _median(values) == statistics.median(values)

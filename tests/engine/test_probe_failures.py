"""A probe that fails is recorded as that failure, with its error, never as a fact about the pass
(R3.6); the telemetry counts the stopwatch's span only and its energy is checked against the power
sampled. Each test below fails on a mutant of the telemetry code (named in its docstring)."""

from __future__ import annotations

import sys
import threading
import time
from types import SimpleNamespace

import pytest

from gpubench_nb.engine import clocks
from gpubench_nb.engine.clocks import NOT_OBSERVABLE, ClockSampler
from gpubench_nb.engine.measure import measure_pass
from gpubench_nb.protocol.records import GpuTelemetry
from tests.support.telemetry import ExplodingSampler, FakeNvml, TinyBackend

SHORT_PASS = "shorter than the"
GUESSED = "pre-Volta"


def _pass(tmp_path, sampler):
    from gpubench_nb.protocol.corpus import CorpusItem, make_corpus

    corpus = make_corpus(tmp_path / "c.jsonl", [CorpusItem(f"i{n}", "x", "a") for n in range(4)])
    settings = SimpleNamespace(
        precision="fp32", context=8, batch=2, device="cpu", batching="corpus_order"
    )
    return measure_pass(TinyBackend(), corpus, settings, "processing", None, sampler=sampler)


def test_a_start_error_is_recorded_in_run_json_and_never_told_as_a_short_pass(tmp_path) -> None:
    """Mutant: measure's ``_quietly`` swallowing the error (as before): no failure recorded."""
    result = _pass(tmp_path, ExplodingSampler(FakeNvml(), "h0"))
    assert result.ok and result.elapsed_seconds is not None  # telemetry never fails a pass
    telemetry = result.record().gpu_telemetry
    assert isinstance(telemetry, GpuTelemetry)
    written = telemetry.to_dict()  # what run.json holds
    assert written["failure"] == "sampler start() raised RuntimeError: can't start new thread"
    assert "can't start new thread" in written["energy_reason"]
    text = clocks.telemetry_text(result.gpu_telemetry)
    assert "the sampler failed: sampler start() raised RuntimeError" in text
    assert SHORT_PASS not in text and GUESSED not in text and "FLAG" not in text


def test_a_stop_error_is_recorded_too(tmp_path) -> None:
    class StopFails(ClockSampler):
        def stop(self, span=None) -> None:
            super().stop(span)
            raise OSError("NVML went away")

    result = _pass(tmp_path, StopFails(FakeNvml(), "h0", interval_seconds=10))
    assert result.gpu_telemetry["failure"] == "sampler stop() raised OSError: NVML went away"
    assert SHORT_PASS not in clocks.telemetry_text(result.gpu_telemetry)


def test_a_refused_sampler_thread_is_the_samplers_failure(monkeypatch) -> None:
    """A 0.38 s pass whose thread was refused was told 'shorter than the sampling interval'."""
    monkeypatch.setattr(threading.Thread, "start", lambda self: (_ for _ in ()).throw(
        RuntimeError("can't start new thread")))  # fmt: skip
    sampler = ClockSampler(FakeNvml(), "h0")
    sampler.start()
    now = time.perf_counter_ns()
    sampler.stop((now - 380_000_000, now))
    monkeypatch.undo()
    summary = sampler.summary()
    assert summary["failure"] == "sampler thread not started: RuntimeError: can't start new thread"
    assert summary["samples"] == 0 and summary["flags"] == []
    assert SHORT_PASS not in clocks.telemetry_text(summary)


def test_a_long_span_without_a_sample_is_a_sampler_failure_not_a_short_pass() -> None:
    samples = [{"t": 0, "sm_clock_mhz": 345}]  # one idle sample, before the span
    summary = clocks.summarise(samples, span=(10**9, 2 * 10**9), interval_seconds=0.02)
    assert summary["samples"] == 0 and "no sample in a 1.000 s span" in summary["failure"]
    assert SHORT_PASS not in clocks.telemetry_text(summary)
    short = clocks.summarise([], span=(0, 5_000_000), interval_seconds=0.02)  # a 5 ms pass
    assert short["failure"] is None and SHORT_PASS in clocks.telemetry_text(short)


class IdleBeforeSpan(ClockSampler):
    """A real sampler whose first sample is an idle one taken before the timer started."""

    def start(self) -> None:
        super().start()
        self.samples.append({"t": 0, "sm_clock_mhz": 345, "reasons": 1, "power_watts": 600.0})


def test_measure_pass_hands_the_stopwatch_span_to_the_sampler(tmp_path) -> None:
    """Mutant: ``measure_pass`` stopping the sampler without the span (every sample counted)."""
    sampler = IdleBeforeSpan(FakeNvml(), "h0", interval_seconds=0.001)
    result = _pass(tmp_path, sampler)
    assert sampler.span is not None
    assert (sampler.span[1] - sampler.span[0]) / 1e9 == pytest.approx(result.elapsed_seconds)
    telemetry = result.gpu_telemetry
    assert telemetry["samples_outside_span"] >= 1  # the idle sample is not the pass's
    assert telemetry["clock_event_reasons"] in ([], NOT_OBSERVABLE)  # its gpu_idle is not seen


def test_no_sample_is_kept_after_stop() -> None:
    """Mutant: ``ClockSampler.sample`` appending after ``stop()`` (a late NVML answer kept)."""
    sampler = ClockSampler(FakeNvml(), "h0", interval_seconds=0.001)
    sampler.start()
    while len(sampler.samples) < 2:
        threading.Event().wait(0.001)
    sampler.stop()
    count = len(sampler.samples)
    sampler.sample()  # a call that returns after stop(), as a hung NVML call does
    threading.Event().wait(0.02)  # twenty intervals
    assert len(sampler.samples) == count


# --- energy: the power sampled over the span bounds it ---------------------------------------


def test_twice_the_true_energy_is_refused_on_a_30_ms_pass() -> None:
    """600 W for 30 ms is 18 J. The old bound (1.25 x 700 W limit x window + 0.1 s x 700 W)
    accepted up to 96 J; the sampled power accepts 9-27 J."""
    window = (0, 30_000_000)
    truth = clocks.check_energy((0, 0), (window[1], 18_000), [600.0], 700.0)
    assert truth[0] == pytest.approx(18.0) and truth[2] is None
    joules, seconds, reason = clocks.check_energy((0, 0), (window[1], 36_000), [600.0], 700.0)
    assert joules == NOT_OBSERVABLE and seconds == pytest.approx(0.03)
    assert "36.000 J over 0.0300 s, outside the 9.000-27.000 J" in reason
    limit_only = clocks.check_energy((0, 0), (window[1], 36_000), [], 700.0)  # no power sample
    assert limit_only[0] == NOT_OBSERVABLE and "31.500 J" in limit_only[2]


def test_a_failed_counter_read_names_its_error() -> None:
    class Refused(FakeNvml):
        def nvmlDeviceGetTotalEnergyConsumption(self, handle):  # noqa: N802
            raise RuntimeError("NVML_ERROR_UNKNOWN")

    sampler = ClockSampler(Refused(), "h0", interval_seconds=10)
    sampler.start()
    sampler.stop()
    reason = sampler.summary()["energy_reason"]
    assert "nvmlDeviceGetTotalEnergyConsumption: RuntimeError: NVML_ERROR_UNKNOWN" in reason
    assert GUESSED not in reason


# --- NVML and the page cache ------------------------------------------------------------------


def test_nvml_that_fails_to_start_says_its_error(monkeypatch) -> None:
    def refuse() -> None:
        raise RuntimeError("NVML_ERROR_DRIVER_NOT_LOADED")

    monkeypatch.setitem(sys.modules, "pynvml", SimpleNamespace(nvmlInit=refuse))
    sampler = clocks.sampler_for(SimpleNamespace(type="cuda", index=0))
    assert "RuntimeError: NVML_ERROR_DRIVER_NOT_LOADED" in sampler.reason


def test_a_failed_page_cache_check_says_its_error(tmp_path) -> None:
    from gpubench_nb.engine.residency import residency, residency_text

    (tmp_path / "w.bin").write_bytes(b"x" * 10)

    def broken(path, size):
        raise OSError(12, "Cannot allocate memory")

    found = residency([tmp_path / "w.bin"], probe=broken)
    assert found["observable"] is False
    assert "mincore failed: OSError: [Errno 12] Cannot allocate memory" in residency_text(found)
    assert "no mincore(2)" in residency_text(residency([tmp_path / "w.bin"], probe=None))

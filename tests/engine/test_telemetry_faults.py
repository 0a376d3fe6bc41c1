"""Telemetry describes the timed span only, and never fails a pass: a fake NVML with the faults a
review injected (idle clocks outside the span, a reset energy counter, a refused thread, a
non-number, a dead thread, a hung call, no NVML on CUDA), the page-cache count, where
CUDA_MODULE_LOADING came from, a sticky device error at the timer's start, and the diagnosis
budget. Each test failed on the code before these rules."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from gpubench_nb.engine import clocks
from gpubench_nb.engine.clocks import NOT_OBSERVABLE, ClockSampler, summarise
from tests.support.telemetry import ExplodingSampler, FakeNvml, TinyBackend


def _wait_for(sampler: ClockSampler, count: int) -> None:
    while len(sampler.samples) < count:
        threading.Event().wait(0.001)


# --- samples from outside the span ------------------------------------------------------------


def test_only_samples_inside_the_stopwatch_span_count() -> None:
    """Idle 345 MHz samples before and after the span made a fake GPU 'low clock'."""
    idle = [{"t": t, "sm_clock_mhz": 345, "reasons": 1} for t in (0, 100)]
    busy = [{"t": t, "sm_clock_mhz": 1980, "reasons": 0} for t in (20, 40, 60)]
    summary = summarise(idle + busy, span=(10, 90), max_sm_clock_mhz=1980)
    assert summary["samples"] == 3 and summary["samples_outside_span"] == 2
    assert summary["sm_clock_mhz"]["median"] == 1980 and summary["flags"] == []
    assert summary["clock_event_reasons"] == []


def test_a_pass_shorter_than_the_interval_says_0_samples_and_is_never_flagged() -> None:
    sampler = ClockSampler(FakeNvml(sm=345), "h0", interval_seconds=10)
    sampler.start()
    sampler.stop((time.perf_counter_ns(), time.perf_counter_ns()))
    summary = sampler.summary()
    assert summary["samples"] == 0 and summary["flags"] == [] and not summary["low_clock"]
    text = clocks.telemetry_text(summary)
    assert "0 samples in the span" in text and "FLAG" not in text


def test_the_sampler_takes_no_sample_outside_the_thread() -> None:
    """The sample before the timer and the one after it are gone: an idle 345 MHz GPU that is
    never sampled inside the span has no clock figure at all."""
    sampler = ClockSampler(FakeNvml(sm=345), "h0", interval_seconds=10)
    sampler.start()
    sampler.stop()
    assert sampler.samples == []


# --- energy is checked ------------------------------------------------------------------------


def test_a_reset_energy_counter_is_not_observable_with_the_reason() -> None:
    joules, seconds, reason = clocks.check_energy((0, 1_000_000), (10**9, 500), [600.0])
    assert joules == NOT_OBSERVABLE and seconds == 1.0 and "went backwards" in reason


def test_energy_outside_power_times_time_is_not_observable() -> None:
    assert clocks.check_energy((0, 0), (10**9, 600_000), [600.0])[0] == 600.0  # 600 W x 1 s
    joules, _, reason = clocks.check_energy((0, 0), (10**9, 5_000_000), [600.0])  # 5 kJ in 1 s
    assert joules == NOT_OBSERVABLE and "outside" in reason
    joules, _, reason = clocks.check_energy((0, 0), (10**9, 1_000), [600.0])  # 1 J at 600 W
    assert joules == NOT_OBSERVABLE and "outside" in reason
    assert (
        clocks.check_energy((0, 0), (10**9, 600_000), [])[0] == NOT_OBSERVABLE
    )  # nothing to check


def test_the_sampler_drops_a_counter_that_reset_during_the_pass() -> None:
    nvml = FakeNvml()
    sampler = ClockSampler(nvml, "h0", interval_seconds=0.001)
    sampler.start()
    _wait_for(sampler, 2)
    nvml.energy_offset_mj = -5_000_000  # the driver reloaded: the counter restarts from 0
    sampler.stop()
    summary = sampler.summary()
    assert summary["energy_joules"] == NOT_OBSERVABLE
    assert "went backwards" in summary["energy_reason"]


# --- telemetry never fails a pass; its failures are recorded ----------------------------------


def test_a_sampler_that_raises_at_start_never_fails_the_pass(tmp_path) -> None:
    from gpubench_nb.engine.measure import measure_pass
    from gpubench_nb.protocol.corpus import CorpusItem, make_corpus

    corpus = make_corpus(tmp_path / "c.jsonl", [CorpusItem(f"i{n}", "x", "a") for n in range(4)])
    settings = SimpleNamespace(
        precision="fp32", context=8, batch=2, device="cpu", batching="corpus_order"
    )
    result = measure_pass(
        TinyBackend(), corpus, settings, "processing", None, sampler=ExplodingSampler(FakeNvml(), 0)
    )
    assert result.ok and result.elapsed_seconds is not None


def test_a_refused_thread_start_leaves_the_pass_ok_and_says_so(monkeypatch) -> None:
    def refuse(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    sampler = ClockSampler(FakeNvml(), "h0")
    sampler.start()  # must not raise
    sampler.stop()
    monkeypatch.undo()
    summary = sampler.summary()
    assert summary["failure"].startswith("sampler thread not started: RuntimeError")


def test_a_non_number_from_nvml_is_recorded_not_raised() -> None:
    nvml = FakeNvml()
    nvml.nvmlDeviceGetPowerUsage = lambda handle: "N/A"
    sampler = ClockSampler(nvml, "h0", interval_seconds=0.001)
    sampler.start()
    _wait_for(sampler, 2)
    sampler.stop()
    summary = sampler.summary()
    assert summary["power_watts"] == NOT_OBSERVABLE
    assert any("nvmlDeviceGetPowerUsage answered str" in e for e in summary["errors"])
    assert "telemetry errors: " in clocks.telemetry_text(summary)


def test_a_dead_sampler_thread_is_recorded() -> None:
    sampler = ClockSampler(FakeNvml(), "h0", interval_seconds=0.001)
    sampler.sample = lambda: (_ for _ in ()).throw(ZeroDivisionError("bug"))
    sampler.start()
    while sampler._thread is not None and sampler._thread.is_alive():
        threading.Event().wait(0.001)
    sampler.stop()
    assert sampler.summary()["errors"] == ["sampler thread died: ZeroDivisionError: bug"]


def test_a_hung_nvml_call_does_not_hold_the_pass() -> None:
    """stop() returns while the thread is still inside NVML, and says so."""
    release, entered = threading.Event(), threading.Event()
    nvml = FakeNvml()

    def hang(handle, kind):
        entered.set()
        release.wait()
        return 1980

    nvml.nvmlDeviceGetClockInfo = hang
    sampler = ClockSampler(nvml, "h0", interval_seconds=0.001, join_seconds=0.01)
    sampler.start()
    entered.wait()
    sampler.stop()
    still_hung = not release.is_set()
    release.set()
    assert still_hung
    assert any("still inside an NVML call" in e for e in sampler.summary()["errors"])


# --- CUDA without NVML ------------------------------------------------------------------------


def test_cuda_without_nvml_is_not_observable_with_the_reason(monkeypatch) -> None:
    from gpubench_nb.engine import measure

    monkeypatch.setattr(clocks, "load_nvml", lambda: None)
    sampler = clocks.sampler_for(SimpleNamespace(type="cuda", index=0))
    record = measure._telemetry(sampler)
    assert record["observable"] is False and "NVML cannot be loaded" in record["reason"]
    assert "not observable (NVML cannot be loaded" in clocks.telemetry_text(record)
    assert measure._telemetry(clocks.sampler_for(SimpleNamespace(type="cpu"))) is None


# --- page cache, labels, sticky errors, diagnosis budget --------------------------------------


def test_residency_ignores_empty_files_and_counts_a_vector(tmp_path) -> None:
    import mmap

    from gpubench_nb.engine.residency import residency

    page = mmap.PAGESIZE
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "w.bin").write_bytes(b"x" * (3 * page))
    vector = bytes([1, 0, 0b11])  # mincore: bit 0 = resident, the other bits undefined
    result = residency(
        [tmp_path / "empty.txt", tmp_path / "w.bin"], probe=lambda path, size: vector
    )
    assert result["observable"] is True and result["resident_bytes"] == 2 * page
    assert result["files"][0]["resident_fraction"] == "empty file"


def test_module_loading_set_from_python_is_labelled_so() -> None:
    from gpubench_nb.engine.numerics import module_loading

    cuda = SimpleNamespace(is_initialized=lambda: True)
    record = module_loading(
        cuda,
        getenv={"CUDA_MODULE_LOADING": "EAGER"}.get,
        environ={"CUDA_MODULE_LOADING": "EAGER"},
        start_environ={},
    )
    assert record["source"].startswith("set from Python") and record["at_start"] is None


def test_a_sticky_device_error_at_the_timers_start_is_named_asynchronous() -> None:
    from gpubench_nb.engine import measure

    track = measure.SyncTracker(lambda: None)
    error = RuntimeError("CUDA error: an illegal memory access was encountered")
    where = measure._where(error, "timer start", 0, 5, track)
    assert where.startswith("the synchronisation at the timer's start, before batch 1")
    assert "asynchronously" in where and "CUDA_LAUNCH_BLOCKING=1" in where


def test_failed_runs_share_one_diagnosis_budget(tmp_path) -> None:
    """Five failed repeats of one variant: one rerun, the others point to it; a second
    variant past the budget is recorded as not diagnosed, never rerun."""
    from gpubench_nb.pipeline.diagnose import diagnose_runs

    now = [0.0]
    calls = []

    def rerun(exp, variant, phase, index, bundle, *, timeout_seconds):
        calls.append((variant, index, timeout_seconds))
        now[0] += 600  # the rerun ran until its timeout
        return {"of_run": {"variant_id": variant, "run_index": index}, "reproduced": True}

    failed = [("b8", "cold", i, "RuntimeError: CUDA error: x") for i in range(1, 6)]
    failed.append(("b1", "warm", 1, "RuntimeError: CUDA error: y"))
    out = diagnose_runs("e.yaml", tmp_path, failed, 600, clock=lambda: now[0], diagnose=rerun)
    assert calls == [("b8", 1, 600)]
    assert [r["same_as"] for r in out[1:5]] == [{"variant_id": "b8", "run_index": 1}] * 4
    assert out[5]["reproduced"] is None and "budget of 600 s" in out[5]["error"]
    assert (tmp_path / "runs").exists()

"""The load phase of a run (R3.2): fingerprinting and CUDA context outside the timed load, no
forward pass before the cold pass, an out-of-memory load is R5.8 with its readings kept, and the
CSV load row carries the load's memory readings."""

from __future__ import annotations

import pytest
from test_run import frozen, workspace  # noqa: F401  (its module-scoped fixture, same folder)

from gpubench_nb.engine import timing
from gpubench_nb.engine.backends.bow import BowBackend
from gpubench_nb.engine.memory import MemoryReading
from gpubench_nb.pipeline import run as runmod
from gpubench_nb.pipeline.observations import rows_for_run
from gpubench_nb.pipeline.run import execute_run
from gpubench_nb.pipeline.schedule import ScheduledRun
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.fingerprint import sha256_files


@pytest.fixture(autouse=True)
def _no_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUBENCH_FAULT", raising=False)


class FakeProbe:
    """A memory probe with fixed readings, recording begin/end in ``events``."""

    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.begun = False

    def begin(self) -> None:
        self.events.append("probe.begin")
        self.begun = True

    def end(self) -> MemoryReading:
        self.events.append("probe.end")
        return MemoryReading(1000, 2048, 5000, 8192)

    def partial(self) -> MemoryReading:
        return MemoryReading(1000, 2048) if self.begun else MemoryReading()


def test_the_cold_pass_is_the_first_forward_of_the_process(workspace, tmp_path, monkeypatch):  # noqa: F811
    """No probe forward at load: a cold run of b4 over 40 items runs exactly 10 forwards, all
    inside the measured pass (R3.2). With a probe at load there were 11."""
    calls: list[str] = []
    real = BowBackend.forward
    timed = {"on": False}
    real_start = timing.Stopwatch.start

    def start(self) -> None:
        real_start(self)
        timed["on"] = True

    def forward(self, tensors):
        calls.append("timed" if timed["on"] else "untimed")
        return real(self, tensors)

    monkeypatch.setattr(BowBackend, "forward", forward)
    monkeypatch.setattr(runmod, "_load", _wrap_load(runmod._load, lambda: timed.update(on=False)))
    monkeypatch.setattr(timing.Stopwatch, "start", start)
    record = execute_run(
        workspace / "experiment.yaml",
        "b4",
        "cold",
        1,
        frozen(workspace / "experiment.yaml", tmp_path),
    )
    assert record["error"] is None
    assert calls == ["timed"] * 10


def _wrap_load(real, after):
    def load(*args, **kwargs):
        out = real(*args, **kwargs)
        after()  # the load's own Stopwatch has started and stopped: reset the flag
        return out

    return load


def test_fingerprints_are_taken_before_the_timed_load_and_recorded(
    workspace,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    """SHA-256 of the files runs before the load timer starts, and its time is its own figure
    (fingerprint_seconds); the load itself hashes nothing (R3.2, R1.1)."""
    from gpubench_nb.protocol import fingerprint

    events: list[str] = []
    real_hash = fingerprint.sha256_file
    real_start = timing.Stopwatch.start

    def hashing(path):
        events.append("hash")
        return real_hash(path)

    def start(self) -> None:
        events.append("timer.start")
        real_start(self)

    monkeypatch.setattr(fingerprint, "sha256_file", hashing)
    monkeypatch.setattr(timing.Stopwatch, "start", start)
    record = execute_run(
        workspace / "experiment.yaml",
        "b1",
        "cold",
        1,
        frozen(workspace / "experiment.yaml", tmp_path),
    )
    first_timer = events.index("timer.start")
    assert "hash" in events[:first_timer]
    assert "hash" not in events[first_timer:]
    assert isinstance(record["fingerprint_seconds"], float) and record["fingerprint_seconds"] > 0
    assert record["cuda_context_seconds"] is None  # CPU: there is no context
    exp = load_experiment(workspace / "experiment.yaml")
    model_dir = exp.model.path
    assert record["model_revision"] == sha256_files(
        [model_dir / "model.safetensors", model_dir / "gpubench_model.json"], model_dir
    )
    assert "excludes SHA-256 fingerprinting" in record["notes"]
    assert "CUDA context creation" in record["notes"]


def test_cuda_context_is_created_before_fingerprints_and_load(workspace, tmp_path, monkeypatch):  # noqa: F811
    """Order on a (fake) CUDA device: context, fingerprints, memory baseline, load timer."""
    import torch

    from gpubench_nb.engine import backends

    events: list[str] = []
    real_fingerprints = backends.fingerprints_for
    real_load = backends.load_backend

    def context(device):
        events.append(f"context {device}")
        return 0.25

    def fingerprints(model, tokenizer):
        events.append("fingerprint")
        return real_fingerprints(model, tokenizer)

    def load(*args, **kwargs):
        events.append("load")
        kwargs["device"] = "cpu"  # the fake device stands in for the order, not the model
        return real_load(*args, **kwargs)

    monkeypatch.setattr(runmod, "cuda_context_seconds", context)
    monkeypatch.setattr(backends, "fingerprints_for", fingerprints)
    monkeypatch.setattr(backends, "load_backend", load)
    monkeypatch.setattr(runmod, "probe_for", lambda device: FakeProbe(events))
    monkeypatch.setattr(runmod, "synchronizer", lambda device: lambda: events.append("sync"))
    exp = load_experiment(workspace / "experiment.yaml")
    settings = exp.variant("b1").settings
    out = runmod._load(exp, settings, torch.device("cuda", 0), runmod.FaultPlan())
    assert out.error is None, out.error
    assert events[:5] == ["context cuda:0", "fingerprint", "probe.begin", "sync", "load"]
    assert events[-2:] == ["sync", "probe.end"]
    assert out.cuda_context_seconds == 0.25
    assert out.memory == MemoryReading(1000, 2048, 5000, 8192)


def test_cuda_context_seconds_inits_then_syncs_and_is_none_on_cpu() -> None:
    import torch

    calls: list[str] = []

    class FakeCuda:
        def init(self) -> None:
            calls.append("init")

        def synchronize(self, device) -> None:
            calls.append(f"sync {device}")

    ticks = iter([1_000_000_000, 1_750_000_000])
    seconds = timing.cuda_context_seconds(
        torch.device("cuda", 1), cuda=FakeCuda(), clock=lambda: next(ticks)
    )
    assert seconds == 0.75 and calls == ["init", "sync cuda:1"]
    assert timing.cuda_context_seconds(torch.device("cpu"), cuda=FakeCuda()) is None
    assert calls == ["init", "sync cuda:1"]  # nothing asked of CUDA for a CPU run


def test_oom_during_load_is_r5_8_and_keeps_the_readings_so_far(
    workspace,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    events: list[str] = []
    monkeypatch.setattr(runmod, "probe_for", lambda device: FakeProbe(events))
    monkeypatch.setenv("GPUBENCH_FAULT", "oom@load")
    record = execute_run(
        workspace / "experiment.yaml",
        "b1",
        "cold",
        2,
        frozen(workspace / "experiment.yaml", tmp_path),
    )
    assert record["error"].startswith("load failed: OutOfMemoryError")
    assert "R5.8 out of memory during load" in record["notes"]
    assert "R3.6 load failed" not in record["notes"]
    assert record["load_seconds"] is None and record["elapsed_seconds"] is None
    assert record["load_memory"] == {
        "baseline_allocated_bytes": 1000,
        "baseline_reserved_bytes": 2048,
        "peak_allocated_bytes": 5000,
        "peak_reserved_bytes": 8192,
    }
    assert record["fingerprint_seconds"] is not None  # taken before the load began


def test_csv_load_row_carries_the_load_memory_readings(workspace, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setattr(runmod, "probe_for", lambda device: FakeProbe([]))
    record = execute_run(
        workspace / "experiment.yaml",
        "b1",
        "cold",
        3,
        frozen(workspace / "experiment.yaml", tmp_path),
    )
    exp = load_experiment(workspace / "experiment.yaml")
    run = ScheduledRun(position=1, variant_id="b1", phase="cold", run_index=3)
    load, cold = rows_for_run(exp, {}, run, record)
    assert load["phase"] == "load" and load["elapsed_seconds"] == record["load_seconds"]
    assert (load["baseline_allocated_bytes"], load["peak_reserved_bytes"]) == (1000, 8192)
    assert "fingerprint_seconds=" in load["notes"]
    assert cold["phase"] == "cold"

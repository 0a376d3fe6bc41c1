"""The load phase of a run (R3.2): fingerprinting and CUDA context outside the timed load, no
forward pass before the cold pass, an out-of-memory load is R5.8 with its readings kept, and the
CSV load row carries the load's memory readings."""

from __future__ import annotations

import pytest

from gpubench_nb.engine import phases as loadmod
from gpubench_nb.engine import timing
from gpubench_nb.engine.backends.bow import BowBackend
from gpubench_nb.engine.faults import FaultPlan
from gpubench_nb.engine.memory import MemoryReading
from gpubench_nb.pipeline import run as runmod
from gpubench_nb.pipeline.observations import rows_for_run
from gpubench_nb.pipeline.run import execute_run
from gpubench_nb.pipeline.schedule import ScheduledRun
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.fingerprint import sha256_files
from tests.support.experiments import frozen


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


def test_the_cold_pass_is_the_first_forward_of_the_process(workspace, tmp_path, monkeypatch):
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
    wrapped = _wrap_load(runmod.load_phase, lambda: timed.update(on=False))
    monkeypatch.setattr(runmod, "load_phase", wrapped)
    monkeypatch.setattr(timing.Stopwatch, "start", start)
    record = execute_run(
        workspace / "experiment.yaml",
        "b4",
        "cold",
        1,
        frozen(workspace / "experiment.yaml", tmp_path),
    )
    assert record.error is None
    assert calls == ["timed"] * 10


def _wrap_load(real, after):
    def load(*args, **kwargs):
        out = real(*args, **kwargs)
        after()  # the load's own Stopwatch has started and stopped: reset the flag
        return out

    return load


def test_fingerprints_are_taken_before_the_timed_load_and_recorded(
    workspace,
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
    assert isinstance(record.fingerprint_seconds, float) and record.fingerprint_seconds > 0
    assert record.cuda_context_seconds is None  # CPU: there is no context
    exp = load_experiment(workspace / "experiment.yaml")
    model_dir = exp.model.path
    assert record.model_revision == sha256_files(
        [model_dir / "model.safetensors", model_dir / "gpubench_model.json"], model_dir
    )
    assert "SHA-256 fingerprinting (fingerprint_seconds)" in record.notes
    assert "CUDA context creation" in record.notes


def test_cuda_context_is_created_before_fingerprints_and_load(workspace, tmp_path, monkeypatch):
    """Order on a (fake) CUDA device: context, fingerprints, memory baseline, load timer."""
    import torch

    from gpubench_nb.engine import backends

    events: list[str] = []
    from gpubench_nb.engine.backends import registry

    real_fingerprints = registry.fingerprinted_files
    real_load = registry.load_backend

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

    monkeypatch.setattr(loadmod, "cuda_context_seconds", context)
    first = iter([torch.device("cuda", 0)])  # the run's device; the backend's own stays cpu
    real_resolve = backends.resolve_device
    monkeypatch.setattr(backends, "resolve_device", lambda d: next(first, None) or real_resolve(d))
    monkeypatch.setattr(registry, "fingerprinted_files", fingerprints)
    monkeypatch.setattr(registry, "load_backend", load)
    monkeypatch.setattr(loadmod, "probe_for", lambda device: FakeProbe(events))
    monkeypatch.setattr(loadmod, "synchronizer", lambda device: lambda: events.append("sync"))
    exp = load_experiment(workspace / "experiment.yaml")
    spec = loadmod.LoadSpec(exp.model, exp.tokenizer, exp.classes, exp.variant("b1").settings)
    out = loadmod.load_phase(spec, FaultPlan())
    assert out.error is None, out.error
    assert events[:5] == ["context cuda:0", "fingerprint", "probe.begin", "sync", "load"]
    assert events[-2:] == ["sync", "probe.end"]
    assert out.record.cuda_context_seconds == 0.25
    assert out.record.load_memory == MemoryReading(1000, 2048, 5000, 8192).to_dict()


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
    workspace,
    tmp_path,
    monkeypatch,
):
    events: list[str] = []
    monkeypatch.setattr(loadmod, "probe_for", lambda device: FakeProbe(events))
    monkeypatch.setenv("GPUBENCH_FAULT", "oom@load")
    record = execute_run(
        workspace / "experiment.yaml",
        "b1",
        "cold",
        2,
        frozen(workspace / "experiment.yaml", tmp_path),
    )
    assert record.error.startswith("load failed: OutOfMemoryError")
    assert "R5.8 out of memory during load" in record.notes
    assert "R3.6 load failed" not in record.notes
    assert record.load_seconds is None and record.elapsed_seconds is None
    assert record.load_memory == {
        "baseline_allocated_bytes": 1000,
        "baseline_reserved_bytes": 2048,
        "peak_allocated_bytes": 5000,
        "peak_reserved_bytes": 8192,
    }
    assert record.fingerprint_seconds is not None  # taken before the load began


def test_csv_load_row_carries_the_load_memory_readings(workspace, tmp_path, monkeypatch):
    monkeypatch.setattr(loadmod, "probe_for", lambda device: FakeProbe([]))
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
    assert load["phase"] == "load" and load["elapsed_seconds"] == record.load_seconds
    assert (load["baseline_allocated_bytes"], load["peak_reserved_bytes"]) == (1000, 8192)
    assert "fingerprint_seconds=" in load["notes"]
    assert cold["phase"] == "cold"


# --- issue 23 §1, §2: imports outside the load clock; page-cache residency at load start ------

_IMPORT_PROBE = r"""
import json, sys, time, types
from gpubench_nb.engine import timing
from gpubench_nb.engine import phases as load
from gpubench_nb.steps import measure  # what the 10_measure notebook imports and calls

class ChargeTorch:  # finding `torch` advances the load's clock by 1000 s: whose figure is it?
    offset = 0

    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            ChargeTorch.offset += 10**12
        return None

sys.meta_path.insert(0, ChargeTorch())
clock = lambda: time.perf_counter_ns() + ChargeTorch.offset  # noqa: E731
load.time = types.SimpleNamespace(perf_counter_ns=clock)
assert "torch" not in sys.modules

seen = {}
real_start, real_stop = timing.Stopwatch.start, timing.Stopwatch.stop

def start(self):
    real_start(self)
    seen.setdefault("start", set(sys.modules))

def stop(self):
    out = real_stop(self)
    seen.setdefault("stop", set(sys.modules))
    return out

timing.Stopwatch.start, timing.Stopwatch.stop = start, stop
record = measure.step(sys.argv[1], "b1", "cold", 1, sys.argv[2])
heavy = ("transformers", "statistics", "pandas", "sklearn", "scipy", "sympy", "matplotlib",
         "papermill", "nbformat")
print(json.dumps({
    "during_load": sorted(seen["stop"] - seen["start"]),
    "heavy": [m for m in heavy if m in sys.modules],
    "record": {k: record[k] for k in ("import_seconds", "load_seconds", "error", "notes")},
}))
"""


@pytest.mark.slow
def test_imports_are_done_before_the_load_clock_and_recorded(workspace, tmp_path):
    """In a fresh process (a kernel), the load clock imports no module: what the backend needs
    was imported before it, timed as import_seconds (run.json and notes). The bow kernel
    imports none of transformers (issue 25: bow reads its shipped WordPiece files with
    `tokenizers` alone), statistics (its `decimal` took 74 ms after torch), pandas,
    scikit-learn, scipy, sympy, matplotlib or papermill (issue 23 §1: on an H200, 8.42 s of a
    8.57 s load was importing). Fails on the code before issue 23: transformers' tokenizer
    modules were imported inside the load clock."""
    import json
    import subprocess
    import sys

    bundle = frozen(workspace / "experiment.yaml", tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE, str(workspace / "experiment.yaml"), str(bundle)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    record = out["record"]
    assert record["error"] is None
    assert out["during_load"] == []
    # `import torch` (resolving the device imports it) is inside import_seconds, not before
    # the clock: it failed when the run resolved its device before starting the clock.
    assert record["import_seconds"] >= 1000 > record["load_seconds"]
    assert f"load {record['load_seconds']:.3f} s; outside the load clock" in record["notes"]
    assert "importing torch and the backend's Python modules (import_seconds" in record["notes"]
    assert out["heavy"] == []


def test_weight_residency_is_recorded_at_load_start(workspace, tmp_path, monkeypatch):
    """Fingerprinting has just read every file, so they are all in the page cache when the
    load clock starts: run.json says so (mincore), and the notes state it (issue 23 §2)."""
    record = execute_run(
        workspace / "experiment.yaml",
        "b1",
        "cold",
        1,
        frozen(workspace / "experiment.yaml", tmp_path),
    )
    residency = record.weight_residency_at_load_start
    assert residency["observable"] is True
    names = {f["file"] for f in residency["files"]}
    assert {"model.safetensors", "gpubench_model.json", "vocab.txt", "tokenizer.json"} <= names
    assert residency["resident_fraction"] == 1.0
    assert "weights resident in page cache at load start: 100.0 %" in record.notes
    assert "load reads them from the page cache, not storage" in record.notes


def test_residency_not_observable_is_said_so(workspace, tmp_path, monkeypatch):
    """Where mincore cannot be asked, the record and the notes say "not observable"."""
    from gpubench_nb.engine import residency as residency_module

    real = residency_module.residency
    monkeypatch.setattr(loadmod, "residency", lambda paths: real(paths, probe=None))
    record = execute_run(
        workspace / "experiment.yaml",
        "b1",
        "cold",
        1,
        frozen(workspace / "experiment.yaml", tmp_path),
    )
    assert record.weight_residency_at_load_start["resident_fraction"] == "not observable"
    assert "page cache at load start: not observable" in record.notes


def test_effective_generation_config_goes_to_run_json_and_notes() -> None:
    """A causal LM's effective generation config is a top-level run.json key and a note
    naming the folder options that were overridden (R2.5)."""
    from gpubench_nb.engine import phases as load

    class Causal:
        model_revision, tokenizer_revision = "m" * 64, "t" * 64

        def describe(self) -> dict:
            return {
                "generation_config_effective": {"do_sample": False, "max_new_tokens": 3},
                "generation_config_folder_overridden": ["min_new_tokens", "suppress_tokens"],
            }

    outcome = load._loaded("cpu", Causal(), {"load_seconds": 0.5}, [])
    assert outcome.record.generation_config_effective == {
        "do_sample": False,
        "max_new_tokens": 3,
    }
    assert outcome.record.generation_config_folder_overridden == (
        "min_new_tokens",
        "suppress_tokens",
    )
    assert outcome.facts[-1] == (
        "R2.5 generation config effective: do_sample=False max_new_tokens=3; model folder "
        "options overridden: min_new_tokens, suppress_tokens"
    )
    assert load.generation_note({"backend": "bow"}) is None


def test_cold_note_states_the_cublas_workspace() -> None:
    """The cold row's note says its peak includes the 32 MiB cuBLAS workspace (issue 23 §6);
    a warm note does not claim it."""
    assert "cuBLAS workspace (32 MiB" in loadmod.phase_note("cold", 0)
    assert "cuBLAS" not in loadmod.phase_note("warm", 2)

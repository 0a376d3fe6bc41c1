"""measure_pass: scope boundaries (R3.1), memory order (R3.8), failures kept (R3.6, R5.8),
predictions in corpus order (R1.2), truncation counted (R2.3); and the fault grammar."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from gpubench_nb.engine import faults as faults_module
from gpubench_nb.engine import measure as measure_module
from gpubench_nb.engine.backends.base import Batch, Tokenized, batch_order
from gpubench_nb.engine.faults import (
    CRASH_EXIT_CODE,
    Fault,
    FaultPlan,
    FaultSpecError,
    InjectedFault,
    parse_faults,
    trigger,
)
from gpubench_nb.engine.measure import (
    SCOPES,
    check_scope,
    measure_pass,
    scope_note,
)
from gpubench_nb.engine.memory import MemoryProbe, MemoryReading
from gpubench_nb.protocol.corpus import CorpusItem, make_corpus

CLASSES = ("even", "odd", "three")
TEXTS = ("a", "bb b", "ccc cc c", "d", "eeeeeeeeeeee", "ff", "g g g", "hhhhhhh")


@dataclass(frozen=True)
class FakeSettings:
    precision: str = "fp32"
    context: int = 6
    batch: int = 3
    device: str = "cpu"
    batching: str = "corpus_order"


class FakeBackend:
    """A real tiny torch module: the label index is (token count % 3), via a one-hot table."""

    name = "fake"

    def __init__(self, log: list[str] | None = None) -> None:
        self.log = log if log is not None else []
        self.device = torch.device("cpu")
        self.precision = "fp32"
        self.classes = CLASSES
        self.module = torch.nn.Embedding(64, 3)
        with torch.no_grad():
            self.module.weight.copy_(torch.nn.functional.one_hot(torch.arange(64) % 3, 3))

    def tokenize(self, texts, context) -> Tokenized:
        self.log.append("tokenize")
        full = [[ord(c) % 64 for c in text] for text in texts]
        cut = [ids[:context] for ids in full]
        dropped = sum(len(f) - len(c) for f, c in zip(full, cut, strict=True))
        return Tokenized(cut, sum(len(f) > context for f in full), dropped)

    def batches(self, tokenized, batch, batching) -> list[Batch]:
        self.log.append("batches")
        lengths = [len(ids) for ids in tokenized.input_ids]
        return [
            Batch(idx, {"lengths": torch.tensor([lengths[i] for i in idx])})
            for idx in batch_order(lengths, batch, batching)
        ]

    def predict(self, batch: Batch) -> torch.Tensor:
        self.log.append("predict")
        return self.module(batch.tensors["lengths"]).argmax(-1)


def expected_labels(context: int = 6) -> list[str]:
    return [CLASSES[min(len(t), context) % 3] for t in TEXTS]


class FakeProbe:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def begin(self) -> None:
        self.log.append("probe.begin")

    def end(self) -> MemoryReading:
        self.log.append("probe.end")
        return MemoryReading(10, 20, 30, 40)

    def partial(self) -> MemoryReading:
        return MemoryReading(10, 20)


class FakeClock:
    """Logs each reading and whether predictions.jsonl existed at that moment."""

    def __init__(self, log: list[str], path: Path) -> None:
        self.log, self.path, self.now = log, path, 0

    def __call__(self) -> int:
        self.log.append(f"clock(file={'yes' if self.path.exists() else 'no'})")
        self.now += 250_000_000
        return self.now


def write_corpus(path: Path, texts=TEXTS):
    items = [CorpusItem(f"id{i:02d}", text, "even") for i, text in enumerate(texts)]
    path.write_text(
        "".join(json.dumps({"id": c.id, "text": c.text, "label": c.label}) + "\n" for c in items)
    )
    return make_corpus(path, items)


def read_predictions(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("GPUBENCH_FAULT", raising=False)
    log: list[str] = []
    monkeypatch.setattr(measure_module.gc, "collect", lambda: log.append("gc"))
    corpus = write_corpus(tmp_path / "eval.jsonl")
    out = tmp_path / "run" / "predictions.jsonl"
    kwargs = {
        "clock": FakeClock(log, out),
        "probe": FakeProbe(log),
        "sync": lambda: log.append("sync"),
    }
    return FakeBackend(log), corpus, out, log, kwargs


def test_processing_scope_times_only_forward_passes_r3_1(setup) -> None:
    backend, corpus, out, log, kwargs = setup
    result = measure_pass(backend, corpus, FakeSettings(), "processing", out, **kwargs)
    assert result.error is None
    assert log == [
        "tokenize",  # before the timer
        "batches",
        "gc",  # earlier garbage collected before, not inside, the timed span
        "probe.begin",  # R3.8 baselines, outside the timed span
        "sync",  # R3.1: synchronise before start
        "clock(file=no)",
        "predict",
        "predict",
        "predict",
        "sync",  # ... and after end
        "clock(file=no)",  # predictions written after the timer
        "probe.end",
    ]
    assert result.elapsed_seconds == 0.25
    assert result.memory == MemoryReading(10, 20, 30, 40)
    rows = read_predictions(out)
    assert [r["id"] for r in rows] == list(corpus.ids)  # corpus order (R1.2)
    assert [r["label"] for r in rows] == expected_labels()
    assert all(set(r) == {"id", "label"} for r in rows)
    # R2.3: "eeeeeeeeeeee" (12) and "hhhhhhh" (7) and "ccc cc c" (8) exceed 6 tokens
    assert (result.truncated_texts, result.dropped_tokens) == (3, 6 + 1 + 2)
    assert result.notes == ()  # no event


def test_end_to_end_timer_includes_reading_and_writing_r3_1(setup) -> None:
    backend, corpus, out, log, kwargs = setup

    def reader():
        log.append("read")
        return corpus

    result = measure_pass(
        backend, corpus, FakeSettings(), "end_to_end", out, reader=reader, **kwargs
    )
    assert result.error is None
    assert log == [
        "gc",
        "probe.begin",
        "sync",
        "clock(file=no)",
        "read",  # reading the corpus is inside the timer
        "tokenize",
        "batches",
        "predict",
        "predict",
        "predict",
        "sync",
        "clock(file=yes)",  # the predictions were written before the clock stopped
        "probe.end",
    ]
    assert [r["label"] for r in read_predictions(out)] == expected_labels()


@pytest.mark.parametrize(
    ("scope", "tokenisations"), [("processing", 1), ("end_to_end", 3)], ids=["processing", "e2e"]
)
def test_passes_of_one_process_tokenise_once_only_in_the_processing_scope(
    setup, scope: str, tokenisations: int
) -> None:
    # Issue 25: warm-up passes redid tokenisation and batches (17.7 s of a 0.5 s pass at 100k
    # texts). In `processing` they are outside the timer and built once; in `end_to_end` they
    # are inside it (R3.1), so every pass redoes them.
    backend, corpus, out, log, kwargs = setup
    prepared: dict = {}
    results = [
        measure_pass(backend, corpus, FakeSettings(), scope, out, prepared=prepared, **kwargs)
        for _ in range(3)
    ]
    assert all(r.error is None for r in results)
    assert log.count("tokenize") == tokenisations and log.count("batches") == tokenisations
    assert log.count("predict") == 9  # every pass still runs its forward passes
    assert [r["label"] for r in read_predictions(out)] == expected_labels()
    assert {(r.truncated_texts, r.dropped_tokens) for r in results} == {(3, 9)}
    log.clear()
    measure_pass(backend, corpus, FakeSettings(batch=4), scope, out, prepared=prepared, **kwargs)
    assert log.count("tokenize") == 1  # other settings: built anew


def test_end_to_end_default_reader_rereads_the_file(setup) -> None:
    backend, corpus, out, _, kwargs = setup
    result = measure_pass(backend, corpus, FakeSettings(batch=8), "end_to_end", out, **kwargs)
    assert result.error is None and result.item_count == len(TEXTS)
    assert [r["id"] for r in read_predictions(out)] == list(corpus.ids)


def test_corpus_changed_during_run_is_a_failure_r1_1(setup, tmp_path: Path) -> None:
    backend, corpus, out, _, kwargs = setup
    other = write_corpus(tmp_path / "other.jsonl", TEXTS[::-1])
    result = measure_pass(
        backend, corpus, FakeSettings(), "end_to_end", out, reader=lambda: other, **kwargs
    )
    assert result.elapsed_seconds is None and "R1.1" in result.error
    assert not out.exists()


@pytest.mark.parametrize("batch", [1, 3, 8])
def test_length_sorted_batches_still_write_corpus_order(setup, batch: int) -> None:
    backend, corpus, out, _, kwargs = setup
    settings = FakeSettings(batch=batch, batching="length_sorted")
    result = measure_pass(backend, corpus, settings, "processing", out, **kwargs)
    assert result.error is None
    rows = read_predictions(out)
    assert [r["id"] for r in rows] == list(corpus.ids)
    assert [r["label"] for r in rows] == expected_labels()


def test_injected_oom_is_a_failed_observation_r5_8(setup, monkeypatch) -> None:
    backend, corpus, out, log, kwargs = setup
    out.parent.mkdir(parents=True)
    out.write_text('{"id": "stale", "label": "even"}\n')  # e.g. from a warm-up pass
    monkeypatch.setenv("GPUBENCH_FAULT", "oom@batch:2")
    result = measure_pass(backend, corpus, FakeSettings(), "processing", out, **kwargs)
    assert result.elapsed_seconds is None  # empty, never 0
    assert result.error.startswith("OutOfMemoryError") and result.out_of_memory
    assert result.memory == MemoryReading(10, 20, 30, 40)  # the readings taken so far
    assert "R5.8" in result.notes[0] and "batch 2 of 3" in result.notes[0]
    assert log.count("predict") == 1  # batch 2 never ran
    assert not out.exists()  # a failed pass leaves no predictions file
    assert result.truncated_texts == 3  # tokenisation had happened


def test_exception_in_backend_is_kept_r3_6(setup) -> None:
    backend, corpus, out, _, kwargs = setup

    def broken(batch):
        raise ValueError("shape mismatch")

    backend.predict = broken
    result = measure_pass(backend, corpus, FakeSettings(), "end_to_end", out, **kwargs)
    assert result.elapsed_seconds is None
    assert result.error == "ValueError: shape mismatch"
    assert result.notes[0].startswith("R3.6 ValueError during batch 1 of 3")
    assert not out.exists()


def test_failure_before_the_probe_started_has_empty_memory(setup) -> None:
    backend, corpus, out, _, kwargs = setup
    kwargs["probe"] = MemoryProbe("cuda:0", api=object())  # would fail if ever read

    def broken(texts, context):
        raise RuntimeError("tokenizer gone")

    backend.tokenize = broken
    result = measure_pass(backend, corpus, FakeSettings(), "processing", out, **kwargs)
    assert result.error == "RuntimeError: tokenizer gone"
    assert "during tokenisation" in result.notes[0]
    assert result.memory.to_dict() == dict.fromkeys(result.memory.to_dict())
    assert result.truncated_texts is None


def test_wrong_prediction_count_is_caught_r1_5(setup) -> None:
    backend, corpus, out, _, kwargs = setup
    original = backend.predict
    backend.predict = lambda batch: original(batch)[:1]
    result = measure_pass(backend, corpus, FakeSettings(), "processing", out, **kwargs)
    assert result.error is not None and "R1.5" in result.error
    assert not out.exists()


def test_scoped_fault_fires_only_in_its_run(setup, monkeypatch) -> None:
    backend, corpus, out, _, kwargs = setup
    monkeypatch.setenv("GPUBENCH_FAULT", "error@batch:1@variant:b4@phase:warm")
    elsewhere = FaultPlan.from_env(variant="b1", phase="warm", run=1)
    assert measure_pass(
        backend, corpus, FakeSettings(), "processing", out, faults=elsewhere, **kwargs
    ).ok
    here = FaultPlan.from_env(variant="b4", phase="warm", run=1)
    result = measure_pass(backend, corpus, FakeSettings(), "processing", out, faults=here, **kwargs)
    assert result.error.startswith("InjectedFault") and "variant:b4" in result.error


def test_warmup_fault_does_not_fire_in_the_measured_pass(setup, monkeypatch) -> None:
    backend, corpus, out, _, kwargs = setup
    monkeypatch.setenv("GPUBENCH_FAULT", "error@batch:3@pass:warmup")
    assert measure_pass(backend, corpus, FakeSettings(), "processing", out, **kwargs).ok
    warm = measure_pass(
        backend, corpus, FakeSettings(), "processing", None, pass_kind="warmup", **kwargs
    )
    assert "batch 3 of 3" in warm.notes[0]


def test_delay_fault_sleeps_inside_the_timed_pass_and_succeeds(setup, monkeypatch) -> None:
    """Issue 24 §5: ``delay:S`` makes a genuinely slow run, timed, not failed (R3.6)."""
    backend, corpus, out, log, kwargs = setup
    clock = kwargs["clock"]

    def fake_sleep(seconds: float) -> None:
        log.append(f"sleep {seconds}")
        clock.now += round(seconds * 1e9)

    monkeypatch.setattr(faults_module.time, "sleep", fake_sleep)
    monkeypatch.setenv("GPUBENCH_FAULT", "delay:1.5@batch:2@variant:b4@phase:warm@run:3")
    here = FaultPlan.from_env(variant="b4", phase="warm", run=3)
    result = measure_pass(backend, corpus, FakeSettings(), "processing", out, faults=here, **kwargs)
    assert result.ok and read_predictions(out)[0]["id"] == "id00"
    start = log.index("clock(file=no)")
    timed = log[start : log.index("clock(file=no)", start + 1) + 1]  # between the two readings
    assert timed[1:4] == ["predict", "sleep 1.5", "predict"]  # just before batch 2's predict
    assert result.elapsed_seconds == pytest.approx(0.25 + 1.5)  # the fake clock's tick + delay
    assert "delay:1.5@batch:2@variant:b4@phase:warm@run:3" in here.describe()  # in the notes
    log.clear()
    other = FaultPlan.from_env(variant="b4", phase="warm", run=2)
    assert measure_pass(
        backend, corpus, FakeSettings(), "processing", out, faults=other, **kwargs
    ).ok
    assert not [entry for entry in log if entry.startswith("sleep")]


def test_unknown_scope_is_refused_r3_1(setup) -> None:
    backend, corpus, out, _, kwargs = setup
    with pytest.raises(ValueError, match="R3.1"):
        measure_pass(backend, corpus, FakeSettings(), "everything", out, **kwargs)


# --- the fault grammar (gpubench_nb/engine/faults.py) ---------------------------------------------


def test_parse_full_grammar() -> None:
    faults = parse_faults(" oom@batch:3 ; crash@load@variant:b8@run:2;hang@batch:1@pass:any ")
    assert faults == (
        Fault("oom", "batch", batch=3, spec="oom@batch:3"),
        Fault("crash", "load", variant="b8", run=2, spec="crash@load@variant:b8@run:2"),
        Fault("hang", "batch", batch=1, pass_kind="any", spec="hang@batch:1@pass:any"),
    )
    assert parse_faults("") == () and parse_faults(None) == ()
    (delay,) = parse_faults("delay:1.5@batch:1@variant:b64@phase:warm@run:3")
    assert (delay.kind, delay.seconds, delay.batch, delay.variant, delay.phase, delay.run) == (
        "delay", 1.5, 1, "b64", "warm", 3,
    )  # fmt: skip


@pytest.mark.parametrize(
    "spec, why",
    [
        ("boom@batch:1", "kind"),
        ("oom", "SITE"),
        ("oom@batch:0", "positive"),
        ("oom@batch:x", "positive"),
        ("oom@step:1", "site"),
        ("oom@batch:1@phase:hot", "phase"),
        ("oom@batch:1@color:red", "unknown filter"),
        ("oom@batch:1@run", "KEY:VALUE"),
        ("oom@batch:1@pass:sometimes", "pass"),
        ("delay@batch:1", "SECONDS > 0"),
        ("delay:0@batch:1", "SECONDS > 0"),
        ("delay:-1@batch:1", "SECONDS > 0"),
        ("delay:nan@batch:1", "SECONDS > 0"),
        ("delay:inf@batch:1", "SECONDS > 0"),
        ("delay:1e9@batch:1", "SECONDS > 0"),
        ("delay:soon@batch:1", "SECONDS > 0"),
        ("oom:2@batch:1", "takes no value"),
    ],
)
def test_bad_fault_specs_are_protocol_errors(spec: str, why: str) -> None:
    with pytest.raises(FaultSpecError, match=why):
        parse_faults(spec)


def test_plan_filters_and_description() -> None:
    env = {"GPUBENCH_FAULT": "oom@batch:2@run:3;error@load@phase:cold"}
    plan = FaultPlan.from_env(variant="b1", phase="cold", run=3, environ=env)
    assert list(plan.batch_faults()) == [2]
    assert plan.batch_faults("warmup") == {}
    assert plan.load_fault().kind == "error"
    assert "oom@batch:2@run:3" in plan.describe()
    other = FaultPlan.from_env(variant="b1", phase="warm", run=1, environ=env)
    assert other.batch_faults() == {} and other.load_fault() is None and other.describe() == ""
    unknown = FaultPlan.from_env(environ={"GPUBENCH_FAULT": "oom@batch:1@variant:b4"})
    assert unknown.batch_faults() == {}  # a scoped fault never fires where the scope is unknown


def test_trigger_oom_and_error() -> None:
    with pytest.raises(torch.cuda.OutOfMemoryError, match="oom@batch:1"):
        trigger(parse_faults("oom@batch:1")[0], "batch 1")
    with pytest.raises(InjectedFault, match="at load"):
        trigger(parse_faults("error@load")[0], "load")


def test_crash_kills_the_process_like_a_dead_kernel() -> None:
    code = "from gpubench_nb.engine.faults import parse_faults, trigger; " + (
        "trigger(parse_faults('crash@batch:1')[0], 'x'); print('survived')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == CRASH_EXIT_CODE and "survived" not in proc.stdout


def test_hang_never_returns() -> None:
    code = "from gpubench_nb.engine.faults import parse_faults, trigger; " + (
        "trigger(parse_faults('hang@batch:1')[0], 'x')"
    )
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=1.5)


# --- issue 23 §5: asynchronous CUDA errors are located truthfully ----------------------------


@pytest.fixture
def no_pending(monkeypatch):
    """A real CUDA error lasts as long as the process; each test starts with none launched."""
    from gpubench_nb.engine import faults

    monkeypatch.setattr(faults, "_PENDING", [])


def test_async_cuda_error_is_located_at_the_synchronisation_not_at_batch_n(
    setup, monkeypatch, no_pending
) -> None:
    """The H200 case: an error injected at batch 2 was reported "during batch 5 of 5". A CUDA
    error surfaces at the next synchronisation, so the note says where it surfaced and which
    batches were launched since the last synchronisation (here 1-3), never "during batch 3"."""
    backend, corpus, out, log, kwargs = setup
    monkeypatch.delenv("CUDA_LAUNCH_BLOCKING", raising=False)
    monkeypatch.setenv("GPUBENCH_FAULT", "cudaerror@batch:2")
    result = measure_pass(backend, corpus, FakeSettings(), "processing", out, **kwargs)
    assert result.elapsed_seconds is None
    assert "CUDA error" in result.error
    assert log.count("predict") == 3  # batches 2 and 3 were launched after the failing kernel
    note = result.notes[0]
    assert note.startswith("R3.6 InjectedDeviceError during the synchronisation after batch 3")
    assert "launched in batches 1-3, since the last synchronisation" in note
    assert "CUDA_LAUNCH_BLOCKING=1" in note
    assert "during batch 3 of 3" not in note and not out.exists()


def test_under_launch_blocking_the_error_shows_at_its_own_batch(
    setup, monkeypatch, no_pending
) -> None:
    """With CUDA_LAUNCH_BLOCKING=1 (the diagnosis rerun) launches are synchronous: the error
    shows at batch 2 and no later batch runs."""
    backend, corpus, out, log, kwargs = setup
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    monkeypatch.setenv("GPUBENCH_FAULT", "cudaerror@batch:2")
    result = measure_pass(backend, corpus, FakeSettings(), "processing", out, **kwargs)
    assert log.count("predict") == 1
    assert "during batch 2 of 3 (a CUDA error; CUDA_LAUNCH_BLOCKING=1" in result.notes[0]


def test_an_error_raised_at_a_later_launch_names_the_batches_since_the_last_sync(
    setup, monkeypatch, no_pending
) -> None:
    """A real CUDA error may also surface when a later batch launches (sticky context): the
    note names that launch and every batch launched since the timer's synchronise."""
    backend, corpus, out, _, kwargs = setup
    monkeypatch.delenv("CUDA_LAUNCH_BLOCKING", raising=False)
    calls = {"n": 0}
    original = backend.predict

    def failing(batch):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return original(batch)

    backend.predict = failing
    result = measure_pass(backend, corpus, FakeSettings(), "processing", out, **kwargs)
    assert "during the launch of batch 3 of 3" in result.notes[0]
    assert "launched in batches 1-3" in result.notes[0]


def test_a_non_device_error_keeps_its_batch(setup, no_pending) -> None:
    """A Python exception is synchronous: "during batch 1 of 3" stays exact."""
    backend, corpus, out, _, kwargs = setup
    backend.predict = lambda batch: (_ for _ in ()).throw(ValueError("bad shape"))
    result = measure_pass(backend, corpus, FakeSettings(), "processing", out, **kwargs)
    assert result.notes[0].startswith("R3.6 ValueError during batch 1 of 3: failed")


# --- issue 23 §3: telemetry sampled outside the timed code path -------------------------------


class RecordingSampler:
    observable = True

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def start(self) -> None:
        self.log.append("sampler.start")

    def stop(self, span=None) -> None:
        self.log.append("sampler.stop")

    def summary(self) -> dict:
        return {"observable": True, "flags": ["throttled: clock-event reasons sw_power_cap"]}


@pytest.mark.parametrize("scope", ["processing", "end_to_end"])
def test_sampler_starts_before_the_timer_and_stops_after_it(setup, scope) -> None:
    backend, corpus, out, log, kwargs = setup
    result = measure_pass(
        backend, corpus, FakeSettings(), scope, out, sampler=RecordingSampler(log), **kwargs
    )
    start, stop = log.index("sampler.start"), log.index("sampler.stop")
    clocks = [i for i, entry in enumerate(log) if entry.startswith("clock")]
    assert start < log.index("sync") < clocks[0]  # started before the timer's synchronise
    assert stop > clocks[-1]  # stopped after the timer's last reading
    assert result.gpu_telemetry["flags"] == ["throttled: clock-event reasons sw_power_cap"]


def test_a_failed_pass_stops_its_sampler(setup, monkeypatch) -> None:
    backend, corpus, out, log, kwargs = setup
    monkeypatch.setenv("GPUBENCH_FAULT", "error@batch:2")
    result = measure_pass(
        backend, corpus, FakeSettings(), "processing", out, sampler=RecordingSampler(log), **kwargs
    )
    assert not result.ok and log.count("sampler.stop") == 1
    assert result.gpu_telemetry is not None


_SETTLE_PROBE = r"""
import gc, json, weakref
import torch  # a realistic heap: what every measuring kernel imports
from gpubench_nb.engine.measure import _settle

class Node:
    pass

def cycle():
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)

before = cycle()
kept = Node()
_settle()
walked = gc.get_objects()
first = {"collected": before() is None, "frozen": gc.get_freeze_count(),
         "walked_after": len(walked), "kept_frozen": all(o is not kept for o in walked)}
del walked
later = cycle()  # garbage made between passes is still collected by the next settle
_settle()
print(json.dumps({**first, "later_collected": later() is None}))
"""


def test_settle_collects_then_freezes_the_heap_it_leaves(tmp_path: Path) -> None:
    """Before each timer one collection (R3.1), then gc.freeze: the next settle walks only
    what was made since, not torch's heap again (issue 25: ~80 ms per pass on 2 cores). Cyclic
    garbage made before either settle is collected. In a fresh process, as in a kernel."""
    done = subprocess.run(
        [sys.executable, "-c", _SETTLE_PROBE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["collected"] and out["later_collected"]
    assert out["frozen"] > 10_000  # torch's objects and ours, out of later collections' walk
    assert out["walked_after"] < 1_000 and out["kept_frozen"]


def test_scopes_are_the_two_of_r3_1() -> None:
    assert set(SCOPES) == {"processing", "end_to_end"}
    assert check_scope("end_to_end") == "end_to_end"
    note = scope_note("end_to_end")
    assert note.startswith("scope=end_to_end") and "reading" in note
    assert "excluded" in scope_note("processing")
    with pytest.raises(ValueError, match="R3.1"):
        check_scope("wallclock")

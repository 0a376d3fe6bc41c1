"""engine.optimise: threads, attention, quantisation and torch.compile applied to a loaded
model, verified, timed apart (R2.1, R3.2), and what this machine cannot run refused."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from gpubench_nb.engine import optimise
from gpubench_nb.engine.backends import load_backend
from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.experiment_spec import ModelSpec, Settings, TokenizerSpec, Variant
from gpubench_nb.protocol.records import OptimisationPart
from tests.support.models import quick_compiles, tiny_bert_folder

CLASSES = ("admin", "games", "mail")
TEXTS = ["mail server for the web", "a game of chess", "backup tool", "send and read mail"]
SETTINGS = Settings(precision="fp32", context=32, batch=2, device="cpu", batching="corpus_order")


@pytest.fixture
def hf(tmp_path):
    folder = tiny_bert_folder(tmp_path / "hf", dict(enumerate(CLASSES)))
    return load_backend(
        ModelSpec(backend="hf", path=folder),
        TokenizerSpec(path=folder),
        classes=CLASSES,
        device="cpu",
        precision="fp32",
    )


def _batches(backend):
    return backend.batches(backend.tokenize(TEXTS, 32), 2, "corpus_order")


def _predict(backend) -> list[int]:
    return [i for b in _batches(backend) for i in backend.predict(b).tolist()]


def test_threads_are_enforced_and_recorded_then_restored(monkeypatch) -> None:
    for name in optimise.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    before = torch.get_num_threads()
    try:
        state = optimise.apply_threads(1)
        assert state["intra_op"] == torch.get_num_threads() == 1
        assert state["OMP_NUM_THREADS"] == state["MKL_NUM_THREADS"] == "1"
        assert "intra-op 1" in optimise.threads_text(state)
    finally:
        torch.set_num_threads(before)
    for name in optimise.THREAD_VARIABLES:
        monkeypatch.delenv(name)
    auto = optimise.apply_threads("auto")
    assert auto["declared"] == "auto" and auto["intra_op"] == before
    assert auto["OMP_NUM_THREADS"] is None  # recorded as unset, never set by "auto"


def test_int8_dynamic_quantises_every_linear_outside_the_load(hf) -> None:
    plain = _predict(hf)
    before = optimise.weight_bytes(hf.module)
    linears = sum(isinstance(m, torch.nn.Linear) for m in hf.module.modules())
    settings = replace(SETTINGS, quantization="int8_dynamic")
    done = optimise.apply_optimisations(hf, settings, lambda: _batches(hf)[0], torch.device("cpu"))
    assert done.quantization == "int8_dynamic" and done.quantized_layers == linears
    assert done.quantize_seconds is not None and done.compile_seconds is None
    assert done.weight_bytes is not None and done.weight_bytes < before  # int8 packed weights
    assert done.attention == hf.module.config._attn_implementation
    assert "quantization int8_dynamic" in done.note()
    quantised = _predict(hf)
    assert len(quantised) == len(plain) and all(0 <= i < len(CLASSES) for i in quantised)


def test_attention_is_set_and_read_back(hf) -> None:
    done = optimise.apply_optimisations(
        hf, replace(SETTINGS, attention="eager"), lambda: None, torch.device("cpu")
    )
    assert done.attention == "eager" == hf.module.config._attn_implementation
    assert done.quantize_seconds is None and done.compile_seconds is None


def test_a_model_with_no_linear_layer_is_refused() -> None:
    backend = SimpleNamespace(module=torch.nn.Sequential(torch.nn.ReLU()))
    settings = replace(SETTINGS, quantization="int8_dynamic")
    with pytest.raises(BackendError, match="found no Linear layer"):
        optimise.apply_optimisations(backend, settings, lambda: None, torch.device("cpu"))


@pytest.mark.slow
def test_compile_is_timed_on_one_batch_in_an_isolated_cache(hf, monkeypatch) -> None:
    for name in optimise.CACHE_VARIABLES:
        monkeypatch.setenv(name, os.environ.get(name, ""))  # restored after the test
    plain = _predict(hf)
    settings = replace(SETTINGS, compile="default")
    with quick_compiles():  # here and for the predictions after it, which may recompile
        done = optimise.apply_optimisations(
            hf, settings, lambda: _batches(hf)[0], torch.device("cpu")
        )
        assert done.compile == "default" and done.compiled_graphs >= 1
        assert done.compile_seconds is not None
        cache = Path(done.compiler_cache["dir"])
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(cache)
        assert done.compiler_cache["state_at_start"].startswith("empty")
        assert _predict(hf) == plain  # the compiled graph gives the same answers
        closed = optimise.close_compiler_cache(done.compiler_cache)
    assert closed["files_at_end"] > 0 and not cache.exists()


def _exp(**settings):
    s = replace(SETTINGS, **settings)
    return SimpleNamespace(
        variants=(Variant(id="v", settings=s, knob_value=None),),
        model=ModelSpec(backend="hf", path=Path("m")),
    )


def test_what_this_machine_lacks_is_named(monkeypatch) -> None:
    monkeypatch.setattr(optimise.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(optimise.shutil, "which", lambda name: None)
    assert optimise.unrunnable(_exp()) == []
    lacks = optimise.unrunnable(_exp(compile="default", attention="sdpa"))
    assert lacks == ["v: torch.compile on the CPU needs a C++ compiler (g++ or clang++) on PATH"]
    auto = optimise.unrunnable(_exp(device="auto", quantization="fp8", precision="bf16"))
    assert any("fp8 (torchao) is run on CUDA devices here" in p for p in auto)  # auto -> cpu
    assert any("needs the torchao package" in p for p in auto)
    assert optimise.unrunnable(_exp(device="cuda", quantization="fp8")) == []  # judged there


def test_optimise_phase_records_threads_and_the_optimisation(hf) -> None:
    settings = replace(SETTINGS, quantization="int8_dynamic")
    done = optimise.optimise_phase(hf, torch.device("cpu"), settings, TEXTS)
    assert done.backend is hf and done.events == ()
    assert done.record.threads["intra_op"] == torch.get_num_threads()
    assert done.record.optimisation["quantized_layers"] > 0
    assert done.facts[0].startswith("threads auto") and "int8_dynamic" in done.facts[-1]
    failed_load = optimise.optimise_phase(None, torch.device("cpu"), settings, TEXTS)
    assert failed_load.backend is None and failed_load.record == OptimisationPart(
        threads=failed_load.record.threads
    )
    assert failed_load.record.threads


def test_a_failed_optimisation_is_an_observation_not_a_time(hf) -> None:
    settings = replace(SETTINGS, attention="nonsense")
    failed = optimise.optimise_phase(hf, torch.device("cpu"), settings, TEXTS)
    assert failed.backend is None and failed.record.error.startswith("optimisation failed")
    assert failed.events[-1].startswith("R3.6 applying {'attention': 'nonsense'} failed")


def test_recompilations_say_whether_the_warm_up_covered_them(monkeypatch) -> None:
    for name in optimise.CACHE_VARIABLES:
        monkeypatch.setenv(name, os.environ.get(name, ""))  # restored after the test
    cache = optimise.isolated_compiler_cache()
    record = OptimisationPart(optimisation={"compiler_cache": cache})
    compiled = replace(SETTINGS, compile="default")
    monkeypatch.setattr(optimise, "graphs_compiled", lambda: 7)
    cold = optimise.finish_optimised(
        record, compiled, "cold", 6, SimpleNamespace(compiled_graphs=1)
    )
    assert cold.record.recompilations == 1 and cold.record.warmup_recompilations == 0
    assert "inside the cold pass" in cold.facts[-1]
    assert cold.record.optimisation["compiler_cache"]["files_at_end"] == 0
    assert not Path(cache["dir"]).exists()  # per run: removed once measured
    warm = optimise.finish_optimised(
        OptimisationPart(), compiled, "warm", 5, SimpleNamespace(compiled_graphs=0)
    )
    assert warm.record.warmup_recompilations == 2 and "warm-up covered them" in warm.facts[-1]
    plain = optimise.finish_optimised(
        OptimisationPart(), SETTINGS, "warm", 5, SimpleNamespace(compiled_graphs=0)
    )
    assert plain.record == OptimisationPart() and plain.facts == ()


def test_a_compile_that_compiled_no_graph_fails_the_run_r2_1(hf, monkeypatch) -> None:
    """TORCH_COMPILE_DISABLE=1 turns torch.compile into a no-op: the run used to record
    compile_seconds and 0 graphs and be sealed as compiled."""
    import torch._dynamo

    for name in optimise.CACHE_VARIABLES:
        monkeypatch.setenv(name, os.environ.get(name, ""))  # restored after the test
    monkeypatch.setenv("TORCH_COMPILE_DISABLE", "1")
    monkeypatch.setattr(torch._dynamo.config, "disable", True)  # as torch read it at import
    settings = replace(SETTINGS, compile="default")
    failed = optimise.optimise_phase(hf, torch.device("cpu"), settings, TEXTS)
    assert failed.backend is None
    said = "R2.1: compile default was declared but torch.compile compiled no graph in this process"
    assert f"{said} (TORCH_COMPILE_DISABLE=1)" in str(failed.record)

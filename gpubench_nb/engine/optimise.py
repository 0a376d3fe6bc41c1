"""How a loaded model is run (R2.1): CPU threads, attention, quantisation and torch.compile,
each applied as declared, verified, and timed apart from the load and the passes (R3.2)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpubench_nb.engine.backends.base import resolve_device
from gpubench_nb.engine.memory import (
    NOT_RECORDED,
    MemoryReading,
    failure_text,
    is_out_of_memory,
    probe_for,
)
from gpubench_nb.engine.timing import Stopwatch, synchronizer
from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.experiment_rules import optimisation_problems

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
# torchao's configuration class of each CUDA scheme (torchao.quantization.quantize_).
TORCHAO_CONFIGS = {
    "int8_weight_only": "Int8WeightOnlyConfig",
    "int4_weight_only": "Int4WeightOnlyConfig",
    "fp8": "Float8DynamicActivationFloat8WeightConfig",
}
CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def thread_variables(declared: int | str) -> None:
    """Set OMP/MKL_NUM_THREADS before torch is imported, so its pools start at that size."""
    if declared != "auto":
        os.environ.update({name: str(declared) for name in THREAD_VARIABLES})


def apply_threads(declared: int | str) -> dict[str, Any]:
    """Enforce the declared CPU threads (``auto``: unchanged), then record torch's pools and the
    OMP/MKL variables; an intra-op pool at another size is a BackendError (R2.1)."""
    import torch

    if declared != "auto":
        thread_variables(declared)
        torch.set_num_threads(int(declared))
        # the inter-op pool cannot change once it ran work here: then recorded as it is
        with contextlib.suppress(RuntimeError):
            torch.set_num_interop_threads(int(declared))
    state = {
        "declared": declared,
        "intra_op": torch.get_num_threads(),
        "inter_op": torch.get_num_interop_threads(),
        **{name: os.environ.get(name) for name in THREAD_VARIABLES},
        "cpu_count": os.cpu_count(),
    }
    verify_applied({"threads": declared}, state)
    return state


# R2.1: each declared setting is verified in the kernel that applied it, by its own entry: what
# applying it recorded, and whether that shows it applied. A runtime adds its own entry.
APPLIED_CHECKS: dict[str, tuple[str, Callable[[Any, Any], bool]]] = {
    "threads": ("intra_op", lambda declared, got: declared in ("auto", got)),
    "attention": ("attention", lambda declared, got: declared in ("auto", got) or got is None),
    "quantization": ("quantized_layers", lambda declared, got: declared == "none" or bool(got)),
    "compile": ("compiled_graphs", lambda declared, got: declared == "none" or bool(got)),
}


def verify_applied(declared: Mapping[str, Any], applied: Mapping[str, Any]) -> None:
    """A BackendError naming each ``declared`` setting that ``applied`` shows was not (R2.1)."""
    checks = [(name, value, *APPLIED_CHECKS[name]) for name, value in declared.items()]
    found = [f"{n} {v} was declared but {k} is {applied.get(k)!r}" for n, v, k, holds in checks
             if not holds(v, applied.get(k))]  # fmt: skip
    if found:
        off = os.environ.get("TORCH_COMPILE_DISABLE")
        raise BackendError(
            f"{'; '.join(found)} in this process{f' (TORCH_COMPILE_DISABLE={off})' * bool(off)}; "
            "fix: remove what stops it, or declare what runs here (auto, none)",
            rule="R2.1",
        )


def threads_text(state: dict[str, Any]) -> str:
    """The threads of a run, for its notes."""
    env = " ".join(f"{n}={state.get(n) or 'unset'}" for n in THREAD_VARIABLES)
    return (
        f"threads {state.get('declared')}: torch intra-op {state.get('intra_op')}, inter-op "
        f"{state.get('inter_op')}, {env}, {state.get('cpu_count')} CPUs visible"
    )


@dataclass(frozen=True)
class Optimised:
    """What applying the declared optimisations did (R2.1): seconds of their own, outside the
    load and every pass (R3.2), the step's memory readings (R3.8) and the weights after it."""

    attention: str | None = None  # the implementation the model runs (transformers models)
    quantization: str = "none"
    quantized_layers: int | None = None
    quantize_seconds: float | None = None
    compile: str = "none"
    compile_seconds: float | None = None
    compiled_graphs: int | None = None  # graphs compiled by the compile step
    compiler_cache: dict[str, Any] | None = None
    weight_bytes: int | None = None
    memory: dict[str, Any] = field(default_factory=NOT_RECORDED.to_dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def note(self) -> str:
        """One `notes` item: the settings applied and their own seconds (R3.2)."""
        parts = [f"attention {self.attention or 'not applicable'}"]
        if self.quantization != "none":
            parts.append(
                f"quantization {self.quantization} ({self.quantized_layers} Linear layers, "
                f"{self.quantize_seconds:.3f} s outside the load clock)"
            )
        if self.compile != "none":
            cache = (self.compiler_cache or {}).get("state_at_start", "not recorded")
            parts.append(
                f"torch.compile mode {self.compile} ({self.compile_seconds:.3f} s for "
                f"{self.compiled_graphs} graph(s) on the first batch, outside the load clock "
                f"and every pass; compiler cache {cache})"
            )
        return "R2.1 model run with " + ", ".join(parts)


@dataclass(frozen=True)
class Outcome:
    """The backend to measure (None after a failure), run.json fields, notes' facts and events."""

    backend: Any = None
    record: dict[str, Any] = field(default_factory=dict)
    facts: tuple[str, ...] = ()
    events: tuple[str, ...] = ()


def optimise_phase(backend: Any, device: Any, settings: Any, texts: Sequence[str]) -> Outcome:
    """Threads and optimisations applied to the loaded ``backend`` (None: a failed load); a
    failure is an observation (R3.6, out of memory R5.8): recorded, no backend, no pass."""
    record: dict[str, Any] = {}
    facts: tuple[str, ...] = ()
    try:
        record["threads"] = apply_threads(settings.threads)
        facts += (threads_text(record["threads"]),)
        if backend is None:
            return Outcome(None, record, facts)

        def sample() -> Any:
            tokenized = backend.tokenize(list(texts[: settings.batch]), settings.context)
            return backend.batches(tokenized, settings.batch, settings.batching)[0]

        done = apply_optimisations(backend, settings, sample, device)
    except Exception as exc:  # not applied as declared: an observation, never a time
        record["error"] = f"optimisation failed: {failure_text(exc)}"
        record["out_of_memory"] = is_out_of_memory(exc)
        rule = "R5.8 out of memory" if record["out_of_memory"] else "R3.6"
        event = f"{rule} applying {settings.optimisations()} failed: no pass was run"
        return Outcome(None, record, facts, (event,))
    record["optimisation"] = done.to_dict()
    return Outcome(backend, record, (*facts, done.note()))


def finish_optimised(
    record: dict[str, Any], settings: Any, phase: str, before: int | None, result: Any
) -> Outcome:
    """After the passes: the compiler cache measured and removed, and the graphs compiled in
    the measured pass and the warm-up (R3.2). ``record``: run.json's fields so far."""
    out: dict[str, Any] = {}
    done = record.get("optimisation")
    if done and done.get("compiler_cache"):
        cache = close_compiler_cache(done["compiler_cache"])
        out["optimisation"] = {**done, "compiler_cache": cache}
    measured = getattr(result, "compiled_graphs", None)
    if settings.compile == "none" or measured is None:
        return Outcome(record=out)
    warmup = (graphs_compiled() or 0) - (before or 0) - measured
    out.update(recompilations=measured, warmup_recompilations=warmup)
    text = f"recompilations: {measured} graph(s) compiled during the measured pass"
    if phase == "cold":
        text += " (their compile time is inside the cold pass, R3.2)"
    else:
        covered = "did not cover" if measured else "covered"
        text += f", {warmup} during the warm-up: the declared warm-up {covered} them (R3.2)"
    return Outcome(record=out, facts=(text,))


def graphs_compiled() -> int | None:
    """Graphs torch.compile has compiled in this process so far; None when it never ran."""
    if "torch._dynamo" not in sys.modules:
        return None
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def isolated_compiler_cache() -> dict[str, Any]:
    """A new, empty inductor/triton cache for this run: a cold run compiles from nothing (R3.7)."""
    folder = Path(tempfile.mkdtemp(prefix="gpubench-compile-"))
    for name, path in zip(CACHE_VARIABLES, (folder, folder / "triton"), strict=True):
        os.environ[name] = str(path)
    return {"dir": str(folder), "state_at_start": f"empty (new folder {folder})"}


def close_compiler_cache(cache: dict[str, Any]) -> dict[str, Any]:
    """The cache's size at the end of the run, then the folder removed (it is per run)."""
    folder = Path(cache["dir"])
    sizes = []
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):  # compiler workers may still rename their files
            if path.is_file():
                sizes.append(path.stat().st_size)
    shutil.rmtree(folder, ignore_errors=True)
    return {**cache, "files_at_end": len(sizes), "bytes_at_end": sum(sizes)}


def _attention(module: Any, declared: str) -> str | None:
    """Set and read back the transformers attention implementation; None for other models."""
    if "transformers" not in sys.modules:
        return None
    from transformers import PreTrainedModel

    model = next((m for m in module.modules() if isinstance(m, PreTrainedModel)), None)
    if model is None:
        return None
    if declared != "auto":
        model.set_attn_implementation(declared)
    return model.config._attn_implementation


def _quantize(module: Any, scheme: str) -> tuple[Any, int]:
    """``module`` with its Linear layers quantised by ``scheme``, and how many were."""
    import torch

    if scheme == "int8_dynamic":
        with warnings.catch_warnings():  # torch.ao's own deprecation notices, not ours
            warnings.simplefilter("ignore")
            module = torch.ao.quantization.quantize_dynamic(
                module, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
            )
        kind = torch.ao.nn.quantized.dynamic.Linear
        return module, sum(isinstance(m, kind) for m in module.modules())
    import torchao.quantization as tq

    tq.quantize_(module, getattr(tq, TORCHAO_CONFIGS[scheme])())
    linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    return module, sum(type(m.weight).__module__.startswith("torchao") for m in linears)


def weight_bytes(module: Any) -> int:
    """Bytes of the module's state (packed quantised weights included), each tensor once."""
    import torch

    seen: dict[tuple[int, int], int] = {}
    stack = list(module.state_dict().values())
    while stack:
        value = stack.pop()
        if isinstance(value, tuple | list):
            stack.extend(value)
        elif isinstance(value, torch.Tensor):
            seen[(value.data_ptr(), value.numel())] = value.numel() * value.element_size()
    return sum(seen.values())


def apply_optimisations(
    backend: Any, settings: Any, sample: Callable[[], Any], device: Any
) -> Optimised:
    """Apply the declared attention, quantisation and compile mode, timed apart (R3.2) inside
    one memory probe (R3.8); ``sample()``: the batch torch.compile compiles on."""
    attention = _attention(backend.module, settings.attention)
    scheme, mode = settings.quantization, settings.compile
    declared = {"attention": settings.attention, "quantization": scheme, "compile": mode}
    if scheme == "none" and mode == "none":
        verify_applied(declared, {"attention": attention})
        return Optimised(attention=attention)
    probe = probe_for(device)
    watch = Stopwatch(sync=synchronizer(device))
    probe.begin()
    done: dict[str, Any] = {"attention": attention, "quantization": scheme, "compile": mode}
    if scheme != "none":
        watch.start()
        backend.module, done["quantized_layers"] = _quantize(backend.module, scheme)
        done["quantize_seconds"] = watch.stop()
    if mode != "none":
        done["compiler_cache"] = isolated_compiler_cache()
        batch = sample()
        before = graphs_compiled() or 0
        watch.start()
        with warnings.catch_warnings():  # torch's own deprecation notices while it compiles
            warnings.simplefilter("ignore", DeprecationWarning)
            backend.module.compile(mode=mode)
            backend.predict(batch)
        done["compile_seconds"] = watch.stop()
        done["compiled_graphs"] = (graphs_compiled() or 0) - before
    verify_applied(declared, done)
    memory: MemoryReading = probe.end()
    return Optimised(**done, weight_bytes=weight_bytes(backend.module), memory=memory.to_dict())


def refuse_unrunnable(exp: Any) -> None:
    """A BackendError listing every declared optimisation this machine cannot run (R2.1)."""
    problems = unrunnable(exp)
    if problems:
        raise BackendError(
            f"{exp.source}: this machine cannot run what is declared: " + "; ".join(problems),
            rule="R2.1",
        )


def unrunnable(exp: Any) -> list[str]:
    """The declared optimisations this machine cannot run, with reason and fix (R2.1)."""
    problems: list[str] = []
    for variant in exp.variants:
        s = variant.settings
        if not s.optimisations() or s.optimisations().keys() == {"threads"}:
            continue
        try:
            device = resolve_device(s.device)
        except BackendError:  # no such device here (a login node): judged where it runs
            continue
        resolved = type(s)(**{**asdict(s), "device": device.type})
        problems += [
            f"{variant.id}: {p}; fix: {f}"
            for _, p, f in optimisation_problems(resolved, exp.model.backend)
        ]
        problems += [f"{variant.id}: {p}" for p in _missing(s, device)]
    return list(dict.fromkeys(problems))


def _missing(s: Any, device: Any) -> list[str]:
    """The packages, compiler or GPU capability the settings ``s`` need on ``device``."""
    import torch

    found = []
    if s.quantization in TORCHAO_CONFIGS and importlib.util.find_spec("torchao") is None:
        found.append(
            f"quantization {s.quantization} needs the torchao package (pip install torchao)"
        )
    capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    if s.quantization == "fp8" and capability is not None and capability < (8, 9):
        name = torch.cuda.get_device_name(device)
        found.append(f"fp8 needs compute capability 8.9 or later; {name} has {capability}")
    if s.attention == "flash_attention_2" and importlib.util.find_spec("flash_attn") is None:
        found.append("flash_attention_2 needs the flash-attn package (pip install flash-attn)")
    if (
        s.compile != "none"
        and device.type == "cpu"
        and not any(shutil.which(c) for c in (os.environ.get("CXX", "g++"), "g++", "clang++"))
    ):
        found.append("torch.compile on the CPU needs a C++ compiler (g++ or clang++) on PATH")
    if s.compile != "none" and device.type == "cuda" and importlib.util.find_spec("triton") is None:
        found.append("torch.compile on CUDA needs the triton package")
    return found

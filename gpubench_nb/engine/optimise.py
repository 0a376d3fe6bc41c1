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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
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
from gpubench_nb.protocol.capabilities import SETTING_SPECS, refusals
from gpubench_nb.protocol.records import OptimisationPart

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
    if declared != "auto" and state["intra_op"] != declared:
        raise BackendError(
            f"threads {declared} was declared but torch runs {state['intra_op']} intra-op "
            "threads in this process; fix: declare threads: auto",
            rule="R2.1",
        )
    return state


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
    more: dict[str, Any] = field(default_factory=dict)  # the other settings' fields
    said: tuple[str, ...] = ()  # one phrase per setting applied, for the notes

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["said"]
        return {**out, **out.pop("more")}

    def note(self) -> str:
        """One `notes` item: the settings applied and their own seconds (R3.2)."""
        return "R2.1 model run with " + ", ".join(self.said)


@dataclass
class Step:
    """What the function a setting declares (protocol.capabilities ``apply``) works on: the
    loaded backend (it may replace its module, or itself), the variant's settings, the device,
    ``sample()`` (a batch to run once) and the step's stopwatch (R3.2)."""

    backend: Any
    settings: Any
    device: Any
    sample: Callable[[], Any]
    watch: Stopwatch


Applied = tuple[dict[str, Any], str | None]  # run.json's optimisation fields, the notes' phrase


@dataclass(frozen=True)
class Outcome:
    """The backend to measure (None after a failure), run.json fields, notes' facts and events."""

    backend: Any = None
    record: OptimisationPart = field(default_factory=OptimisationPart)
    facts: tuple[str, ...] = ()
    events: tuple[str, ...] = ()


def optimise_phase(backend: Any, device: Any, settings: Any, texts: Sequence[str]) -> Outcome:
    """Threads and optimisations applied to the loaded ``backend`` (None: a failed load); a
    failure is an observation (R3.6, out of memory R5.8): recorded, no backend, no pass."""
    threads: dict[str, Any] = {}
    facts: tuple[str, ...] = ()
    try:
        threads = apply_threads(settings.threads)
        facts += (threads_text(threads),)
        if backend is None:
            return Outcome(None, OptimisationPart(threads=threads), facts)

        def sample() -> Any:
            tokenized = backend.tokenize(list(texts[: settings.batch]), settings.context)
            return backend.batches(tokenized, settings.batch, settings.batching)[0]

        done = apply_optimisations(backend, settings, sample, device)
    except Exception as exc:  # not applied as declared: an observation, never a time
        error = f"optimisation failed: {failure_text(exc)}"
        oom = is_out_of_memory(exc)
        failed = OptimisationPart(threads=threads or None, error=error, out_of_memory=oom)
        event = f"{'R5.8 out of memory' if oom else 'R3.6'} applying {settings.optimisations()}"
        return Outcome(None, failed, facts, (f"{event} failed: no pass was run",))
    applied = OptimisationPart(threads=threads, optimisation=done.to_dict())
    return Outcome(backend, applied, (*facts, done.note()))


def finish_optimised(
    record: OptimisationPart, settings: Any, phase: str, before: int | None, result: Any
) -> Outcome:
    """After the passes: the compiler cache measured and removed, and the graphs compiled in
    the measured pass and the warm-up (R3.2). ``record``: what optimise_phase applied."""
    out = OptimisationPart()
    done = record.optimisation
    if done and done.get("compiler_cache"):
        cache = close_compiler_cache(done["compiler_cache"])
        out = OptimisationPart(optimisation={**done, "compiler_cache": cache})
    measured = getattr(result, "compiled_graphs", None)
    if settings.compile == "none" or measured is None:
        return Outcome(record=out)
    warmup = (graphs_compiled() or 0) - (before or 0) - measured
    out = replace(out, recompilations=measured, warmup_recompilations=warmup)
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


def apply_attention(step: Step, declared: str) -> Applied:
    """Set and read back the transformers attention implementation (None for other models)."""
    applied = None
    if "transformers" in sys.modules:
        from transformers import PreTrainedModel

        modules = step.backend.module.modules()
        model = next((m for m in modules if isinstance(m, PreTrainedModel)), None)
        if model is not None:
            if declared != "auto":
                model.set_attn_implementation(declared)
            applied = model.config._attn_implementation
            if declared != "auto" and applied != declared:
                raise BackendError(
                    f"attention {declared} was declared but {type(model).__name__} runs "
                    f"{applied} (it cannot switch implementation); fix: declare attention: auto",
                    rule="R2.1",
                )
    return {"attention": applied}, f"attention {applied or 'not applicable'}"


def apply_quantization(step: Step, scheme: str) -> Applied:
    """The Linear layers of the backend's module quantised by ``scheme``, timed apart (R3.2)."""
    import torch

    if scheme == "none":
        return {}, None
    if hasattr(step.backend, "quantize"):  # a runtime quantising its own graph (onnxruntime)
        return step.backend.quantize(step, scheme)
    step.watch.start()
    module = step.backend.module
    if scheme == "int8_dynamic":
        with warnings.catch_warnings():  # torch.ao's own deprecation notices, not ours
            warnings.simplefilter("ignore")
            module = torch.ao.quantization.quantize_dynamic(
                module, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
            )
        kind = torch.ao.nn.quantized.dynamic.Linear
        layers = sum(isinstance(m, kind) for m in module.modules())
    else:
        import torchao.quantization as tq

        tq.quantize_(module, getattr(tq, TORCHAO_CONFIGS[scheme])())
        linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
        layers = sum(type(m.weight).__module__.startswith("torchao") for m in linears)
    step.backend.module = module
    seconds = step.watch.stop()
    if not layers:
        raise BackendError(f"quantization {scheme} found no Linear layer to quantise")
    said = f"quantization {scheme} ({layers} Linear layers, {seconds:.3f} s outside the load clock)"
    return {"quantization": scheme, "quantized_layers": layers, "quantize_seconds": seconds}, said


def apply_compile(step: Step, mode: str) -> Applied:
    """torch.compile of the backend's module, compiled on one sample batch in an empty cache,
    timed apart from the load and every pass (R3.2, R3.7)."""
    if mode == "none":
        return {}, None
    cache = isolated_compiler_cache()
    batch = step.sample()
    before = graphs_compiled() or 0
    step.watch.start()
    with warnings.catch_warnings():  # torch's own deprecation notices while it compiles
        warnings.simplefilter("ignore", DeprecationWarning)
        step.backend.module.compile(mode=mode)
        step.backend.predict(batch)
    seconds = step.watch.stop()
    graphs = (graphs_compiled() or 0) - before
    if not graphs:  # R2.1: verified here; TORCH_COMPILE_DISABLE=1 makes compile a no-op
        off = f" (TORCH_COMPILE_DISABLE={os.environ.get('TORCH_COMPILE_DISABLE')})"
        raise BackendError(
            f"compile {mode} was declared but torch.compile compiled no graph in this process"
            f"{off * ('TORCH_COMPILE_DISABLE' in os.environ)}; fix: let it compile, or declare "
            "compile: none",
            rule="R2.1",
        )
    said = (
        f"torch.compile mode {mode} ({seconds:.3f} s for {graphs} graph(s) on the first batch, "
        f"outside the load clock and every pass; compiler cache {cache['state_at_start']})"
    )
    fields = {"compile": mode, "compile_seconds": seconds, "compiled_graphs": graphs}
    return {**fields, "compiler_cache": cache}, said


def weight_bytes(module: Any) -> int:
    """Bytes of the module's state (packed quantised weights included), each tensor once."""
    import torch

    if hasattr(module, "weight_bytes"):  # a runtime's graph (onnxruntime)
        return module.weight_bytes
    seen: dict[tuple[int, int], int] = {}
    stack = list(module.state_dict().values())
    while stack:
        value = stack.pop()
        if isinstance(value, tuple | list):
            stack.extend(value)
        elif isinstance(value, torch.Tensor):
            seen[(value.data_ptr(), value.numel())] = value.numel() * value.element_size()
    return sum(seen.values())


def _function(path: str) -> Callable[..., Any]:
    """The engine function a declaration names as ``module:function``."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def apply_optimisations(
    backend: Any, settings: Any, sample: Callable[[], Any], device: Any
) -> Optimised:
    """Apply each declared setting's function (protocol.capabilities), in declaration order,
    timed apart (R3.2) inside one memory probe (R3.8) when any differs from its default;
    ``sample()``: a batch to run once (torch.compile compiles on it)."""
    applied = [s for s in SETTING_SPECS if s.apply]
    changed = any(getattr(settings, s.name) != s.default for s in applied)
    probe = getattr(backend, "probe", probe_for)(device)  # a runtime's own (R3.9)
    step = Step(backend, settings, device, sample, Stopwatch(sync=synchronizer(device)))
    if changed:
        probe.begin()
    done: dict[str, Any] = {}
    said = []
    for s in applied:
        fields, phrase = _function(s.apply)(step, getattr(settings, s.name))
        done.update(fields)
        said += [phrase] if phrase else []
    known = {k: done.pop(k) for k in list(done) if k in Optimised.__dataclass_fields__}
    if not changed:
        return Optimised(**known, more=done, said=tuple(said))
    memory: MemoryReading = probe.end()
    out = Optimised(**known, more=done, said=tuple(said), memory=memory.to_dict())
    return replace(out, weight_bytes=weight_bytes(step.backend.module))


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
            f"{variant.id}: {p}; fix: {f}" for _, p, f in refusals(resolved, exp.model.backend)
        ]
        problems += [f"{variant.id}: {p}" for p in _missing(s, device)]
    return list(dict.fromkeys(problems))


def _missing(s: Any, device: Any) -> list[str]:
    """The packages, compiler or GPU capability the settings ``s`` need on ``device``, as each
    setting declares them (protocol.capabilities: ``packages``, ``check``)."""
    found = []
    for setting in SETTING_SPECS:
        value = getattr(s, setting.name)
        if value == setting.default:
            continue
        package = setting.packages.get(value)
        if package and importlib.util.find_spec(package[0]) is None:
            found.append(f"{setting.name} {value} needs the {package[0]} package ({package[1]})")
        if setting.check:
            found += _function(setting.check)(s, device)
    return found


def fp8_capability(s: Any, device: Any) -> list[str]:
    """fp8 needs a GPU of compute capability 8.9 or later."""
    import torch

    if s.quantization != "fp8" or device.type != "cuda":
        return []
    capability = torch.cuda.get_device_capability(device)
    if capability >= (8, 9):
        return []
    name = torch.cuda.get_device_name(device)
    return [f"fp8 needs compute capability 8.9 or later; {name} has {capability}"]


def compiler_present(s: Any, device: Any) -> list[str]:
    """torch.compile needs a C++ compiler on the CPU, triton on CUDA."""
    compilers = (os.environ.get("CXX", "g++"), "g++", "clang++")
    if device.type == "cpu" and not any(shutil.which(c) for c in compilers):
        return ["torch.compile on the CPU needs a C++ compiler (g++ or clang++) on PATH"]
    if device.type == "cuda" and importlib.util.find_spec("triton") is None:
        return ["torch.compile on CUDA needs the triton package"]
    return []

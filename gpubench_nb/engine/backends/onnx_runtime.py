"""The onnxruntime runtime (R2.1): the declared model exported once, before the runs, by torch's
maintained exporter (torch.onnx, dynamo), quantised by onnxruntime where declared, its graphs
fingerprinted in the lock (R1.1); each run's load is the InferenceSession's creation (R3.2)."""

from __future__ import annotations

import contextlib
import importlib
import logging
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench_nb.engine.backends.base import Backend, Batch, LoadSpec, batch_order, padded_batches
from gpubench_nb.engine.memory import MemoryReading
from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.bundle import LOCK_NAME
from gpubench_nb.protocol.fingerprint import sha256_files
from gpubench_nb.protocol.records import Record, RuntimeRun

RUNTIME = "onnxruntime"
EXPORTER = "torch.onnx.export(dynamo=True)"  # torch.export-based, torch's default since 2.9
VERSIONS = ("torch", "onnx", "onnxscript", "onnxruntime")
OPSET = 18
FOLDER = "onnx"  # in the bundle: what every onnxruntime run of it reads
GRAPHS = {"none": "model.onnx", "int8_dynamic": "model.int8.onnx"}
COMPARED_ITEMS = 512  # the first eval items whose torch and onnxruntime fp32 answers are compared
RSS = "process RSS (/proc/self/status VmRSS; peak VmHWM, reset through /proc/self/clear_refs)"
NOT_OBSERVABLE = "not observable (onnxruntime's CUDA memory is outside torch's allocator, R3.9)"


@dataclass(frozen=True, kw_only=True)
class OnnxExport(Record):
    """``onnx/export.json``: how the bundle's graphs were made before the runs (R1.1, R3.2), and
    how far the fp32 graph's answers are from torch's on the first eval items."""

    NAME = "export.json"
    RULE = "R1.1"
    exporter: str
    versions: Mapping[str, Any]
    opset: int
    inputs: tuple[str, ...]
    dynamic_axes: Mapping[str, Any]  # each input's axes as the graph declares them
    export_seconds: float
    quantize_seconds: float | None = None  # onnxruntime.quantization.quantize_dynamic
    quantized_layers: int | None = None  # its integer matrix products
    model_revision: str
    pad_id: int | None = None  # None: bags of token IDs (bow), no padding
    max_context: int | None = None
    plain_tokenizer: bool = False
    compared_items: int
    answers_changed: int
    max_logit_difference: float


def uses_onnx(exp: Any) -> bool:
    return any(v.settings.runtime == RUNTIME for v in exp.variants)


def export_for(exp: Any, bundle_dir: Path, texts: list[str]) -> dict[str, str]:
    """The lock's ``onnx_revision``: the graphs the onnxruntime variants run, exported here once
    (a bundle resumed keeps its own); nothing when no variant declares onnxruntime (R1.1)."""
    if not uses_onnx(exp):
        return {}
    folder = Path(bundle_dir) / FOLDER
    if OnnxExport.read(folder) is None:
        if (Path(bundle_dir) / LOCK_NAME).exists():  # frozen without it: the lock says so
            return {"onnx_revision": "absent (not exported in this bundle)"}
        _export(exp, folder, texts)
    return {"onnx_revision": sha256_files(sorted(folder.glob("*.onnx")), folder)}


def environment(exp: Any, bundle_dir: Path, device: Any) -> dict[str, Any]:
    """environment.json's ``onnxruntime`` (R2.4): the versions, the providers this build offers
    and those a session of the bundle's graph runs on ``device``, the export's opset and axes."""
    if not uses_onnx(exp):
        return {}
    import onnxruntime

    folder = Path(bundle_dir) / FOLDER
    export = OnnxExport.read(folder)
    used = None if export is None else _session(folder / GRAPHS["none"], "auto", device)[0]
    return {"onnxruntime": {
        "versions": package_versions(),
        "available_providers": onnxruntime.get_available_providers(),
        "providers": None if used is None else used.get_providers(),
        "export": None if export is None else export.to_dict()}}  # fmt: skip


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The exporters' own notices (warnings, log lines) kept off the terminal."""
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(None):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(logging.NOTSET)


def _export(exp: Any, folder: Path, texts: list[str]) -> None:
    """The declared model in fp32 on the CPU, exported with dynamic axes, quantised where a
    variant declares int8_dynamic, then compared with torch on the first eval items."""
    import onnx
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from gpubench_nb.engine.backends.registry import load_backend

    torch_backend = load_backend(exp.model, exp.tokenizer, classes=exp.classes, device="cpu",
                                 precision="fp32")  # fmt: skip
    context = max(v.settings.context for v in exp.variants)
    tokens = torch_backend.tokenize(texts[:COMPARED_ITEMS], context)
    batches = torch_backend.batches(tokens, 16, "corpus_order")
    module, names = declared_logits(torch_backend), list(batches[0].tensors)
    sample = tuple(torch_backend.batches(torch_backend.tokenize(texts[:2], context), 2,
                                         "corpus_order")[0].tensors.values())  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    graph, started = folder / GRAPHS["none"], time.perf_counter()
    dynamic = tuple({d: torch.export.Dim.DYNAMIC for d in range(t.dim())} for t in sample)
    try:
        with _quiet():
            torch.onnx.export(module, sample, str(graph), input_names=names, opset_version=OPSET,
                              output_names=["logits"], dynamo=True, external_data=False,
                              dynamic_shapes=(dynamic,))  # fmt: skip
    except Exception as exc:  # the exporter's own errors are many; said in one line
        raise BackendError(f"{EXPORTER} of the {exp.model.backend} model failed: "
                           f"{str(exc).splitlines()[0][:300]}; fix: declare runtime: torch",
                           rule="R2.1") from None  # fmt: skip
    seconds, quantized, layers = time.perf_counter() - started, None, None
    if any(v.settings.quantization == "int8_dynamic" for v in exp.variants if _onnx(v)):
        started = time.perf_counter()
        with _quiet():
            quantize_dynamic(graph, folder / GRAPHS["int8_dynamic"], weight_type=QuantType.QInt8)
        quantized = time.perf_counter() - started
        nodes = onnx.load(folder / GRAPHS["int8_dynamic"]).graph.node
        layers = sum(n.op_type in ("MatMulInteger", "DynamicQuantizeMatMul") for n in nodes)
    session = _session(graph, "auto", torch.device("cpu"))[0]
    with torch.inference_mode():
        ours = torch.cat([module(*b.tensors.values()) for b in batches])
        theirs = torch.cat([session_logits(session, names, b.tensors) for b in batches])
    inputs = onnx.load(graph).graph.input
    axes = {
        i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in inputs
    }
    OnnxExport.write(folder, OnnxExport(
        exporter=EXPORTER, versions=package_versions(), opset=OPSET, inputs=tuple(names),
        dynamic_axes=axes, export_seconds=seconds, quantize_seconds=quantized,
        quantized_layers=layers,
        model_revision=torch_backend.model_revision, pad_id=_pad_id(torch_backend),
        max_context=torch_backend.max_context(), plain_tokenizer=torch_backend.plain_tokenizer,
        compared_items=len(ours), answers_changed=int((ours.argmax(-1) != theirs.argmax(-1)).sum()),
        max_logit_difference=float((ours - theirs).abs().max()),
    ))  # fmt: skip


def _onnx(variant: Any) -> bool:
    return variant.settings.runtime == RUNTIME


def _pad_id(backend: Any) -> int | None:
    """The id rows are padded with (a decoder classifier's own), None for bags (bow)."""
    if backend.name == "bow":
        return None
    decoder = getattr(backend, "_decoder", None)
    return backend.tokenizer.pad_id if decoder is None else decoder.pad_id


def declared_logits(backend: Any) -> Any:
    """The torch backend's forward as a module: its inputs in batch order, logits in the
    declared class order (the graph's labels are the declared classes, R1.3)."""
    import torch

    class DeclaredLogits(torch.nn.Module):
        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            names = ("input_ids", "offsets" if backend.name == "bow" else "attention_mask")
            logits = backend.forward(dict(zip(names, tensors, strict=True)))
            columns = getattr(backend, "_columns", None)
            return logits if columns is None else logits.index_select(1, columns)

    return DeclaredLogits().eval()


def session_logits(session: Any, names: list[str], tensors: Mapping[str, Any]) -> Any:
    """One batch through the session: host arrays in (a CUDA provider copies them to the device
    inside the run), logits back as a torch tensor."""
    import torch

    feed = {name: tensors[name].numpy(force=True) for name in names}
    return torch.from_numpy(session.run(None, feed)[0])


def package_versions() -> dict[str, str]:
    """The exporter's and the runtime's versions (onnxruntime-gpu reports as onnxruntime)."""
    return {name: importlib.import_module(name).__version__ for name in VERSIONS}


def _session(graph: Path, threads: int | str, device: Any) -> tuple[Any, list[str], Any]:
    """An InferenceSession of ``graph`` with the declared threads (intra- and inter-op), the
    providers asked for and its options."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads != "auto":
        options.intra_op_num_threads = options.inter_op_num_threads = int(threads)
    asked: list[Any] = ["CPUExecutionProvider"]
    if device.type == "cuda":
        asked.insert(0, ("CUDAExecutionProvider", {"device_id": device.index or 0}))
    return ort.InferenceSession(str(graph), options, providers=asked), asked, options


class OnnxBackend(Backend):
    """The bundle's exported graph run by onnxruntime: the torch backend's tokenizer and batches,
    an InferenceSession in place of the module (created inside the load clock, R3.2)."""

    runtime = RUNTIME

    def __init__(self, spec: LoadSpec, name: str, folder: Path, settings: Any) -> None:
        export = OnnxExport.read(folder)
        if export is None:
            raise BackendError(f"{folder}: no ONNX export; rerun `gpubench-nb run`", rule="R1.1")
        self.name, self.export, self.plain_tokenizer = name, export, export.plain_tokenizer
        self._open(spec)
        self.graph = folder / GRAPHS[settings.quantization]
        self.session, asked, options = _session(self.graph, settings.threads, spec.device)
        used = self.session.get_providers()
        if spec.device.type == "cuda" and used[0] != "CUDAExecutionProvider":
            raise BackendError(
                f"onnxruntime runs {used} here, not CUDAExecutionProvider on {spec.device}; "
                "fix: pip install onnxruntime-gpu in place of onnxruntime, or declare device: cpu",
                rule="R2.1",
            )
        self.module = _SessionModule(self.session, list(export.inputs))
        self.record = RuntimeRun(
            name=RUNTIME, version=package_versions().get("onnxruntime"), graph=self.graph.name,
            providers=tuple(used), requested_providers=tuple(str(p) for p in asked),
            intra_op_threads=options.intra_op_num_threads,
            inter_op_threads=options.inter_op_num_threads,
            memory_probe=RSS if spec.device.type == "cpu" else NOT_OBSERVABLE,
            export=export.to_dict(),
        )  # fmt: skip

    def max_context(self) -> int | None:
        return self.export.max_context

    def batches(self, tokenized: Any, batch: int, batching: str) -> list[Batch]:
        """As the torch backend batches them, on the host (onnxruntime takes host arrays)."""
        if self.export.pad_id is not None:
            return padded_batches(tokenized, batch, batching, self.export.pad_id, "cpu")
        from gpubench_nb.engine.backends.bow import bags

        rows = tokenized.input_ids
        order = batch_order([len(row) for row in rows], batch, batching)
        return [Batch(indices, bags([rows[i] for i in indices])) for indices in order]

    def probe(self, device: Any) -> Any:
        return memory_probe(device)

    def note(self) -> str:
        """The runtime of a run, for its notes (the report labels options with it)."""
        r, e = self.record, self.export
        return (
            f"R2.1 runtime onnxruntime {r.version} on {', '.join(r.providers)} (asked "
            f"{', '.join(r.requested_providers)}), graph {r.graph} exported by {e.exporter} "
            f"opset {e.opset} in {e.export_seconds:.3f} s before the runs; fp32 answers equal "
            f"torch's on {e.compared_items - e.answers_changed} of {e.compared_items} eval items "
            f"(max logit difference {e.max_logit_difference:.2g}); threads intra-op "
            f"{r.intra_op_threads}, inter-op {r.inter_op_threads} (0: onnxruntime's own); "
            f"memory: {r.memory_probe}"
        )

    def optimised(self) -> Any:
        """What the graph holds of the declared optimisations: quantised before the runs, its
        seconds the export's (R3.2)."""
        from gpubench_nb.engine.optimise import Optimised

        if self.graph.name == GRAPHS["none"]:
            return Optimised(weight_bytes=self.graph.stat().st_size)
        return Optimised(quantization="int8_dynamic", quantized_layers=self.export.quantized_layers,
                         quantize_seconds=self.export.quantize_seconds,
                         weight_bytes=self.graph.stat().st_size)  # fmt: skip

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "weight_bytes": self.graph.stat().st_size}


def _SessionModule(session: Any, names: list[str]) -> Any:  # noqa: N802 - a class, made lazily
    """The session as the module a Backend calls (torch tensors in, logits out)."""
    import torch

    class SessionModule(torch.nn.Module):
        def forward(self, **tensors: torch.Tensor) -> torch.Tensor:
            return session_logits(session, names, tensors)

    return SessionModule()


@dataclass(frozen=True)
class RssReading(MemoryReading):
    """A phase's process memory, where torch's allocator cannot see onnxruntime's (R3.9): the
    four allocator readings stay empty (not recorded), never a torch number."""

    probe: str = RSS
    rss_baseline_bytes: int | None = None
    rss_peak_bytes: int | None = None


class RssProbe:
    """Resident memory of this process around a phase: baseline, then the peak after resetting
    the kernel's high-water mark (Linux; elsewhere the peak is not recorded)."""

    def __init__(self, probe: str = RSS) -> None:
        self.name, self._baseline = probe, None

    def begin(self) -> None:
        self._baseline = _status("VmRSS")
        if not _reset_peak():
            self.name += ": peak not resettable here, not recorded"

    def end(self) -> MemoryReading:
        peak = _status("VmHWM") if self.name == RSS else None
        return RssReading(probe=self.name, rss_baseline_bytes=self._baseline, rss_peak_bytes=peak)

    partial = end


def memory_probe(device: Any) -> Any:
    """What can observe an onnxruntime phase's memory: process RSS on the CPU, nothing on CUDA."""
    return RssProbe() if str(device).startswith("cpu") else RssProbe(NOT_OBSERVABLE)


def _status(key: str) -> int | None:
    with contextlib.suppress(OSError, StopIteration, ValueError):
        lines = Path("/proc/self/status").read_text().splitlines()
        return int(next(line for line in lines if line.startswith(key)).split()[1]) * 1024
    return None


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM back to the current RSS
    except OSError:
        return False
    return True

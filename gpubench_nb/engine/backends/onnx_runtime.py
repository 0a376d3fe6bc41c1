"""The runtime onnxruntime (R2.1): the declared model exported once, before the runs, by torch's
maintained exporter (torch.onnx, dynamo) into the bundle, fingerprinted in the lock (R1.1); a
run's load is its InferenceSession's creation (R3.2); int8_dynamic is onnxruntime's own."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import logging
import tempfile
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
from gpubench_nb.protocol.records import OnnxRun, Record

EXPORTER = "torch.onnx.export(dynamo=True)"  # torch.export-based: torch's default since 2.9
PACKAGES = ("torch", "onnx", "onnxscript", "onnxruntime")  # onnxruntime-gpu: onnxruntime too
INSTALL = "pip install 'gpubench-nb[onnx]'"
OPSET = 18
FOLDER = "onnx"  # in the bundle: the graph every onnxruntime run of it reads
GRAPH = "model.onnx"
COMPARED_ITEMS = 512  # the first eval items whose torch and onnxruntime fp32 answers are compared
RSS = "process RSS (/proc/self/status VmRSS; peak VmHWM, reset through /proc/self/clear_refs)"
NOT_OBSERVABLE = "not observable (onnxruntime's CUDA memory is outside torch's allocator, R3.9)"


@dataclass(frozen=True, kw_only=True)
class OnnxExport(Record):
    """``onnx/export.json``: how the graph was made (R1.1), its answers against torch's (fp32)."""

    NAME = "export.json"
    RULE = "R1.1"
    exporter: str
    versions: Mapping[str, Any]
    opset: int
    inputs: tuple[str, ...]
    dynamic_axes: Mapping[str, Any]  # each input's axes as the graph declares them
    export_seconds: float
    model_revision: str
    pad_id: int | None = None  # None: bags of token IDs (bow), no padding
    max_context: int | None = None
    plain_tokenizer: bool = False
    compared_items: int
    answers_changed: int
    max_logit_difference: float


def export_for(exp: Any, bundle_dir: Path, texts: list[str]) -> dict[str, str]:
    """The lock's ``onnx_revision``: the graph onnxruntime variants run, exported once (R1.1)."""
    if all(v.settings.runtime != "onnxruntime" for v in exp.variants):
        return {}
    folder = Path(bundle_dir) / FOLDER
    if OnnxExport.read(folder) is None:
        if (Path(bundle_dir) / LOCK_NAME).exists():  # frozen without it: the lock says so
            return {"onnx_revision": "absent (not exported in this bundle)"}
        export(exp, folder, texts)
    return {"onnx_revision": sha256_files([folder / GRAPH], folder)}


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The exporter's and the quantiser's notices (warnings, logs, prints) kept off the terminal."""
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(logging.NOTSET)


def export(exp: Any, folder: Path, texts: list[str]) -> None:
    """The declared model (fp32, CPU) exported, every input axis dynamic, compared with torch."""
    import onnx
    import torch

    from gpubench_nb.engine.backends.registry import load_backend

    model = load_backend(exp.model, exp.tokenizer, classes=exp.classes, device="cpu",
                         precision="fp32")  # fmt: skip
    context = max(v.settings.context for v in exp.variants)
    batches = model.batches(model.tokenize(texts[:COMPARED_ITEMS], context), 16, "corpus_order")
    two = model.batches(model.tokenize(texts[:2], context), 2, "corpus_order")[0].tensors
    module, names, sample = declared_logits(model), list(two), tuple(two.values())
    folder.mkdir(parents=True, exist_ok=True)
    axes = tuple({d: torch.export.Dim.DYNAMIC for d in range(t.dim())} for t in sample)
    started = time.perf_counter()
    try:
        with _quiet():
            torch.onnx.export(module, sample, str(folder / GRAPH), input_names=names, dynamo=True,
                              output_names=["logits"], opset_version=OPSET, external_data=False,
                              dynamic_shapes=(axes,))  # fmt: skip
    except Exception as exc:  # the exporter's errors are many and long: said in one line
        said = [line for line in str(exc).splitlines() if line.startswith("<class")]
        raise BackendError(f"{EXPORTER} of the {exp.model.backend} model failed: "
                           f"{(said or str(exc).splitlines())[0][:300]}; fix: declare runtime: "
                           "torch", rule="R2.1") from None  # fmt: skip
    seconds = time.perf_counter() - started
    decoder = getattr(model, "_decoder", None)  # a decoder classifier pads with its own id
    pad = None if model.name == "bow" else getattr(decoder, "pad_id", model.tokenizer.pad_id)
    session = _session(folder / GRAPH, "auto", torch.device("cpu"))[0]
    with torch.inference_mode():
        ours = torch.cat([module(*b.tensors.values()) for b in batches])
        theirs = torch.cat([session_logits(session, names, b.tensors) for b in batches])
    shapes = {i.name: i.type.tensor_type.shape.dim for i in onnx.load(folder / GRAPH).graph.input}
    OnnxExport.write(folder, OnnxExport(
        exporter=EXPORTER, versions=versions(), opset=OPSET, inputs=tuple(names),
        dynamic_axes={k: [d.dim_param or d.dim_value for d in v] for k, v in shapes.items()},
        export_seconds=seconds, model_revision=model.model_revision, pad_id=pad,
        max_context=model.max_context(), plain_tokenizer=model.plain_tokenizer,
        compared_items=len(ours), answers_changed=int((ours.argmax(-1) != theirs.argmax(-1)).sum()),
        max_logit_difference=float((ours - theirs).abs().max()),
    ))  # fmt: skip


def declared_logits(backend: Any) -> Any:
    """The torch backend's forward as a module, logits in the declared class order (R1.3)."""
    import torch

    class DeclaredLogits(torch.nn.Module):
        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            names = ("input_ids", "offsets" if backend.name == "bow" else "attention_mask")
            logits = backend.forward(dict(zip(names, tensors, strict=True)))
            columns = getattr(backend, "_columns", None)
            return logits if columns is None else logits.index_select(1, columns)

    return DeclaredLogits().eval()


def session_logits(session: Any, names: list[str], tensors: Mapping[str, Any]) -> Any:
    """One batch through the session: host arrays in (CUDA: copied inside the run), logits out."""
    import torch

    feed = {name: tensors[name].numpy(force=True) for name in names}
    return torch.from_numpy(session.run(None, feed)[0])


def versions() -> dict[str, str]:
    """The exporter's and the runtime's versions (R1.1, R2.4)."""
    return {name: importlib.import_module(name).__version__ for name in PACKAGES}


def _session(graph: Path, threads: int | str, device: Any) -> tuple[Any, list[Any], Any]:
    """An InferenceSession with the declared threads (intra-, inter-op); providers; options."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads != "auto":
        options.intra_op_num_threads = options.inter_op_num_threads = int(threads)
    asked: list[Any] = ["CPUExecutionProvider"]
    if device.type == "cuda":
        asked.insert(0, ("CUDAExecutionProvider", {"device_id": device.index or 0}))
    return ort.InferenceSession(str(graph), options, providers=asked), asked, options


@dataclass(frozen=True)
class RssReading(MemoryReading):
    """Process memory (torch's allocator cannot see onnxruntime's, R3.9); its four torch readings
    stay empty, never a torch number for an onnxruntime run."""

    probe: str = RSS
    rss_baseline_bytes: int | None = None
    rss_peak_bytes: int | None = None


class RssProbe:
    """Resident memory: baseline, then the peak after resetting the high-water mark (Linux); on
    CUDA nothing (NOT_OBSERVABLE)."""

    def __init__(self, device: Any) -> None:
        self.name = RSS if str(device).startswith("cpu") else NOT_OBSERVABLE
        self.baseline: int | None = None

    def begin(self) -> None:
        if self.name == RSS:
            self.baseline = _status("VmRSS")
            try:
                Path("/proc/self/clear_refs").write_text("5")  # VmHWM back to the current RSS
            except OSError:
                self.name += ": its peak not resettable here, not recorded"

    def end(self) -> MemoryReading:
        peak = _status("VmHWM") if self.name == RSS and self.baseline is not None else None
        return RssReading(probe=self.name, rss_baseline_bytes=self.baseline, rss_peak_bytes=peak)

    partial = end


def _status(key: str) -> int | None:
    """A /proc/self/status value in bytes (None off Linux)."""
    with contextlib.suppress(OSError, StopIteration):
        lines = Path("/proc/self/status").read_text().splitlines()
        return int(next(line for line in lines if line.startswith(key)).split()[1]) * 1024
    return None


class OnnxBackend(Backend):
    """The bundle's graph run by onnxruntime: the torch backend's tokenizer and batches (host),
    an InferenceSession in place of the module, created inside the load clock (R3.2)."""

    def __init__(self, spec: LoadSpec, name: str, folder: Path, settings: Any) -> None:
        export = OnnxExport.read(folder)
        if export is None:
            raise BackendError(f"{folder}: no ONNX export; rerun `gpubench-nb run`", rule="R1.1")
        self.name, self.export, self.plain_tokenizer = name, export, export.plain_tokenizer
        self._open(spec)
        self.graph, self.threads = folder / GRAPH, settings.threads
        self.session, asked, options = _session(self.graph, settings.threads, spec.device)
        used = self.session.get_providers()
        if spec.device.type == "cuda" and used[0] != "CUDAExecutionProvider":
            raise BackendError(f"onnxruntime runs {used} here, not CUDAExecutionProvider on "
                               f"{spec.device}; fix: pip install onnxruntime-gpu in place of "
                               "onnxruntime, or declare device: cpu", rule="R2.1")  # fmt: skip
        self.module = _session_module(self.session, list(export.inputs), self.graph)
        self.record = OnnxRun(
            version=versions()["onnxruntime"], providers=tuple(used),
            requested_providers=tuple(str(p) for p in asked), export=export.to_dict(),
            intra_op_threads=options.intra_op_num_threads,
            inter_op_threads=options.inter_op_num_threads,
            memory_probe=RSS if spec.device.type == "cpu" else NOT_OBSERVABLE,
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

    probe = RssProbe  # engine.measure and engine.optimise ask the backend's (R3.9)

    def quantize(self, step: Any, scheme: str) -> tuple[dict[str, Any], str]:
        """int8_dynamic: onnxruntime's quantize_dynamic, a new session, timed apart (R3.2)."""
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

        with tempfile.TemporaryDirectory(prefix="gpubench-onnx-") as folder, _quiet():
            graph = Path(folder) / GRAPH
            step.watch.start()
            quantize_dynamic(self.graph, graph, weight_type=QuantType.QInt8)
            self.session = _session(graph, self.threads, self.device)[0]
            seconds = step.watch.stop()
            nodes = [n.op_type for n in onnx.load(graph).graph.node]
            self.module = _session_module(self.session, list(self.export.inputs), graph)
        layers = nodes.count("MatMulInteger") + nodes.count("DynamicQuantizeMatMul")
        done = {"quantization": scheme, "quantized_layers": layers, "quantize_seconds": seconds}
        return done, (f"quantization {scheme} by onnxruntime ({layers} integer matrix products, "
                      f"{seconds:.3f} s with its session, outside the load clock)")  # fmt: skip

    def note(self) -> str:
        """The runtime of a run, for its notes (the report labels options with it)."""
        r, e = self.record, self.export
        return (
            f"R2.1 runtime onnxruntime {r.version} on {', '.join(r.providers)} (asked "
            f"{', '.join(r.requested_providers)}); load = its InferenceSession's creation; graph "
            f"exported by {e.exporter} opset {e.opset} in {e.export_seconds:.3f} s before the "
            f"runs, its fp32 answers equal to torch's on {e.compared_items - e.answers_changed} "
            f"of {e.compared_items} eval items (largest logit difference "
            f"{e.max_logit_difference:.2g}); threads intra-op {r.intra_op_threads}, inter-op "
            f"{r.inter_op_threads} (0: onnxruntime's own); memory: {r.memory_probe}"
        )

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "weight_bytes": self.module.weight_bytes}


def _session_module(session: Any, names: list[str], graph: Path) -> Any:
    """The session as a Backend's module; its graph's bytes are its weights' (weight_bytes)."""
    import torch

    class SessionModule(torch.nn.Module):
        weight_bytes = Path(graph).stat().st_size

        def forward(self, **tensors: torch.Tensor) -> torch.Tensor:
            return session_logits(session, names, tensors)

    return SessionModule()


def apply_runtime(step: Any, declared: str) -> tuple[dict[str, Any], str | None]:
    """The runtime is the one declared: onnxruntime's session, not torch's module (R2.1)."""
    ran = "onnxruntime" if isinstance(step.backend, OnnxBackend) else "torch"
    if ran != declared:
        raise BackendError(f"runtime {declared} was declared but {ran} runs the model", rule="R2.1")
    return {}, None if declared == "torch" else f"runtime {ran}"


def installed(settings: Any, device: Any) -> list[str]:
    """The runtime and its exporter importable here, with the CUDA provider on a GPU (R2.1)."""
    missing = [p for p in PACKAGES[1:] if importlib.util.find_spec(p) is None]
    if settings.runtime != "onnxruntime" or missing:  # checked only where it is declared
        return [f"runtime onnxruntime needs {', '.join(missing)}: {INSTALL}"][: len(missing)]
    import onnxruntime

    cuda = (
        device.type == "cuda"
        and "CUDAExecutionProvider" not in onnxruntime.get_available_providers()
    )
    return ["runtime onnxruntime on CUDA needs onnxruntime-gpu in place of onnxruntime"] * cuda


def environment(exp: Any, bundle_dir: Path, device: Any) -> dict[str, Any]:
    """environment.json's ``onnxruntime`` (R2.4): versions, providers offered and used, export."""
    export = OnnxExport.read(Path(bundle_dir) / FOLDER)
    if export is None:
        return {}
    import onnxruntime

    used = _session(Path(bundle_dir) / FOLDER / GRAPH, "auto", device)[0].get_providers()
    return {"onnxruntime": {"versions": versions(), "providers": used, "export": export.to_dict(),
                            "offered": onnxruntime.get_available_providers()}}  # fmt: skip

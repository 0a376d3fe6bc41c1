"""The Backend interface shared by every model: devices, precisions, batching order, metadata."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpubench_nb.engine.backends.tokenization import Tokenized  # re-exported
from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.experiment_spec import SETTINGS  # the declared vocabulary (R2.1)
from gpubench_nb.protocol.records import Record

if TYPE_CHECKING:
    import torch

    from gpubench_nb.engine.backends.tokenization import TextTokenizer

METADATA_FILE = "gpubench_model.json"


@dataclass
class Batch:
    """One forward's inputs. ``indices`` are corpus positions, in the order of the rows."""

    indices: list[int]
    tensors: dict[str, torch.Tensor]


def torch_dtype(precision: str) -> torch.dtype:
    """The torch dtype of a declared precision; an unknown one is a BackendError."""
    import torch

    table = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    if precision not in table:
        raise BackendError(
            f"precision {precision!r} is not supported; declare one of "
            f"{SETTINGS['precision']['enum']}"
        )
    return table[precision]


def resolve_device(device: str) -> torch.device:
    """``auto`` -> ``cuda`` if available else ``cpu``; asking for CUDA without it is an error."""
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError as exc:
        raise BackendError(
            f"device {device!r} is not a device name ({exc}); use auto, cpu, cuda or cuda:N"
        ) from exc
    if resolved.type == "cpu":
        return resolved
    if resolved.type != "cuda":
        raise BackendError(f"device {device!r} is not supported; use auto, cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        raise BackendError(
            f"device {device!r} was declared but CUDA is not available on this machine "
            f"(torch {torch.__version__}); declare device: cpu or auto, or run on a GPU server",
            rule="R2.4",
        )
    index = 0 if resolved.index is None else resolved.index
    if index >= torch.cuda.device_count():
        raise BackendError(
            f"device {device!r} was declared but only {torch.cuda.device_count()} CUDA "
            "device(s) are visible; declare an existing index",
            rule="R2.4",
        )
    return torch.device("cuda", index)


def native_bf16(device: torch.device, cuda: Any) -> bool:
    """Whether the selected ``device`` (not the current one) runs bf16 natively; not
    ``torch.cuda.is_bf16_supported()``, which counts slow emulation and allocates a probe tensor."""
    with cuda.device(device):
        try:
            return bool(cuda.is_bf16_supported(including_emulation=False))
        except TypeError:  # torch < 2.4: no such argument, and emulation was not counted
            return bool(cuda.is_bf16_supported())


def check_precision(backend: str, device: torch.device, precision: str, cuda: Any = None) -> None:
    """Refuse, before loading, a precision the device cannot run natively; runs no model, as the
    first forward of a cold process is the timed cold pass (R3.2, R3.6)."""
    import torch

    torch_dtype(precision)
    cuda = torch.cuda if cuda is None else cuda
    if precision == "bf16" and device.type == "cuda" and not native_bf16(device, cuda):
        raise BackendError(
            f"backend {backend}: precision bf16 is not supported natively by "
            f"{cuda.get_device_name(device)} ({device}); declare fp16 or fp32 (a precision "
            "change is its own experiment, R2.2)",
            rule="R2.2",
        )


def batch_order(lengths: Sequence[int], batch: int, batching: str) -> list[list[int]]:
    """Corpus positions of each batch: ``corpus_order`` keeps the input order; ``length_sorted``
    only when declared, never a silent optimisation (R2.1)."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise BackendError(f"batch must be an integer >= 1, got {batch!r}", rule="R2.1")
    if batching == "corpus_order":
        order = list(range(len(lengths)))
    elif batching == "length_sorted":
        # Stable: equal lengths keep corpus order, so the grouping is reproducible.
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    else:
        raise BackendError(
            f"batching {batching!r} is not supported; use one of {SETTINGS['batching']['enum']} "
            "(length sorting must be declared, R2.1)",
            rule="R2.1",
        )
    return [order[start : start + batch] for start in range(0, len(order), batch)]


def padded(
    rows: Sequence[Sequence[int]], pad_id: int, *, left: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """``input_ids`` and ``attention_mask`` of ``rows`` padded to the longest, on the right
    (encoders) or on the left (decoders generate after the last real token)."""
    import torch

    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, row in enumerate(rows):
        if row:
            cols = slice(width - len(row), width) if left else slice(0, len(row))
            ids[r, cols] = torch.tensor(row, dtype=torch.long)
            mask[r, cols] = 1
    return ids, mask


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position of each token among its row's real tokens; pads get 0 (they are masked)."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


def padded_batches(
    tokenized: Tokenized,
    batch: int,
    batching: str,
    pad_id: int,
    device: torch.device,
    left: bool = False,
) -> list[Batch]:
    """``input_ids`` + ``attention_mask`` padded to the longest text of each batch, on device;
    ``left`` (decoders) adds ``position_ids`` from the mask: a batch answers as batch 1 (R2.1)."""
    batches = []
    for indices in batch_order([len(ids) for ids in tokenized.input_ids], batch, batching):
        ids, mask = padded([tokenized.input_ids[i] for i in indices], pad_id, left=left)
        tensors = {"input_ids": ids, "attention_mask": mask}
        if left:
            tensors["position_ids"] = positions(mask)
        batches.append(Batch(indices, {k: v.to(device) for k, v in tensors.items()}))
    return batches


def class_permutation(
    model_labels: Sequence[str], classes: Sequence[str], where: Path
) -> list[int]:
    """For each declared class (in declared order), the model's output index of that name.
    The model's labels must be exactly the declared classes, matched by name (R1.3)."""
    model_labels = list(model_labels)
    missing = [c for c in classes if c not in model_labels]
    extra = [label for label in model_labels if label not in classes]
    duplicated = sorted({label for label in model_labels if model_labels.count(label) > 1})
    if missing or extra or duplicated:
        raise BackendError(
            f"the model at {where} has labels {model_labels} but the experiment declares "
            f"classes {list(classes)}: missing {missing}, extra {extra}, duplicated "
            f"{duplicated}. Labels are matched by name; fix the model's id2label or the "
            "declared classes",
            rule="R1.3",
        )
    return [model_labels.index(c) for c in classes]


def built_files(folder: Path, backend: str, names: Sequence[str]) -> list[Path]:
    """``names`` and the metadata in a folder build-model wrote for ``backend``: what its model
    revision covers (R1.1). An incomplete build is refused, naming the files it lacks."""
    files = [folder / name for name in (*names, METADATA_FILE)]
    missing = [p.name for p in files if not p.is_file()]
    if missing:
        raise BackendError(
            f"model.path {folder} lacks {missing}: not a complete {backend} build. Rebuild it "
            "with `gpubench-nb build-model <experiment.yaml> --force`",
            rule="R1.1",
        )
    return files


@dataclass(frozen=True, kw_only=True)
class ModelMetadata(Record):
    """``gpubench_model.json``, written by build-model: what a built folder was built for and
    from (R1.1, R1.4); each preset's own facts (its grid, its shape) are kept in ``data``."""

    NAME = METADATA_FILE
    RULE = "R1.1"
    ERROR = BackendError
    FIX = "rebuild the folder with `gpubench-nb build-model --force <experiment.yaml>`"
    backend: str | None = None
    classes: tuple[str, ...] = ()
    tokenizer_revision: str | None = None
    declaration: Mapping[str, Any] | None = None  # what a build is reused on
    architecture: Mapping[str, Any] | None = None  # bow: vocab_size, dim
    tune_macro_f1: float | None = None
    chosen: Mapping[str, Any] | None = None  # the setting chosen on tune and its value
    train_count: int | None = None
    tune_count: int | None = None


def read_metadata(folder: Path) -> ModelMetadata:
    """The ``gpubench_model.json`` written by build_model, or a BackendError."""
    path = folder / METADATA_FILE
    meta = ModelMetadata.load(path) if path.is_file() else None
    if meta is None:
        raise BackendError(
            f"{path} does not exist: {folder} is not a built gpubench model folder. "
            "Run `gpubench-nb build-model <experiment.yaml>` first, or fix model.path",
            rule="R1.1",
        )
    return meta


@dataclass(frozen=True)
class LoadSpec:
    """What every backend is opened with, built once by ``load_backend``, its revisions
    fingerprinted before the timed load (R1.1, R1.3, R2.5, R3.2)."""

    model_path: Path
    tokenizer_path: Path
    classes: tuple[str, ...]
    device: torch.device
    precision: str
    revisions: tuple[str, str]
    prompt: Any = None


class Backend:
    """A loaded model + tokenizer on one device at one precision (see ARCHITECTURE.md)."""

    name: str
    # reads the shipped WordPiece files with `tokenizers` alone, never importing transformers
    # (tokenization.TextTokenizer); another tokenizer folder still goes through transformers
    plain_tokenizer = False
    device: torch.device
    precision: str
    classes: tuple[str, ...]
    model_revision: str
    tokenizer_revision: str
    model_path: Path
    tokenizer: TextTokenizer
    module: torch.nn.Module

    def tokenize(self, texts: Sequence[str], context: int) -> Tokenized:
        """Token IDs cut to ``context`` tokens (special tokens included), truncation counted."""
        return self.tokenizer.tokenize(texts, context, max_context=self.max_context())

    def max_context(self) -> int | None:
        """The longest input the model accepts, or None when unbounded."""
        return None

    def batches(self, tokenized: Tokenized, batch: int, batching: str) -> list[Batch]:
        raise NotImplementedError

    def predict(self, batch: Batch) -> torch.Tensor:
        """Label indices (declared class order) of the batch's rows, on the device."""
        import torch

        with torch.inference_mode():
            return self._decide(self.forward(batch.tensors))

    def forward(self, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        """Logits in the model's own label order."""
        return self.module(**tensors)

    def _open(self, spec: LoadSpec) -> None:
        """Set the folders, classes, device and precision, the tokenizer (read once) and both
        revisions (``spec.revisions``: hashed before, never inside, the load, R3.2)."""
        from gpubench_nb.engine.backends.tokenization import TextTokenizer, require_folder

        self.model_revision, tokenizer_revision = spec.revisions
        self.model_path = require_folder(spec.model_path, "model.path")
        self.tokenizer = TextTokenizer(
            spec.tokenizer_path, revision=tokenizer_revision, plain=self.plain_tokenizer
        )
        self.tokenizer_revision = self.tokenizer.revision
        self.classes, self.device, self.precision = spec.classes, spec.device, spec.precision

    def _open_built_folder(self, spec: LoadSpec) -> ModelMetadata:
        """The metadata of a folder ``build_model`` wrote, refused unless built for this backend and
        this tokenizer (R1.1: another tokenizer's IDs mean other words)."""
        self._open(spec)
        meta = read_metadata(self.model_path)
        if meta.backend != self.name:
            raise BackendError(
                f"{self.model_path / METADATA_FILE} was built for backend "
                f"{meta.backend!r}, not {self.name}; fix model.backend or model.path"
            )
        self._map_labels(meta.classes)
        if self.tokenizer.revision != meta.tokenizer_revision:
            raise BackendError(
                f"tokenizer.path {self.tokenizer.path} (sha256 {self.tokenizer.revision[:12]}) "
                f"is not the tokenizer the {self.name} model was built with (sha256 "
                f"{str(meta.tokenizer_revision)[:12]}): its token IDs would mean other words. "
                "Point tokenizer.path at the model folder",
                rule="R1.1",
            )
        return meta

    def _map_labels(self, model_labels: Sequence[str]) -> None:
        """Match the model's labels to the declared classes by name (R1.3); an identity
        mapping costs nothing in the timed loop."""
        import torch

        permutation = class_permutation(model_labels, self.classes, self.model_path)
        self._columns = (
            None
            if permutation == list(range(len(permutation)))
            else torch.tensor(permutation, dtype=torch.long, device=self.device)
        )

    def _decide(self, logits: torch.Tensor) -> torch.Tensor:
        columns = getattr(self, "_columns", None)
        if columns is not None:
            logits = logits.index_select(1, columns)
        return logits.argmax(-1)

    def describe(self) -> dict[str, Any]:
        """What was loaded, JSON-able: for run.json and the memory check (weight bytes)."""
        params = list(self.module.parameters())
        return {
            "backend": self.name,
            "device": str(self.device),
            "precision": self.precision,
            "classes": list(self.classes),
            "parameter_count": sum(p.numel() for p in params),
            "weight_bytes": sum(p.numel() * p.element_size() for p in params),
            "model_path": str(self.model_path),
            "tokenizer_path": str(self.tokenizer.path),
            "model_revision": self.model_revision,
            "tokenizer_revision": self.tokenizer_revision,
        }

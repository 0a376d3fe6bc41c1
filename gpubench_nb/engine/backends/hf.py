"""The ``hf`` backend: a user's local Hugging Face sequence-classification folder, offline."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpubench_nb.engine.backends.base import (
    Backend,
    Batch,
    LoadSpec,
    Tokenized,
    padded_batches,
    torch_dtype,
)
from gpubench_nb.engine.backends.decoder import (
    DecoderPadding,
    decoder_padding,
    last_real_token_logits,
)
from gpubench_nb.engine.backends.tokenization import TextTokenizer, offline
from gpubench_nb.errors import BackendError

if TYPE_CHECKING:
    import torch

WEIGHT_PATTERNS = ("*.safetensors", "*.safetensors.index.json", "pytorch_model*.bin")
# read by from_pretrained beside config.json when present: the folder's generation defaults
MODEL_EXTRA_FILES = ("generation_config.json",)
# Imported before the load clock starts (imports.py, R3.2)
AUTO_CLASSES = ("AutoModelForSequenceClassification",)
MODEL_MAPPING = "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"


def model_files(folder: Path, *, exclude: Sequence[str] = ()) -> list[Path]:
    """Every file from_pretrained reads in ``folder``: config, generation config, weights (R1.1)."""
    config = folder / "config.json"
    weights = sorted(
        {p for pattern in WEIGHT_PATTERNS for p in folder.glob(pattern) if p.name not in exclude}
    )
    extra = [folder / name for name in MODEL_EXTRA_FILES if (folder / name).is_file()]
    if not config.is_file() or not weights:
        raise BackendError(
            f"model.path {folder} must hold config.json and weights (*.safetensors or "
            f"pytorch_model.bin); found config.json: {config.is_file()}, weights: "
            f"{[p.name for p in weights]}",
            rule="R1.1",
        )
    return [config, *extra, *weights]


@contextmanager
def no_progress_bars() -> Iterator[None]:
    """transformers' progress bars off (noise in a notebook or log), the setting restored after."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def from_pretrained(auto_class: Any, folder: Path, dtype: torch.dtype) -> Any:
    """``auto_class.from_pretrained`` offline from a local folder, errors as BackendError."""
    offline()
    try:
        with no_progress_bars():
            return auto_class.from_pretrained(str(folder), local_files_only=True, dtype=dtype)
    except (OSError, ValueError, KeyError) as exc:
        raise BackendError(
            f"cannot load a {auto_class.__name__} model from {folder}: {exc}", rule="R1.1"
        ) from exc


def max_context(config: Any, tokenizer: TextTokenizer) -> int | None:
    """The model's longest input: its position table or the tokenizer's limit, the smaller
    (RoBERTa's table holds 2 extra rows); huge sentinels mean 'not set'."""
    limits = [getattr(config, "max_position_embeddings", None)]
    limits.append(getattr(tokenizer.hf, "model_max_length", None))
    usable = [int(x) for x in limits if isinstance(x, int) and 0 < x < 1_000_000]
    return min(usable) if usable else None


class TransformersBackend(Backend):
    """A transformers model's shared parts: its context limit and right-padded batches."""

    _max_context: int | None
    _decoder: DecoderPadding | None = None

    def max_context(self) -> int | None:
        return self._max_context

    def batches(self, tokenized: Tokenized, batch: int, batching: str) -> list[Batch]:
        """Padded on the right; a decoder classifier's pad id is the one it skips (R2.1)."""
        pad_id = self.tokenizer.pad_id if self._decoder is None else self._decoder.pad_id
        return padded_batches(tokenized, batch, batching, pad_id, self.device)


class HfBackend(TransformersBackend):
    """AutoModelForSequenceClassification, labels matched by name (R1.3); decoder-only ones
    padded so that any batch answers as batch 1 (decoder.py)."""

    name = "hf"

    def __init__(self, spec: LoadSpec) -> None:
        from transformers import AutoModelForSequenceClassification

        self._open(spec)
        model = from_pretrained(
            AutoModelForSequenceClassification, self.model_path, torch_dtype(spec.precision)
        )
        id2label = model.config.id2label
        labels = [id2label[i] for i in range(model.config.num_labels)]
        self._map_labels(labels)
        self._decoder = decoder_padding(model, self.tokenizer.pad_id, self.model_path)
        self.module = model.to(spec.device).eval()
        self._max_context = max_context(model.config, self.tokenizer)

    def forward(self, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        if self._decoder is not None and self._decoder.read_last_real_token:
            return last_real_token_logits(self.module, tensors)
        return self.module(**tensors).logits

    def tokens_processed(self, tokenized: Tokenized) -> int:
        """Tokens of the pass, special tokens included, padding excluded (for tokens/s)."""
        return sum(len(ids) for ids in tokenized.input_ids)

    def describe(self) -> dict[str, Any]:
        described = super().describe()
        if self._decoder is not None:
            described["padding"] = self._decoder.describe()
        return described


BACKEND = HfBackend

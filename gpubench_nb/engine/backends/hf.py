"""The ``hf`` backend: a local Hugging Face sequence classifier (encoder or decoder), offline."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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


def model_files(folder: Path) -> list[Path]:
    """Every file from_pretrained reads in ``folder``: config, generation config, weights (R1.1)."""
    config = folder / "config.json"
    weights = sorted({p for pattern in WEIGHT_PATTERNS for p in folder.glob(pattern)})
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
    return min((int(x) for x in limits if isinstance(x, int) and 0 < x < 1_000_000), default=None)


@dataclass(frozen=True)
class DecoderPadding:
    """How a decoder classifier (GPT-2, Llama, ...) is padded and read: transformers reads its
    logits at the rightmost token that is not ``config.pad_token_id``, so rows are padded on the
    right with that id, or, without one, read at the last real token: any batch answers as batch 1
    (R2.1)."""

    pad_id: int
    read_last_real_token: bool  # config.pad_token_id is None

    def describe(self) -> str:
        if self.read_last_real_token:
            return (
                f"decoder classifier: right padding with id {self.pad_id}; config.pad_token_id "
                "is not set, so logits are read at each row's last real token (attention mask)"
            )
        return (
            f"decoder classifier: right padding with config.pad_token_id {self.pad_id}, the id "
            "the model skips to find its last token"
        )


def is_decoder_classifier(model: Any) -> bool:
    """A decoder-only ``*ForSequenceClassification``: causal-LM but no masked-LM type in
    transformers' auto mappings (BERT-like models have both), scoring with ``score``."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    config = model.config
    kind = getattr(config, "model_type", None)
    return (
        kind in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        and kind not in MODEL_FOR_MASKED_LM_MAPPING_NAMES
        and not getattr(config, "is_encoder_decoder", False)
        and hasattr(model, "score")
    )


def decoder_padding(model: Any, tokenizer_pad_id: int, folder: Path) -> DecoderPadding | None:
    """The padding that keeps a decoder classifier's answer at any batch size (None: an
    encoder); a pad id the model cannot embed is a BackendError (R2.1)."""
    if not is_decoder_classifier(model):
        return None
    text_config = model.config.get_text_config()
    config_pad = getattr(text_config, "pad_token_id", None)
    if config_pad is None:
        if model.base_model is model:
            raise BackendError(
                f"{folder}/config.json sets no pad_token_id, so {type(model).__name__} reads "
                "the last position and cannot batch more than one text, and its body cannot be "
                "called apart from its head. Fix: set pad_token_id in config.json (e.g. the "
                "tokenizer's pad or eos id) or declare batch 1 only",
                rule="R2.1",
            )
        return DecoderPadding(pad_id=int(tokenizer_pad_id), read_last_real_token=True)
    problem = pad_id_problem(text_config, folder)
    if problem is not None:
        raise BackendError(problem, rule="R2.1")
    return DecoderPadding(pad_id=_first(config_pad), read_last_real_token=False)


def _first(pad: Any) -> Any:
    """A config's pad id, the first one of a list."""
    return (pad[0] if pad else None) if isinstance(pad, list) else pad


def pad_id_problem(text_config: Any, folder: Path) -> str | None:
    """Why ``config.pad_token_id`` cannot pad this model's rows (with the fix), or None; from
    the config alone, so ``validate`` refuses it before any kernel starts."""
    if getattr(text_config, "pad_token_id", None) is None:
        return None
    config_pad = _first(text_config.pad_token_id)
    vocab = getattr(text_config, "vocab_size", None)
    ok = isinstance(config_pad, int) and not isinstance(config_pad, bool) and config_pad >= 0
    if ok and not (vocab and config_pad >= vocab):
        return None
    return (
        f"{folder}/config.json sets pad_token_id {config_pad!r}, which is not a token id of "
        f"this model (vocabulary {vocab}): padded rows cannot be embedded. Fix: set "
        "pad_token_id to the tokenizer's pad (or eos) id, or to null"
    )


def last_real_token_logits(model: Any, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """The classifier's ``score`` head on each right-padded row's last real hidden state."""
    import torch

    mask = tensors["attention_mask"]
    hidden = model.base_model(input_ids=tensors["input_ids"], attention_mask=mask).last_hidden_state
    last = mask.sum(-1) - 1
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    return model.score(hidden[rows, last])


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
    padded so that any batch answers as batch 1 (``decoder_padding``)."""

    name = "hf"

    def __init__(self, spec: LoadSpec) -> None:
        from transformers import AutoModelForSequenceClassification

        self._open(spec)
        model = from_pretrained(
            AutoModelForSequenceClassification, self.model_path, torch_dtype(spec.precision)
        )
        self._map_labels([model.config.id2label[i] for i in range(model.config.num_labels)])
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

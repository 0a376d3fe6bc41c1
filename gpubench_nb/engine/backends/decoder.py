"""Decoder-only sequence classifiers (GPT-2, Llama, ...): padding that keeps their answer (R2.1).

transformers reads their logits at the rightmost token that is not ``config.pad_token_id``; so
rows are padded on the right with that id, or, without one, read here at the last real token.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpubench_nb.errors import BackendError

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class DecoderPadding:
    """How a decoder classifier's batches are padded (right) and its logits read."""

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

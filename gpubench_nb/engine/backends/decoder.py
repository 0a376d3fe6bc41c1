"""Decoder-only sequence classifiers (GPT-2, Llama, Qwen, ...): padding that keeps their answer.

transformers reads a decoder classifier's logits at the rightmost token whose id differs from
``config.pad_token_id`` (no pad id: the last position, batch 1 only). So a batch answers as
batch 1 does (R2.1) when padding is on the right (causal attention never sees the pads), the
pad id is ``config.pad_token_id`` itself, and, with no ``config.pad_token_id``, the logits are
read here at each row's last real token (the attention mask's).
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
    read_last_real_token: bool  # True when config.pad_token_id is None (see module docstring)

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
    """True for a decoder-only ``*ForSequenceClassification``: a causal-LM and no masked-LM
    head in transformers' auto mappings (BERT-like models have both), scoring with ``score``."""
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
    """The padding that keeps a decoder classifier's answer at any batch size, or None for
    an encoder. A pad id the model cannot embed is a BackendError naming the fix (R2.1)."""
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
    if isinstance(config_pad, list):
        config_pad = config_pad[0]
    return DecoderPadding(pad_id=config_pad, read_last_real_token=False)


def pad_id_problem(text_config: Any, folder: Path) -> str | None:
    """Why ``config.pad_token_id`` cannot pad this model's rows (with the fix), or None; from
    the config alone, so ``validate`` and ``run`` refuse it before any kernel starts."""
    config_pad = getattr(text_config, "pad_token_id", None)
    if config_pad is None:
        return None
    vocab = getattr(text_config, "vocab_size", None)
    if isinstance(config_pad, list):
        config_pad = config_pad[0] if config_pad else None
    ok = isinstance(config_pad, int) and not isinstance(config_pad, bool) and config_pad >= 0
    if ok and not (vocab and config_pad >= vocab):
        return None
    return (
        f"{folder}/config.json sets pad_token_id {config_pad!r}, which is not a token id of "
        f"this model (vocabulary {vocab}): padded rows cannot be embedded. Fix: set "
        "pad_token_id to the tokenizer's pad (or eos) id, or to null"
    )


def last_real_token_logits(model: Any, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """The classifier's logits at each row's last real token, for right-padded rows: the
    model's body, then its ``score`` head on that one hidden state per row."""
    import torch

    mask = tensors["attention_mask"]
    hidden = model.base_model(input_ids=tensors["input_ids"], attention_mask=mask).last_hidden_state
    last = mask.sum(-1) - 1
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    return model.score(hidden[rows, last])

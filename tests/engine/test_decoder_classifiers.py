"""``hf`` with decoder-only classifiers (GPT-2, Llama): a batch answers as batch 1 does (R2.1).

Tiny models built from configs (random weights, a word-level tokenizer made here): no download.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from gpubench_nb.engine.backends import load_backend
from gpubench_nb.engine.backends.hf import is_decoder_classifier
from gpubench_nb.errors import BackendError
from scripts.tiny_decoders import sample_texts, tiny_classifier

CLASSES = ("admin", "games", "net", "sound", "web")
TEXTS = sample_texts(32, seed=3)


def _load(folder: Path):
    return load_backend(
        SimpleNamespace(backend="hf", path=folder, build={}),
        SimpleNamespace(path=folder),
        classes=CLASSES,
        device="cpu",
        precision="fp32",
    )


def _predict(backend, batch: int, batching: str = "corpus_order") -> list[int]:
    tokenized = backend.tokenize(TEXTS, 64)
    out = [-1] * len(TEXTS)
    for b in backend.batches(tokenized, batch, batching):
        for position, label in zip(b.indices, backend.predict(b).tolist(), strict=True):
            out[position] = label
    return out


def _alone(backend) -> list[int]:
    """What the plain transformers call gives for each text alone (no padding at all)."""
    tokenized = backend.tokenize(TEXTS, 64)
    with torch.inference_mode():
        return [
            int(backend.module(input_ids=torch.tensor([ids])).logits.argmax(-1))
            for ids in tokenized.input_ids
        ]


# config pad id: equal to the tokenizer's (0), another real token (5, 'the'), or none at all.
CASES = [
    ("gpt2", 0, True),
    ("gpt2", 5, True),
    ("gpt2", None, False),  # GPT-2-like: no pad in the config nor in the tokenizer
    ("llama", 0, True),
    ("llama", 5, True),
    ("llama", None, True),
]


@pytest.mark.parametrize(("family", "config_pad", "tokenizer_pad"), CASES)
def test_decoder_classifier_predictions_do_not_depend_on_batch_size(
    tmp_path, family, config_pad, tokenizer_pad
) -> None:
    folder = tiny_classifier(
        tmp_path / family, family, CLASSES, pad_token_id=config_pad, tokenizer_pad=tokenizer_pad
    )
    backend = _load(folder)
    assert is_decoder_classifier(backend.module)
    alone = _alone(backend)
    assert len(set(alone)) > 1  # random weights that still tell texts apart
    for batch in (1, 4, 8):
        assert _predict(backend, batch) == alone, f"batch {batch}"
    assert _predict(backend, 8, "length_sorted") == alone
    assert "right padding" in backend.describe()["padding"]


def test_the_tokenizer_pad_id_would_change_answers_when_the_config_differs(tmp_path) -> None:
    """Why the config's id is used: padding with the tokenizer's id (what the plain batched
    call does) makes the model read a pad as the last token."""
    from gpubench_nb.engine.backends.base import padded_batches

    backend = _load(tiny_classifier(tmp_path / "g", "gpt2", CLASSES, pad_token_id=5))
    tokenized = backend.tokenize(TEXTS, 64)
    wrong = [-1] * len(TEXTS)
    for b in padded_batches(tokenized, 8, "corpus_order", backend.tokenizer.pad_id, "cpu"):
        with torch.inference_mode():
            labels = backend.module(**b.tensors).logits.argmax(-1).tolist()
        for position, label in zip(b.indices, labels, strict=True):
            wrong[position] = label
    assert wrong != _alone(backend)


def test_an_unusable_config_pad_id_is_refused_with_the_fix(tmp_path) -> None:
    folder = tiny_classifier(tmp_path / "g", "gpt2", CLASSES, pad_token_id=0)
    config = folder / "config.json"
    config.write_text(
        config.read_text(encoding="utf-8").replace('"pad_token_id": 0', '"pad_token_id": -1'),
        encoding="utf-8",
    )
    with pytest.raises(BackendError, match=r"R2\.1.*pad_token_id -1.*Fix: set pad_token_id"):
        _load(folder)


def test_encoders_are_not_taken_for_decoders() -> None:
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(
        vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
        intermediate_size=8,
    )  # fmt: skip
    assert not is_decoder_classifier(BertForSequenceClassification(config))

"""Small models built in a test: a randomly initialised 1-layer BERT classifier saved with the
MiniLM tokenizer (no download), for the hf backend and the optimisations applied to it."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import torch

from gpubench_nb.engine.backends import minilm_source_dir
from gpubench_nb.engine.backends.tokenization import tokenizer_files


def tiny_bert_folder(folder: Path, id2label: Mapping[int, str], **config: object) -> Path:
    """``folder`` holding the classifier (seed 0) and its tokenizer; ``config`` overrides
    BertConfig's fields (``initializer_range=0.5``: wide weights whose answers differ)."""
    from transformers import BertConfig, BertForSequenceClassification

    settings = dict(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=len(id2label),
        id2label=dict(id2label),
        label2id={v: k for k, v in id2label.items()},
    )
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(**{**settings, **config}))
    model.eval().save_pretrained(str(folder))
    for path in tokenizer_files(minilm_source_dir()):
        shutil.copyfile(path, folder / path.name)
    return folder

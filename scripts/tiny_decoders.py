"""Tiny GPT-2 and Llama folders (random weights, a word-level tokenizer) built offline.

For the tests and benchmarks of decoder classifiers (``hf``) and prompted causal LMs
(``causal_lm``): nothing is downloaded; every folder is built from a config in seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")
_WORD_TEXT = (
    "the a an of to and in is it for on with as this that package tool library server client "
    "game play sound audio mail email web browser http math number plot graph image picture "
    "text editor file system admin user disk network net science data model answer section "
    "classify label which one yes no : ? . , ! * # | - + = ( ) [ ] { } > < "
    "admin games graphics math net science sound web misc other assistant"
)
WORDS = tuple(_WORD_TEXT.split())
CHAT_TEMPLATE = (
    "{% for m in messages %}<s> {{ m['role'] }} : {{ m['content'] }} </s> {% endfor %}"
    "{% if add_generation_prompt %}<s> assistant : {% endif %}"
)


def word_tokenizer(
    folder: Path,
    *,
    words: Sequence[str] = WORDS,
    bos: bool = True,
    pad: bool = True,
    chat_template: bool = False,
) -> Any:
    """A WordLevel tokenizer (whitespace split, lower-case words) saved in ``folder``.

    ``bos`` adds ``<s>`` in front of every text (Llama-like); ``pad=False`` leaves the pad
    token unset (GPT-2-like); ``chat_template`` stores a small chat template.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(dict.fromkeys([*SPECIALS, *words]))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    if bos:
        core.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", vocab["<s>"])]
        )
    kwargs = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    if pad:
        kwargs["pad_token"] = "<pad>"
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, **kwargs)
    if chat_template:
        tokenizer.chat_template = CHAT_TEMPLATE
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(folder))
    return tokenizer


def _config(
    family: str, vocab_size: int, positions: int = 256, width: int = 32, **extra: Any
) -> Any:
    from transformers import GPT2Config, LlamaConfig

    if family == "gpt2":
        return GPT2Config(
            vocab_size=vocab_size,
            n_positions=positions,
            n_embd=width,
            n_layer=2,
            n_head=2,
            initializer_range=0.2,
            bos_token_id=2,
            eos_token_id=3,
            **extra,
        )
    if family == "llama":
        return LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=width,
            intermediate_size=2 * width,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=positions,
            initializer_range=0.2,
            bos_token_id=2,
            eos_token_id=3,
            **extra,
        )
    raise ValueError(f"family {family!r}: use gpt2 or llama")


def tiny_classifier(
    folder: Path,
    family: str,
    classes: Sequence[str],
    *,
    pad_token_id: int | None,
    tokenizer_pad: bool = True,
    seed: int = 0,
) -> Path:
    """A ``*ForSequenceClassification`` decoder with ``classes`` as its labels."""
    import torch
    from transformers import AutoModelForSequenceClassification

    tokenizer = word_tokenizer(folder, pad=tokenizer_pad)
    config = _config(
        family,
        len(tokenizer),
        num_labels=len(classes),
        id2label=dict(enumerate(classes)),
        label2id={c: i for i, c in enumerate(classes)},
        pad_token_id=pad_token_id,
    )
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config).eval()
    model.save_pretrained(str(folder))
    return folder


def tiny_causal_lm(
    folder: Path,
    family: str,
    *,
    seed: int = 0,
    chat_template: bool = False,
    positions: int = 256,
    width: int = 32,
    words: Sequence[str] = WORDS,
) -> Path:
    """A ``*ForCausalLM`` with the word-level tokenizer (pad set, BOS added)."""
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = word_tokenizer(folder, chat_template=chat_template, words=words)
    config = _config(family, len(tokenizer), positions, width, pad_token_id=0)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config).eval()
    model.save_pretrained(str(folder))
    return folder


def sample_texts(count: int, seed: int = 0) -> list[str]:
    """``count`` texts of 1 to 24 words drawn from WORDS, of varied lengths (for padding)."""
    import random

    rng = random.Random(seed)
    plain = [w for w in WORDS if w.isalpha()]
    return [" ".join(rng.choices(plain, k=rng.randint(1, 24))) for _ in range(count)]

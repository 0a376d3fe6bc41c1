"""Offline tokenizer loading and tokenisation to a context limit, truncation counted (R2.3)."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.fingerprint import sha256_files


@dataclass
class Tokenized:
    """Token IDs of each text in corpus order, already cut to the context limit (R2.3)."""

    input_ids: list[list[int]]
    truncated_texts: int  # texts longer than the context, special tokens included
    dropped_tokens: int  # tokens cut off those texts, summed


# Files a Hugging Face tokenizer may read; those present are fingerprinted (R1.1).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
    "chat_template.jinja",  # chat templates change the rendered prompt
    "chat_template.json",
)
CHAT_TEMPLATE_DIR = "additional_chat_templates"  # transformers reads every *.jinja in it
# all-MiniLM-L6-v2's WordPiece tokenizer, shipped (NOTICE, PROVENANCE.json beside it), and its
# revision (R1.1) as a constant: a load compares it without hashing (R3.2)
WORDPIECE_DIR = Path(__file__).resolve().parent / "wordpiece"
WORDPIECE_REVISION = "581b86bcd900eb9f5dde4752fb086fe3731c10d2c992850b6e82469b2c35d333"


def offline() -> None:
    """Forbid Hugging Face network access: weights are never downloaded at run time (R1.1)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def require_folder(path: Path, what: str) -> Path:
    """``path`` as an existing folder, or a BackendError naming the field to fix."""
    path = Path(path)
    if not path.is_dir():
        raise BackendError(
            f"{what} {path} is not an existing folder; fix {what} in the experiment YAML "
            "(paths are relative to the YAML file) or build the model first",
            rule="R1.1",
        )
    return path


def tokenizer_files(folder: Path) -> list[Path]:
    """Every tokenizer file AutoTokenizer reads in ``folder`` (R1.1); none: a BackendError."""
    found = [folder / name for name in TOKENIZER_FILES if (folder / name).is_file()]
    if not any(p.name not in ("chat_template.jinja", "chat_template.json") for p in found):
        found = []
    found += sorted(p for p in (folder / CHAT_TEMPLATE_DIR).glob("*.jinja") if p.is_file())
    if not found:
        raise BackendError(
            f"tokenizer.path {folder} holds none of {list(TOKENIZER_FILES)}; point it at a "
            "Hugging Face tokenizer folder",
            rule="R1.1",
        )
    return found


class TextTokenizer:
    """A local Hugging Face tokenizer; ``revision``: its files' fingerprint (R1.1), else hashed
    here. ``plain``: the shipped WordPiece read without transformers (~0.9 s a kernel)."""

    def __init__(self, path: Path, *, revision: str | None = None, plain: bool = False) -> None:
        offline()
        self.path = require_folder(path, "tokenizer.path")
        self.revision = revision or sha256_files(tokenizer_files(self.path), self.path)
        self.hf: Any = None
        if plain and self.revision == WORDPIECE_REVISION:
            self._load_plain()
        else:
            self._load_hf()

    def _load_hf(self) -> None:
        from transformers import AutoTokenizer

        try:
            self.hf = AutoTokenizer.from_pretrained(str(self.path), local_files_only=True)
        except (OSError, ValueError) as exc:
            raise BackendError(
                f"cannot load the tokenizer at {self.path}: {exc}", rule="R1.1"
            ) from exc
        self.pad_id = self.hf.pad_token_id if self.hf.pad_token_id is not None else 0
        self.special_count = self.hf.num_special_tokens_to_add(pair=False)
        self.vocab_size = len(self.hf)  # token IDs it can give, added tokens included
        # its Rust object, loaded once (R3.2); tokenize() clears padding/truncation state
        self._fast: Any = self.hf.backend_tokenizer if getattr(self.hf, "is_fast", False) else None

    def _load_plain(self) -> None:
        """The shipped WordPiece files through ``tokenizers`` alone, as ``_load_hf`` reads them."""
        from tokenizers import Tokenizer

        try:
            self._fast = Tokenizer.from_file(str(self.path / "tokenizer.json"))
            config = json.loads((self.path / "tokenizer_config.json").read_text(encoding="utf-8"))
        except Exception as exc:  # tokenizers raises a bare Exception for a bad file
            raise BackendError(
                f"cannot load the tokenizer at {self.path}: {exc}", rule="R1.1"
            ) from exc
        pad = self._fast.token_to_id(str(config.get("pad_token", "[PAD]")))
        self.pad_id = pad if pad is not None else 0
        self.special_count = self._fast.post_processor.num_special_tokens_to_add(False)
        self.vocab_size = self._fast.get_vocab_size(with_added_tokens=True)

    def check_context(self, context: int, max_context: int | None) -> None:
        """The declared context must leave room for one token and fit the model (R2.3)."""
        if isinstance(context, bool) or not isinstance(context, int):
            raise BackendError(f"context must be an integer, got {context!r}", rule="R2.3")
        low = self.special_count + 1
        if context < low or (max_context is not None and context > max_context):
            high = "" if max_context is None else f" and <= {max_context} (the model's limit)"
            raise BackendError(
                f"context {context} is out of range: it counts {self.special_count} special "
                f"tokens, so it must be >= {low}{high}",
                rule="R2.3",
            )

    def tokenize(
        self, texts: Sequence[str], context: int, *, max_context: int | None = None
    ) -> Tokenized:
        """Token IDs (special tokens included) cut to ``context``, truncation counted (R2.3)."""
        self.check_context(context, max_context)
        texts = list(texts)
        if self._fast is not None:
            self._fast.no_padding()
            self._fast.no_truncation()
            encodings = self._fast.encode_batch(texts, add_special_tokens=True)
            full = [e.ids for e in encodings]
            cut = [_cut(e.ids, e.special_tokens_mask, context) for e in encodings]
        else:
            encode = functools.partial(self.hf, texts, add_special_tokens=True)
            full = encode(truncation=False, verbose=False)["input_ids"]
            cut = encode(truncation=True, max_length=context)["input_ids"]
        truncated = sum(1 for ids in full if len(ids) > context)
        dropped = sum(len(f) - len(c) for f, c in zip(full, cut, strict=True))
        return Tokenized(
            input_ids=[list(ids) for ids in cut], truncated_texts=truncated, dropped_tokens=dropped
        )


def _cut(ids: list[int], special: list[int], context: int) -> list[int]:
    """Every special token and the first content tokens, ``context`` in all: the tokenizer's
    right truncation, from one encoding."""
    if len(ids) <= context:
        return list(ids)
    room = context - sum(special)
    kept: list[int] = []
    for token, is_special in zip(ids, special, strict=True):
        if is_special or room > 0:
            kept.append(token)
            room -= not is_special
    return kept

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
    """Token IDs of each text in corpus order, already cut to the context limit (R2.3); here,
    not in ``base``, so that ``base`` imports ``tokenization`` and never the reverse."""

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
    # chat templates change the rendered prompt: part of the revision
    "chat_template.jinja",
    "chat_template.json",
)
CHAT_TEMPLATE_DIR = "additional_chat_templates"  # transformers reads every *.jinja in it
# all-MiniLM-L6-v2's WordPiece tokenizer, shipped with the package (NOTICE, PROVENANCE.json
# and the Apache-2.0 licence beside it): the bow preset needs nothing else.
WORDPIECE_DIR = Path(__file__).resolve().parent / "wordpiece"
# Their revision (sha256_files, R1.1): a constant so that a load compares it without hashing
# (R3.2); tests/engine/test_tokenization.py recomputes it from the shipped files.
WORDPIECE_REVISION = "581b86bcd900eb9f5dde4752fb086fe3731c10d2c992850b6e82469b2c35d333"


def offline() -> None:
    """Forbid network access by Hugging Face libraries: weights are never downloaded at run
    time (R1.1 freezes the model). Every loader also passes ``local_files_only=True``."""
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
    """The tokenizer files present in ``folder``, chat templates included (at least one
    tokenizer file, else a BackendError): every file AutoTokenizer reads there (R1.1)."""
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
    """A local Hugging Face tokenizer; ``revision`` fingerprints the files loaded (R1.1).

    transformers' ``AutoTokenizer`` reads any folder; the shipped WordPiece files (bow preset)
    are read by ``tokenizers`` alone when ``plain=True`` and the revision is theirs: the same
    IDs, without importing transformers (~0.9 s of every fresh kernel)."""

    def __init__(self, path: Path, *, revision: str | None = None, plain: bool = False) -> None:
        """Load the tokenizer once. ``revision``: its fingerprint, taken before a timed load
        (R3.2); without it the files are hashed here. ``plain``: read the shipped WordPiece
        files without transformers where the revision says they are those files."""
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
        self._vocab_size = len(self.hf)
        # The fast tokenizer's own Rust object (loaded once, R3.2); tokenize() clears any
        # padding/truncation state a transformers call left on it.
        self._fast: Any = self.hf.backend_tokenizer if getattr(self.hf, "is_fast", False) else None

    def _load_plain(self) -> None:
        """The shipped WordPiece files through ``tokenizers`` alone: what ``_load_hf`` gives
        for them (pad ID, special tokens, vocabulary size and IDs), without transformers."""
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
        self._vocab_size = self._fast.get_vocab_size(with_added_tokens=True)

    @property
    def vocab_size(self) -> int:
        """Token IDs the tokenizer can give, added tokens included (``len`` of a HF one)."""
        return self._vocab_size

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
        """Token IDs (special tokens included) cut to ``context``; a text longer than that
        counts once in ``truncated_texts`` and its excess in ``dropped_tokens`` (R2.3)."""
        self.check_context(context, max_context)
        texts = list(texts)
        if self._fast is not None:
            if self._fast.padding is not None:
                self._fast.no_padding()
            if self._fast.truncation is not None:
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
    """Keep every special token and the first content tokens, ``context`` in all: what the
    tokenizer's own right truncation gives, from one encoding instead of two."""
    if len(ids) <= context:
        return list(ids)
    room = context - sum(special)
    kept: list[int] = []
    for token, is_special in zip(ids, special, strict=True):
        if is_special or room > 0:
            kept.append(token)
            room -= not is_special
    return kept

"""The shipped WordPiece files read without transformers give what transformers gives (issue 25).

A bow run tokenises with the ``tokenizers`` library alone when its tokenizer folder holds the
shipped WordPiece files (``TextTokenizer(plain=True)``), so its fresh kernel never imports
transformers. That is only honest if the IDs, special tokens, padding ID and vocabulary size
are exactly those of ``AutoTokenizer`` on the same files: checked here on every text of the
corpus (train, tune and eval) and on texts chosen to stress normalisation.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpubench_nb.engine.backends.tokenization import (
    WORDPIECE_DIR,
    WORDPIECE_REVISION,
    TextTokenizer,
    tokenizer_files,
)
from gpubench_nb.protocol.fingerprint import sha256_files

HARD_TEXTS = [
    "",
    " ",
    "Ünïcödé naïve café ÀÉÎÕÜ",
    "中文字符 test 日本語",
    "a\x00b\tc\u200bd\u00a0e",
    "x" * 5000,
    "🙂 emoji 👩‍💻",
    "İstanbul ß ﬁ ǅ",
    "[CLS] [SEP] [PAD] [MASK] [UNK] [cls]",
    "word " * 400,
]


def _corpus_texts(repo_root: Path) -> list[str]:
    texts = []
    for split in ("train", "tune", "eval"):
        path = repo_root / "data" / "debian-sections" / f"{split}.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines()
        texts += [json.loads(line)["text"] for line in lines]
    return texts


def test_the_revision_constant_is_the_shipped_files() -> None:
    """WORDPIECE_REVISION is compared at load without hashing (R3.2): it must be the files'."""
    assert sha256_files(tokenizer_files(WORDPIECE_DIR), WORDPIECE_DIR) == WORDPIECE_REVISION


@pytest.mark.slow
@pytest.mark.parametrize("context", [8, 128, 512])
def test_plain_and_transformers_routes_give_the_same_tokens(repo_root: Path, context: int) -> None:
    """Every corpus text and each hard text: the same IDs, the same truncation counts."""
    texts = _corpus_texts(repo_root) + HARD_TEXTS
    plain = TextTokenizer(WORDPIECE_DIR, plain=True)
    hf = TextTokenizer(WORDPIECE_DIR)
    assert plain.hf is None and hf.hf is not None  # two routes really were taken
    assert (plain.pad_id, plain.special_count, plain.vocab_size) == (
        hf.pad_id,
        hf.special_count,
        hf.vocab_size,
    )
    assert plain.revision == hf.revision == WORDPIECE_REVISION
    a, b = plain.tokenize(texts, context), hf.tokenize(texts, context)
    assert len(a.input_ids) == len(texts) > 7000
    assert a.input_ids == b.input_ids
    assert (a.truncated_texts, a.dropped_tokens) == (b.truncated_texts, b.dropped_tokens)
    assert a.truncated_texts > 0  # the long texts were cut


def test_the_plain_route_pads_and_truncates_nothing_on_its_own() -> None:
    """tokenizer.json itself declares padding to 128 and truncation at 128: a plain load must
    clear both, or a short text would come back padded (and batches would do pad work)."""
    plain = TextTokenizer(WORDPIECE_DIR, plain=True)
    out = plain.tokenize(["a", "word " * 300], 512)
    assert out.input_ids[0] == [101, 1037, 102]
    assert len(out.input_ids[1]) == 302 and out.truncated_texts == 0


def test_another_tokenizer_folder_goes_through_transformers(tmp_path: Path) -> None:
    """One changed byte and the folder is no longer the shipped files: transformers reads it."""
    folder = tmp_path / "tok"
    shutil.copytree(WORDPIECE_DIR, folder)
    config = folder / "tokenizer_config.json"
    config.write_text(config.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert sha256_files(tokenizer_files(folder), folder) != WORDPIECE_REVISION
    assert TextTokenizer(folder, plain=True).hf is not None


def test_a_broken_shipped_file_is_a_clear_error(tmp_path: Path) -> None:
    """A tokenizer.json that does not parse, under the shipped revision: BackendError (R1.1)."""
    from gpubench_nb.errors import BackendError

    folder = tmp_path / "tok"
    shutil.copytree(WORDPIECE_DIR, folder)
    (folder / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(BackendError, match="cannot load the tokenizer at"):
        TextTokenizer(folder, revision=WORDPIECE_REVISION, plain=True)

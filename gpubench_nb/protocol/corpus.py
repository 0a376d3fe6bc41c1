"""The corpus ledger: load a frozen corpus, fingerprint it, list its IDs, keep splits apart."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from gpubench_nb.atomic import write_text_atomic
from gpubench_nb.errors import CorpusError
from gpubench_nb.protocol.corpus_file import (
    HASH_CHUNK,
    CorpusItem,
    Revision,
    canonical_record,
    looks_like_csv,
    read_items,
)
from gpubench_nb.protocol.ids import id_key
from gpubench_nb.protocol.outputs import regular_input
from gpubench_nb.protocol.splits import check_disjoint

MAX_LISTED = 20  # problems listed in one error message; the count is always complete
_IDENTITY_TAG = b"gpubench-nb corpus identity v1\n"


@dataclass(frozen=True)
class Corpus:
    """A loaded corpus, in file order; ``revision`` is the SHA-256 of its canonical form."""

    path: Path
    items: tuple[CorpusItem, ...]
    revision: str
    # False: loaded for acceptance (IDs and labels only); the revision is still the texts'.
    texts_kept: bool = True
    # How it was read (load_corpus's keywords: format, fields, classes), so it can be read
    # again the same way: end_to_end times that read (R3.1).
    read_as: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Acceptance relies on this: a ledger lists each expected ID once (R1.2, R1.5), two IDs
        # equal after NFC normalisation being the same ID (protocol/ids.py).
        if len(set(map(id_key, self.ids))) != len(self.items):
            twice = [k for k, n in Counter(map(id_key, self.ids)).items() if n > 1]
            raise CorpusError(
                f"corpus {self.path} lists {len(twice)} ID(s) more than once (first: "
                f"{twice[0]!r}); every ID must be unique",
                rule="R1.2",
            )

    @cached_property
    def ids(self) -> tuple[str, ...]:
        return tuple(item.id for item in self.items)

    def _need_texts(self, why: str) -> None:
        if not self.texts_kept:
            raise CorpusError(
                f"corpus {self.path} was loaded without its texts (for acceptance); load it "
                f"with texts=True {why}"
            )

    @cached_property
    def texts(self) -> tuple[str, ...]:
        self._need_texts("to classify it")
        return tuple(item.text for item in self.items)

    @cached_property
    def labels(self) -> tuple[str, ...]:
        return tuple(item.label for item in self.items)

    def __len__(self) -> int:
        return len(self.items)

    @cached_property
    def identity(self) -> str:
        """What the corpus *is* (R5.3): :func:`corpus_identity` of its items (texts needed)."""
        self._need_texts("for its identity")
        return corpus_identity(self.items)


def canonical_revision(items: Sequence[CorpusItem]) -> str:
    """SHA-256 of the items, not the bytes (R1.1): format, BOM, line ends and key order do not
    change it; any ID, text, label or order does."""
    revision = Revision()
    for item in items:
        revision.pending.append(canonical_record(item.id, item.text, item.label))
        if len(revision.pending) >= HASH_CHUNK:
            revision.flush()
    return revision.hexdigest()


def corpus_identity(items: Sequence[CorpusItem]) -> str:
    """SHA-256 of the corpus as a set of items, what a ledger counts (R5.3), unlike the revision,
    which pins the order too (R2.1)."""
    records = sorted(canonical_record(id_key(item.id), item.text, item.label) for item in items)
    digest = hashlib.sha256(_IDENTITY_TAG)
    for record in records:
        digest.update(record.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def make_corpus(path: Path, items: Sequence[CorpusItem]) -> Corpus:
    """Build a Corpus from items already checked (used by tests and benchmarks too)."""
    items = tuple(items)
    return Corpus(path=Path(path), items=items, revision=canonical_revision(items))


def load_corpus(
    path: str | Path,
    *,
    fmt: str = "jsonl",
    id_field: str = "id",
    text_field: str = "text",
    label_field: str = "label",
    classes: Sequence[str] | None = None,
    key: str = "corpus.path",
    texts: bool = True,
) -> Corpus:
    """Load a JSONL or CSV corpus as a stream, refused with every problem and its line (R1.1, R1.2);
    texts verbatim but CRLF -> LF (any cut is the backend's, R2.3); ``texts=False`` keeps none."""
    path = Path(path)
    if fmt not in ("jsonl", "csv"):
        raise CorpusError(
            f"{path}: corpus format {fmt!r} is not supported; use 'jsonl' or 'csv'", rule="R1.1"
        )
    fields = (id_field, text_field, label_field)
    regular_input(path, f"corpus ({key})", CorpusError, "R1.1")  # a FIFO would block the read
    try:
        with open(path, "rb") as handle:
            head = handle.readline(4096)
        items, revision, problems = read_items(path, fmt, fields, classes, texts)
    except OSError as exc:
        raise CorpusError(
            f"{key}: cannot read the corpus file {path} ({exc.strerror or exc}); fix {key} in the "
            "experiment YAML (a relative path there is relative to the YAML's folder)",
            rule="R1.1",
        ) from exc
    if not problems and not items:
        problems.add("empty", 0, "the corpus holds no item; the evaluation needs at least one")
    if problems:
        kinds = problems.lines()
        if fmt == "jsonl" and looks_like_csv(head):
            kinds.insert(
                0, "the file looks like CSV, not JSONL: if it is, write corpus.format: csv"
            )
        more = max(0, len(kinds) - MAX_LISTED)
        raise CorpusError(
            f"corpus {path} ({fmt}) refused, {len(problems)} problem(s): "
            + "; ".join(kinds[:MAX_LISTED])
            + (f"; ... and {more} more kind(s)" if more else ""),
            rule="R1.1",
        )
    read_as = {"fmt": fmt, "id_field": id_field, "text_field": text_field}
    read_as.update(label_field=label_field, classes=classes, key=key)
    return Corpus(path, tuple(items), revision, texts_kept=texts, read_as=read_as)


def load_experiment_corpus(exp: Any, split: str = "eval", *, texts: bool = True) -> Corpus:
    """Load the declared ``eval``, ``train`` or ``tune`` split with the declared fields
    (``texts=False``: IDs and labels only, for acceptance; see ``load_corpus``)."""
    spec = exp.corpus
    if split not in ("eval", "train", "tune"):
        raise CorpusError(f"unknown split {split!r}; use 'eval', 'train' or 'tune'", rule="R1.4")
    path = spec.path if split == "eval" else getattr(spec, split)
    if path is None:
        raise CorpusError(
            f"no {split} split is declared in the experiment (corpus.{split}); "
            f"declare it or do not ask for it",
            rule="R1.4",
        )
    named = {name: getattr(spec, name) for name in ("id_field", "text_field", "label_field")}
    key = "corpus.path" if split == "eval" else f"corpus.{split}"
    return load_corpus(path, fmt=spec.format, classes=exp.classes, key=key, texts=texts, **named)


def load_declared_corpora(exp: Any) -> tuple[Corpus, dict[str, Corpus]]:
    """The eval split and each declared train/tune split, checked disjoint from eval (R1.4)."""
    corpus = load_experiment_corpus(exp, "eval")
    others = {
        split: load_experiment_corpus(exp, split)
        for split in ("train", "tune")
        if getattr(exp.corpus, split) is not None
    }
    check_disjoint(corpus, others)
    return corpus, others


def write_expected_ids(corpus: Corpus, path: Path) -> None:
    """Write the expected IDs, one a line, in corpus order (R1.2), atomically."""
    write_text_atomic(Path(path), "".join(f"{item_id}\n" for item_id in corpus.ids))

"""The corpus ledger: load a frozen corpus, fingerprint it, list its IDs, keep splits apart."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from gpubench_nb.atomic import write_text_atomic
from gpubench_nb.errors import CorpusError
from gpubench_nb.protocol.ids import DuplicateKeyError, id_key, id_problem, strict_json_loads

MAX_LISTED = 20  # problems listed in one error message; the count is always complete
_BOM = b"\xef\xbb\xbf"
# Version tag of the canonical form: changing the serialisation must change every revision.
_CANONICAL_TAG = b"gpubench-nb corpus v1\n"
_IDENTITY_TAG = b"gpubench-nb corpus identity v1\n"


@dataclass(frozen=True)
class CorpusItem:
    id: str
    text: str
    label: str


@dataclass(frozen=True)
class Corpus:
    """A loaded corpus, in file order; ``revision`` is the SHA-256 of its canonical form."""

    path: Path
    items: tuple[CorpusItem, ...]
    revision: str

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

    @cached_property
    def texts(self) -> tuple[str, ...]:
        return tuple(item.text for item in self.items)

    @cached_property
    def labels(self) -> tuple[str, ...]:
        return tuple(item.label for item in self.items)

    def __len__(self) -> int:
        return len(self.items)

    @cached_property
    def identity(self) -> str:
        """What the corpus *is* (R5.3): :func:`corpus_identity` of its items."""
        return corpus_identity(self.items)


def canonical_revision(items: Sequence[CorpusItem]) -> str:
    """SHA-256 of the items themselves, not of the file bytes (R1.1).

    Each item is hashed as one compact JSON array ``[id, text, label]`` (UTF-8, no ASCII
    escaping) plus a newline, in corpus order, after a version tag. So JSONL or CSV, with or
    without a BOM, CRLF or LF, any field names and any key order give the same revision for the
    same items in the same order; any change to an ID, a text, a label or the order changes it.
    """
    digest = hashlib.sha256(_CANONICAL_TAG)
    for item in items:
        record = json.dumps(
            [item.id, item.text, item.label], ensure_ascii=False, separators=(",", ":")
        )
        digest.update(record.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def corpus_identity(items: Sequence[CorpusItem]) -> str:
    """SHA-256 of the corpus as a set of items, order-independent and canonical (R5.3).

    The revision pins the order too (R2.1: variants see the same input order); the identity is
    what a ledger counts: the same items (ID, text, label) in another order, or with IDs written
    in another Unicode form that NFC makes equal (the tool's own ID rule, protocol/ids.py), are
    one corpus (issue 22 §4). Each item is the compact JSON array ``[NFC id, text, label]``;
    the arrays are sorted, then hashed one per line after a version tag.
    """
    records = sorted(
        json.dumps(
            [id_key(item.id), item.text, item.label], ensure_ascii=False, separators=(",", ":")
        )
        for item in items
    )
    digest = hashlib.sha256(_IDENTITY_TAG)
    for record in records:
        digest.update(record.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def make_corpus(path: Path, items: Sequence[CorpusItem]) -> Corpus:
    """Build a Corpus from items already checked (used by tests and benchmarks too)."""
    items = tuple(items)
    return Corpus(path=Path(path), items=items, revision=canonical_revision(items))


# ---------------------------------------------------------------------------------------------
# Reading


def _decode_lines(path: Path, raw: bytes, problems: list[str]) -> str | None:
    """Decode UTF-8 (BOM tolerated); list every line holding non-UTF-8 bytes (R1.1)."""
    if raw.startswith(_BOM):
        raw = raw[len(_BOM) :]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    for number, line in enumerate(raw.split(b"\n"), start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(
                f"line {number} [R1.1]: bytes that are not UTF-8 at byte {exc.start + 1} of the "
                f"line ({line[exc.start : exc.start + 4]!r}); re-save the file as UTF-8"
            )
    return None


def _records_jsonl(
    text: str, fields: tuple[str, str, str], problems: list[str]
) -> list[tuple[int, dict[str, Any]]]:
    records = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not open a new one
    for number, line in enumerate(lines, start=1):
        line = line.removesuffix("\r")  # CRLF tolerated
        if not line.strip():
            problems.append(f"line {number}: blank line; remove it (one JSON object per line)")
            continue
        try:
            obj = strict_json_loads(line)
        except DuplicateKeyError as exc:
            problems.append(
                f"line {number}: {exc}; a record gives each field once (JSON would keep the last "
                "silently)"
            )
            continue
        except ValueError as exc:
            problems.append(f"line {number}: not valid JSON ({exc}); fix or remove the line")
            continue
        if not isinstance(obj, dict):
            problems.append(
                f"line {number}: a JSON {type(obj).__name__}, not an object; write one "
                f'{{"{fields[0]}": ..., "{fields[1]}": ..., "{fields[2]}": ...}} per line'
            )
            continue
        records.append((number, obj))
    return records


def _records_csv(
    text: str, fields: tuple[str, str, str], problems: list[str]
) -> list[tuple[int, dict[str, Any]]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        return []
    except csv.Error as exc:
        problems.append(f"line 1: unreadable CSV header ({exc})")
        return []
    if len(set(header)) != len(header):
        twice = sorted({name for name in header if header.count(name) > 1})
        problems.append(f"line 1: header names {twice} appear more than once; rename them")
        return []
    absent = [name for name in fields if name not in header]
    if absent:
        problems.append(
            f"line 1: header lacks the declared field(s) {absent} (header: {header}); fix "
            "corpus.id_field / text_field / label_field or the header"
        )
        return []
    records = []
    start = reader.line_num + 1
    try:
        for row in reader:
            if not row or row == [""]:
                problems.append(f"line {start}: blank line; remove it (one record per line)")
            elif len(row) != len(header):
                problems.append(
                    f"line {start}: {len(row)} fields where the header has {len(header)}; "
                    "quote fields that contain commas, quotes or newlines (RFC 4180)"
                )
            else:
                records.append((start, dict(zip(header, row, strict=True))))
            start = reader.line_num + 1
    except csv.Error as exc:
        problems.append(f"line {start}: unreadable CSV ({exc}); check the quoting")
    return records


def _clean_text(value: str) -> str:
    # CRLF inside a text is a file convention, not content: a CSV re-saved with CRLF keeps its
    # revision. Nothing else is changed: no stripping, no truncation (R2.3).
    return value.replace("\r\n", "\n")


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def load_corpus(
    path: str | Path,
    *,
    fmt: str = "jsonl",
    id_field: str = "id",
    text_field: str = "text",
    label_field: str = "label",
    classes: Sequence[str] | None = None,
) -> Corpus:
    """Load a JSONL or CSV corpus; refuse it, listing every problem with its line (R1.1, R1.2).

    Refused: bytes that are not UTF-8, unreadable records, missing fields, empty or
    whitespace-padded IDs, duplicate IDs, missing or empty texts, labels outside ``classes``.
    Texts are kept verbatim (only CRLF becomes LF): any shortening is the backend's, and is
    counted there (R2.3).
    """
    path = Path(path)
    if fmt not in ("jsonl", "csv"):
        raise CorpusError(
            f"{path}: corpus format {fmt!r} is not supported; use 'jsonl' or 'csv'", rule="R1.1"
        )
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CorpusError(
            f"cannot read corpus {path} ({exc.strerror or exc}); fix corpus.path", rule="R1.1"
        ) from exc

    fields = (id_field, text_field, label_field)
    problems: list[str] = []
    text = _decode_lines(path, raw, problems)
    records: list[tuple[int, dict[str, Any]]] = []
    if text is not None:
        reader = _records_jsonl if fmt == "jsonl" else _records_csv
        records = reader(text, fields, problems)

    allowed = None if classes is None else frozenset(classes)
    first_line: dict[str, tuple[int, str]] = {}  # NFC key -> (line, ID as written)
    items: list[CorpusItem] = []
    for number, record in records:
        item_id = record.get(id_field)
        body = record.get(text_field)
        label = record.get(label_field)
        bad = False
        if not isinstance(item_id, str):
            what = "missing" if item_id is None else f"a {type(item_id).__name__}, not a string"
            problems.append(
                f"line {number} [R1.2]: field {id_field!r} is {what}; give every item "
                "a unique string ID"
            )
            bad = True
        elif (why := id_problem(item_id)) is not None:
            problems.append(
                f"line {number} [R1.2]: ID {item_id!r} {why}; IDs are canonical text: "
                "non-empty, no surrounding whitespace, no control or line-separator character"
            )
            bad = True
        elif not _encodable(item_id):
            problems.append(f"line {number} [R1.1]: ID {item_id!r} is not valid Unicode")
            bad = True
        elif (key := id_key(item_id)) in first_line:
            first, first_id = first_line[key]
            same = "" if first_id == item_id else f" ({first_id!r} after Unicode NFC normalisation)"
            problems.append(
                f"line {number} [R1.2]: duplicate ID {item_id!r}{same} (first on line "
                f"{first}); every ID must be unique"
            )
            bad = True
        else:
            first_line[key] = (number, item_id)
        if not isinstance(body, str) or not body.strip():
            what = "missing" if body is None else repr(body)[:40]
            problems.append(
                f"line {number}: text field {text_field!r} is {what}; every item "
                "needs a non-empty text"
            )
            bad = True
        elif not _encodable(body):
            problems.append(f"line {number} [R1.1]: text is not valid Unicode (lone surrogate)")
            bad = True
        if not isinstance(label, str) or not label:
            what = "missing" if label is None else repr(label)[:40]
            problems.append(
                f"line {number} [R1.3]: label field {label_field!r} is {what}; "
                "every item needs its verified gold label"
            )
            bad = True
        elif allowed is not None and label not in allowed:
            problems.append(
                f"line {number} [R1.3]: label {label!r} is not one of the declared classes "
                f"{sorted(allowed)}; fix the label or declare the class"
            )
            bad = True
        if not bad:
            items.append(CorpusItem(item_id, _clean_text(body), label))

    if not problems and not items:
        problems.append("the corpus holds no item; the evaluation needs at least one")
    if problems:
        listed = "; ".join(problems[:MAX_LISTED])
        more = f"; ... and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
        raise CorpusError(
            f"corpus {path} ({fmt}) refused, {len(problems)} problem(s): {listed}{more}",
            rule="R1.1",
        )
    return make_corpus(path, items)


def load_experiment_corpus(exp: Any, split: str = "eval") -> Corpus:
    """Load the declared ``eval``, ``train`` or ``tune`` split with the declared fields."""
    spec = exp.corpus
    if split == "eval":
        path = spec.path
    elif split in ("train", "tune"):
        path = getattr(spec, split)
        if path is None:
            raise CorpusError(
                f"no {split} split is declared in the experiment (corpus.{split}); "
                f"declare it or do not ask for it",
                rule="R1.4",
            )
    else:
        raise CorpusError(f"unknown split {split!r}; use 'eval', 'train' or 'tune'", rule="R1.4")
    return load_corpus(
        path,
        fmt=spec.format,
        id_field=spec.id_field,
        text_field=spec.text_field,
        label_field=spec.label_field,
        classes=exp.classes,
    )


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


# ---------------------------------------------------------------------------------------------
# R1.4: splits stay separate


def normalise_text(text: str) -> str:
    """NFKC, casefold and collapse whitespace: the form in which two texts count as identical.

    Unicode normalisation first, so that "é" typed as one code point or as "e" + a combining
    accent, or a full-width "Ａ", do not let the same text pass as two (R1.4, issue 11 §6).
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(unicodedata.normalize("NFKC", folded).split())


def _overlap(a: Corpus, b: Corpus) -> tuple[list[str], list[tuple[str, str]]]:
    b_ids = set(map(id_key, b.ids))
    shared_ids = [item_id for item_id in a.ids if id_key(item_id) in b_ids]
    b_texts: dict[str, str] = {}
    for item in b.items:
        b_texts.setdefault(normalise_text(item.text), item.id)
    shared_texts = [
        (item.id, b_texts[key]) for item in a.items if (key := normalise_text(item.text)) in b_texts
    ]
    return shared_ids, shared_texts


def check_disjoint(eval: Corpus, others: Mapping[str, Corpus]) -> None:
    """Refuse any shared ID or identical normalised text between splits (R1.4).

    ``eval`` is compared with every other split, and the other splits with each other (a tune
    set that holds training items tunes on what was fitted).
    """
    pairs = [("eval", eval, name, corpus) for name, corpus in others.items()]
    names = list(others)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            pairs.append((first, others[first], second, others[second]))
    problems = []
    for a_name, a, b_name, b in pairs:
        shared_ids, shared_texts = _overlap(a, b)
        if shared_ids:
            problems.append(
                f"{len(shared_ids)} ID(s) in both {a_name} ({a.path.name}) and {b_name} "
                f"({b.path.name}), e.g. {shared_ids[:5]}"
            )
        if shared_texts:
            examples = [f"{a_name}:{x} = {b_name}:{y}" for x, y in shared_texts[:5]]
            problems.append(
                f"{len(shared_texts)} text(s) identical after Unicode normalisation, casefolding "
                f"and whitespace collapsing in both {a_name} and {b_name}, e.g. {examples}"
            )
    if problems:
        raise CorpusError(
            "training, tuning and evaluation data overlap: "
            + "; ".join(problems)
            + "; remove the shared items from the training or tuning split",
            rule="R1.4",
        )

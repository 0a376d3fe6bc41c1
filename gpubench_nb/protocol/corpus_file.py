"""Reading and checking a corpus file as a stream: its records, each record's ID, text and
label (R1.1-R1.3), its problems (grouped by kind), and the canonical revision fed one item at a
time (a large corpus is never held whole). JSON lines are read strictly: a key given twice in
one object is refused (the predictions file reads its lines the same way)."""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring as json_string  # json.dumps's, ensure_ascii=False
from pathlib import Path
from typing import Any

from gpubench_nb.protocol.ids import id_key, id_problem
from gpubench_nb.protocol.problems import Problems

BOM = b"\xef\xbb\xbf"
# Version tag of the canonical form: changing the serialisation must change every revision.
CANONICAL_TAG = b"gpubench-nb corpus v1\n"
HASH_CHUNK = 4096  # records per digest update
Records = Iterator[tuple[int, dict[str, Any], bool]]  # (line, record, may hold a surrogate)


class DuplicateKeyError(ValueError):
    """A JSON object names the same key twice (``json`` keeps the last one silently)."""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise DuplicateKeyError(f"key {twice!r} is given twice in one object")
    return obj


# One decoder, built once: json.loads(..., object_pairs_hook=...) would build one per call and
# cost about twice as much on a million lines; this one costs about what plain json.loads does.
_STRICT = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys)
strict_json_loads = _STRICT.decode
_scan_once = _STRICT.scan_once


def strict_json_line(line: str) -> Any:
    """``strict_json_loads`` of one line: the C scanner alone on a well-formed line; anything
    else (leading whitespace, trailing data, an error to explain) goes the full way."""
    try:
        obj, end = _scan_once(line, 0)
    except (StopIteration, ValueError):
        return strict_json_loads(line)
    if end == len(line) or line[end:].isspace():  # e.g. the line's own "\n" or "\r\n"
        return obj
    return strict_json_loads(line)


@dataclass(frozen=True, slots=True)
class CorpusItem:
    id: str
    text: str  # "" when the corpus was loaded without its texts (``Corpus.texts_kept``)
    label: str


def encodable(text: str) -> bool:
    """True when ``text`` encodes as UTF-8: no lone surrogate, whether from a ``\\uD800``
    escape or from bytes that were not UTF-8, read with ``errors="surrogateescape"``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def canonical_record(item_id: str, text: str, label: str) -> str:
    """``json.dumps([id, text, label], ensure_ascii=False, separators=(",", ":"))``, written
    out: the same C string escaper, without building an encoder per item."""
    return f"[{json_string(item_id)},{json_string(text)},{json_string(label)}]"


class JsonStrings(dict):
    """``json_string`` of each key, computed at its first use."""

    def __missing__(self, key: str) -> str:
        self[key] = value = json_string(key)
        return value


class Revision:
    """The canonical revision, fed one item at a time (see ``corpus.canonical_revision``)."""

    def __init__(self) -> None:
        self._digest = hashlib.sha256(CANONICAL_TAG)
        self.pending: list[str] = []  # canonical records not hashed yet

    def flush(self) -> None:
        if self.pending:
            self._digest.update(("\n".join(self.pending) + "\n").encode("utf-8"))
            self.pending.clear()

    def hexdigest(self) -> str:
        self.flush()
        return self._digest.hexdigest()


def _not_utf8(problems: Problems, number: int, line: bytes, exc: UnicodeDecodeError) -> None:
    problems.add(
        "not-utf8",
        number,
        f"line {number} [R1.1]: bytes that are not UTF-8 at byte {exc.start + 1} of the "
        f"line ({line[exc.start : exc.start + 4]!r}); re-save the file as UTF-8",
    )


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(number, line)`` decoded in large chunks (a BOM dropped, only LF ends a line); raises
    UnicodeDecodeError on bytes that are not UTF-8 (then ``byte_lines`` names them)."""
    with open(path, encoding="utf-8-sig", newline="\n") as handle:
        yield from enumerate(handle, start=1)


def byte_lines(path: Path, problems: Problems) -> Iterator[tuple[int, str]]:
    """``(number, line)`` decoded line by line; each line that is not UTF-8 is a problem."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1:
                raw = raw.removeprefix(BOM)
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                _not_utf8(problems, number, raw, exc)


def jsonl_records(
    lines: Iterator[tuple[int, str]], fields: tuple[str, str, str], problems: Problems
) -> Records:
    """``(line number, object, may hold a lone surrogate)`` per good line, read as a stream:
    the file is never held whole in memory."""
    for number, line in lines:  # each line keeps its "\n" (and a CRLF file its "\r"):
        if not line or line.isspace():  # JSON whitespace after the object, no copy to strip
            problems.add(
                "blank", number, f"line {number}: blank line; remove it (one JSON object per line)"
            )
            continue
        try:
            obj = strict_json_line(line)
        except DuplicateKeyError as exc:
            problems.add(
                "duplicate-key",
                number,
                f"line {number}: {exc}; a record gives each field once (JSON would keep the last "
                "silently)",
            )
            continue
        except ValueError as exc:
            problems.add(
                "bad-json", number, f"line {number}: not valid JSON ({exc}); fix or remove the line"
            )
            continue
        if type(obj) is not dict:
            problems.add(
                "not-object",
                number,
                f"line {number}: a JSON {type(obj).__name__}, not an object; write one "
                f'{{"{fields[0]}": ..., "{fields[1]}": ..., "{fields[2]}": ...}} per line',
            )
            continue
        yield number, obj, "\\u" in line  # only a \uD800-style escape makes a lone surrogate


def csv_records(path: Path, fields: tuple[str, str, str], problems: Problems) -> Records:
    """``(physical line number, record, False)`` per good row, read as a stream; raises
    UnicodeDecodeError on bytes that are not UTF-8."""
    with open(path, encoding="utf-8-sig", newline="") as text:
        reader = csv.reader(text)
        try:
            header = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            problems.add("csv-header", 1, f"line 1: unreadable CSV header ({exc})")
            return
        if len(set(header)) != len(header):
            twice = sorted({name for name in header if header.count(name) > 1})
            problems.add(
                "csv-header-twice",
                1,
                f"line 1: header names {twice} appear more than once; rename them",
            )
            return
        absent = [name for name in fields if name not in header]
        if absent:
            problems.add(
                "csv-header-fields",
                1,
                f"line 1: header lacks the declared field(s) {absent} (header: {header}); fix "
                "corpus.id_field / text_field / label_field or the header",
            )
            return
        start = reader.line_num + 1
        try:
            for row in reader:
                if not row or row == [""]:
                    problems.add(
                        "blank", start, f"line {start}: blank line; remove it (one record per line)"
                    )
                elif len(row) != len(header):
                    problems.add(
                        "csv-fields",
                        start,
                        f"line {start}: {len(row)} fields where the header has {len(header)}; "
                        "quote fields that contain commas, quotes or newlines (RFC 4180)",
                    )
                else:
                    yield start, dict(zip(header, row, strict=True)), False
                start = reader.line_num + 1
        except csv.Error as exc:
            problems.add(
                "csv-quoting", start, f"line {start}: unreadable CSV ({exc}); check the quoting"
            )


def read_items(
    path: Path,
    fmt: str,
    fields: tuple[str, str, str],
    classes: Sequence[str] | None,
    keep_texts: bool,
) -> tuple[list[CorpusItem], str, Problems]:
    """Read and check a JSONL or CSV corpus file as a stream: its good items, their canonical
    revision and every problem (R1.1, R1.2); OSError propagates (the caller names the key)."""
    problems = Problems()
    try:
        if fmt == "jsonl":
            records = jsonl_records(text_lines(path), fields, problems)
        else:
            records = csv_records(path, fields, problems)
        return (*_checked_items(records, fields, classes, problems, keep_texts), problems)
    except UnicodeDecodeError:  # read again, naming every line that is not UTF-8 (R1.1)
        problems = Problems()
        if fmt == "jsonl":
            records = jsonl_records(byte_lines(path, problems), fields, problems)
            return (*_checked_items(records, fields, classes, problems, keep_texts), problems)
        for _ in byte_lines(path, problems):
            pass
        return [], "", problems


def _checked_items(
    records: Records,
    fields: tuple[str, str, str],
    classes: Sequence[str] | None,
    problems: Problems,
    keep_texts: bool,
) -> tuple[list[CorpusItem], str]:
    """Check each record's ID, text and label; the items and the canonical revision."""
    id_field, text_field, label_field = fields
    ids = _IdLedger(id_field, problems)
    allowed = None if classes is None else frozenset(classes)
    items: list[CorpusItem] = []
    revision = Revision()
    pending, kinds = revision.pending, problems.kinds
    label_json = JsonStrings()  # few labels, each escaped once (as _canonical would)
    for number, record, escaped in records:
        item_id = record.get(id_field)
        body = record.get(text_field)
        label = record.get(label_field)
        # Every field is checked, so that one pass lists every problem of the record.
        good_id = ids.admit(item_id, number, escaped)
        good_text = _text_ok(body, number, escaped, text_field, problems)
        good_label = _label_ok(label, number, label_field, allowed, problems)
        if good_id and good_text and good_label and not kinds:  # once refused, only problems
            # CRLF inside a text is a file convention, not content: a CSV re-saved with CRLF
            # keeps its revision. Nothing else changes: no stripping, no truncation (R2.3).
            text = body.replace("\r\n", "\n") if "\r" in body else body
            pending.append(f"[{json_string(item_id)},{json_string(text)},{label_json[label]}]")
            if len(pending) >= HASH_CHUNK:
                revision.flush()
            items.append(CorpusItem(item_id, text if keep_texts else "", label))
    return items, revision.hexdigest()


class _IdLedger:
    """The IDs met so far: each must be a string, canonical text, valid Unicode and new (R1.2)."""

    def __init__(self, id_field: str, problems: Problems) -> None:
        self.id_field = id_field
        self.problems = problems
        self.first_line: dict[str, int] = {}  # NFC key -> line of first use
        self.written: dict[str, str] = {}  # NFC key -> the ID as written, where the two differ

    def admit(self, item_id: Any, number: int, escaped: bool) -> bool:
        """Record the ID of line ``number``; False (and a problem added) when it is refused."""
        if type(item_id) is not str:
            what = "missing" if item_id is None else f"a {type(item_id).__name__}, not a string"
            self.problems.add(
                f"id-{type(item_id).__name__}",
                number,
                f"line {number} [R1.2]: field {self.id_field!r} is {what}; give every item "
                "a unique string ID",
            )
            return False
        if (
            not (  # the usual ID, printable ASCII without an edge space (id_problem's own)
                item_id.isascii()
                and item_id.isprintable()
                and item_id[:1] not in ("", " ")
                and item_id[-1] != " "
            )
            and (why := id_problem(item_id)) is not None
        ):
            self.problems.add(
                "id-form",
                number,
                f"line {number} [R1.2]: ID {item_id!r} {why}; IDs are canonical text: "
                "non-empty, no surrounding whitespace, no control or line-separator character",
            )
            return False
        if escaped and not encodable(item_id):
            self.problems.add(
                "id-unicode", number, f"line {number} [R1.1]: ID {item_id!r} is not valid Unicode"
            )
            return False
        key = item_id if item_id.isascii() else id_key(item_id)
        if key in self.first_line:
            self._duplicate(item_id, key, number)
            return False
        self.first_line[key] = number
        if key is not item_id and key != item_id:
            self.written[key] = item_id
        return True

    def _duplicate(self, item_id: str, key: str, number: int) -> None:
        first_id = self.written.get(key, key)
        same = "" if first_id == item_id else f" ({first_id!r} after Unicode NFC normalisation)"
        self.problems.add(
            "id-duplicate",
            number,
            f"line {number} [R1.2]: duplicate ID {item_id!r}{same} (first on line "
            f"{self.first_line[key]}); every ID must be unique",
        )


def _absent(
    kind: str, value: Any, number: int, field: str, need: str, problems: Problems, rule: str = ""
) -> bool:
    """A missing or empty text or label: one problem naming its field, the rule and what every
    item needs; always False."""
    what = "missing" if value is None else repr(value)[:40]
    tag = f" [{rule}]" if rule else ""
    problems.add(
        f"{kind}-missing" if value is None else f"{kind}-empty",
        number,
        f"line {number}{tag}: {kind} field {field!r} is {what}; every item needs {need}",
    )
    return False


def _text_ok(body: Any, number: int, escaped: bool, text_field: str, problems: Problems) -> bool:
    """A text is a non-empty, not blank, valid Unicode string; False adds the problem."""
    if type(body) is not str or not body or body.isspace():  # no copy of the text
        return _absent("text", body, number, text_field, "a non-empty text", problems)
    if escaped and not encodable(body):
        problems.add(
            "text-unicode",
            number,
            f"line {number} [R1.1]: text is not valid Unicode (lone surrogate)",
        )
        return False
    return True


def _label_ok(
    label: Any,
    number: int,
    label_field: str,
    allowed: frozenset[str] | None,
    problems: Problems,
) -> bool:
    """A label is a non-empty string among the declared classes (R1.3); False adds the problem."""
    if type(label) is not str or not label:
        need = "its verified gold label"
        return _absent("label", label, number, label_field, need, problems, rule="R1.3")
    if allowed is not None and label not in allowed:
        problems.add(
            f"label-undeclared {label!r}",
            number,
            f"line {number} [R1.3]: label {label!r} is not one of the declared classes "
            f"{sorted(allowed)}; fix the label or declare the class",
        )
        return False
    return True


def looks_like_csv(head: bytes) -> bool:
    """A first line that is not a JSON object but holds commas: a CSV header, most likely."""
    first = head.removeprefix(BOM).strip()
    return bool(first) and not first.startswith(b"{") and b"," in first

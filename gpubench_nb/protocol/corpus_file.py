"""Reading a corpus file as a stream: its records, its problems (grouped by kind), and the
canonical revision fed one item at a time (a large corpus is never held whole)."""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Iterator
from json.encoder import encode_basestring as json_string  # json.dumps's, ensure_ascii=False
from pathlib import Path
from typing import Any

from gpubench_nb.protocol.ids import DuplicateKeyError, strict_json_line
from gpubench_nb.protocol.problems import Problems

BOM = b"\xef\xbb\xbf"
# Version tag of the canonical form: changing the serialisation must change every revision.
CANONICAL_TAG = b"gpubench-nb corpus v1\n"
HASH_CHUNK = 4096  # records per digest update
Records = Iterator[tuple[int, dict[str, Any], bool]]  # (line, record, may hold a surrogate)


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


def looks_like_csv(head: bytes) -> bool:
    """A first line that is not a JSON object but holds commas: a CSV header, most likely."""
    first = head.removeprefix(BOM).strip()
    return bool(first) and not first.startswith(b"{") and b"," in first

"""Reading and writing resultats-bruts.csv (R4): durable appends, atomic rewrites, typed reads.
The schema (columns, types, row rules) lives in ``results_schema``."""

from __future__ import annotations

import csv
import io
import math
import numbers
import os
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from gpubench_nb.atomic import append_text_durable, write_text_atomic
from gpubench_nb.errors import ResultsError
from gpubench_nb.protocol.problems import Problems, failure_kind, listed
from gpubench_nb.protocol.results_schema import COLUMNS, TYPE_OF_COLUMN, check_row

HEADER = ",".join(COLUMNS) + "\n"
_INT_TEXT = re.compile(r"-?[0-9]+")
_FLOAT_TEXT = re.compile(r"-?[0-9]+\.[0-9]+")  # R4.2: a decimal point, no exponent
_NEEDS_QUOTES = re.compile(r'[,"\r\n]')
_EXPECTED = {int: ("an integer", numbers.Integral), float: ("a number", numbers.Real)}
_EXPECTED |= {str: ("a string", str), bool: ("true/false", bool)}


def format_float(value: float) -> str:
    """Plain decimal with a '.', never an exponent or a locale's comma, round-tripping (R4.2):
    ``repr``'s shortest text, an exponent form (``1e-05``) written out (``0.00001``)."""
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number")
    text = repr(value)
    if "e" in text or "E" in text:
        text = format(Decimal(text), "f")
    if "." not in text:
        text += ".0"
    return text


def _format_cell(column: str, value: Any) -> str:
    if value is None:
        return ""  # R4.3: not recorded
    kind = TYPE_OF_COLUMN[column]
    expected, accepted = _EXPECTED[kind]
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, accepted):
        raise TypeError(f"expects {expected}, got {value!r} ({type(value).__name__})")
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(int(value))
    if kind is float:
        return format_float(value)
    if _NEEDS_QUOTES.search(value):  # R4.4: RFC 4180 quoting, quotes doubled
        return '"' + value.replace('"', '""') + '"'
    return value


def format_row(row: dict[str, Any]) -> str:
    """One CSV record, newline included; refuses unknown or missing columns and wrong types."""
    keys = set(row)
    if keys != set(COLUMNS):
        missing = [c for c in COLUMNS if c not in keys]
        unknown = sorted(keys - set(COLUMNS))
        raise ResultsError(
            f"a row must have exactly the {len(COLUMNS)} columns of resultats-bruts.csv; "
            f"missing {missing}, unknown {unknown}; start from empty_row()",
            rule="R4.1",
        )
    cells = []
    for column in COLUMNS:
        try:
            cells.append(_format_cell(column, row[column]))
        except (TypeError, ValueError) as exc:
            raise ResultsError(
                f"column {column} ({TYPE_OF_COLUMN[column].__name__}) {exc}; write None for "
                "a value not recorded",
                rule="R4.2",
            ) from exc
    return ",".join(cells) + "\n"


def _checked_text(rows: Sequence[dict[str, Any]]) -> str:
    """Format rows and refuse any that fails the row rules, so no bad row is ever written."""
    text = "".join(map(format_row, rows))
    problems = Problems("new row")
    _row_rules(problems, list(rows), lambda i: f"new row {i}")
    if problems:
        raise ResultsError(listed(problems.lines(), len(problems)), rule="R4")
    return text


def _row_rules(problems: Problems, rows: list[dict[str, Any]], where: Callable[[int], str]) -> None:
    """The row rules (check_row, R4.1 one row per run) broken by ``rows``, each under its kind;
    ``where(n)`` names row n."""
    for number, row in enumerate(rows, start=1):
        for column, message in check_row(row):
            kind = f"{column} {failure_kind(message)}"
            problems.add(kind, number, f"{where(number)}, column {column}: {message}")
    keys = ("experiment_id", "variant_id", "phase", "run_index")
    seen: dict[tuple, int] = {}
    for number, row in enumerate(rows, start=1):  # R4.1: one row per run
        key = tuple(row.get(k) for k in keys)
        if None not in key and (first := seen.setdefault(key, number)) != number:
            run = dict(zip(keys, key, strict=True))
            message = f"R4.1: a second row for run {run} (first: {where(first)}); one row per run"
            problems.add("duplicate run", number, f"{where(number)}: {message}")


def append_rows(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Append rows in one durable write; the header first when the file is new or empty (R4.1).
    Refuses a file whose header differs or whose last record is torn (``repair_torn_tail``)."""
    path = Path(path)
    text = _checked_text(rows)
    existing = path.read_bytes().removeprefix(b"\xef\xbb\xbf") if path.exists() else b""
    if existing:  # a BOM alone is an empty file
        header = existing.split(b"\n", 1)[0].rstrip(b"\r")
        if header.decode("utf-8", "replace") != HEADER.rstrip("\n"):
            raise ResultsError(
                f"{path} does not start with the fixed header of resultats-bruts.csv; run "
                f"csv-check on it, or write to a new file",
                rule="R4.1",
            )
        if _complete_length(existing) != len(existing):
            raise ResultsError(
                f"{path} ends with a torn (incomplete) record; call repair_torn_tail() before "
                "appending",
                rule="R4.1",
            )
    else:
        text = HEADER + text
    append_text_durable(path, text)


def write_rows_atomic(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Rewrite the whole file (header + rows) via rename, e.g. to fill in quality (R4.1)."""
    write_text_atomic(Path(path), HEADER + _checked_text(rows))


def _complete_length(data: bytes) -> int:
    """Bytes up to the end of the last complete record: a newline outside quotes."""
    end = pos = quotes = 0
    while (newline := data.find(b"\n", pos)) >= 0:
        quotes += data.count(b'"', pos, newline + 1)  # "" inside a field keeps the parity
        pos = newline + 1
        if quotes % 2 == 0:
            end = pos
    return end


def repair_torn_tail(path: Path) -> bool:
    """Cut a final record that a crash left without its newline; True when something was cut
    (rows are appended in one write, so only the last append can be torn)."""
    path = Path(path)
    if not path.exists():
        return False  # nothing written yet, nothing torn
    data = path.read_bytes()
    keep = _complete_length(data)
    if keep == len(data):
        return False
    with open(path, "r+b") as handle:
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
    return True


def _parse_cell(column: str, text: str) -> Any:
    if text == "":
        return None
    kind = TYPE_OF_COLUMN[column]
    if kind is str:
        return text
    if kind is bool:
        if text in ("true", "false"):
            return text == "true"
        raise ValueError(f"{text!r} is not true/false (lower case)")
    if kind is int:
        if _INT_TEXT.fullmatch(text):
            return int(text)
        raise ValueError(
            f"{text!r} is not an integer (R4.2: bytes, cents and counts are whole numbers); "
            "write one, e.g. 128, or leave the cell empty for a value not recorded (R4.3)"
        )
    if _FLOAT_TEXT.fullmatch(text) and math.isfinite(float(text)):  # 400 digits: inf
        return float(text)
    raise ValueError(f"{text[:40]!r} is not a decimal number with a '.' (R4.2), e.g. 1.25")


def _header_difference(header: list[str]) -> str:
    """The first way ``header`` differs from the 38 columns (R4.1), in words."""
    for index, (got, want) in enumerate(zip(header, COLUMNS, strict=False), start=1):
        if got != want:
            return f"column {index} is {got!r}, expected {want!r}"
    message = f"{len(header)} columns, expected {len(COLUMNS)}"
    if len(header) > len(COLUMNS):
        return message + f" (first extra: {header[len(COLUMNS)]!r})"
    return message + f" (first missing: {COLUMNS[len(header)]!r})"


def _parse(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Typed rows and every error found; the header error stops the reading."""
    path = Path(path)
    name = path.name
    try:
        data = path.read_bytes()
    except OSError as exc:
        return [], [f"{path}: cannot read ({exc.strerror or exc})"]
    complete = _complete_length(data)
    errors = []
    if complete != len(data):
        line = data[:complete].count(b"\n") + 1
        errors.append(
            f"{name} line {line}: R4.1: the last record has no final newline (a torn write); "
            "call repair_torn_tail() (the pipeline does) or remove the partial line"
        )
        data = data[:complete]
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return [], [*errors, f"{name} line {line}: bytes that are not UTF-8; save it as UTF-8"]
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        return [], [*errors, f"{name} line 1: unreadable header ({exc})"]
    if header is None:
        return [], [*errors, f"{name}: empty file; the header line is missing (R4.1)"]
    if tuple(header) != COLUMNS:
        return [], [
            *errors,
            f"{name} line 1: R4.1: wrong header: {_header_difference(header)}; copy the header "
            "of the shipped resultats-bruts.csv",
        ]
    rows: list[dict[str, Any]] = []
    places: list[str] = []  # "raw.csv row 3 (line 4)" of each typed row
    # One failure on many rows is said once, with its count and rows.
    problems = Problems("row")
    start = reader.line_num + 1
    number = 0
    try:
        for cells in reader:
            number += 1
            where = f"{name} row {number} (line {start})"
            if len(cells) != len(COLUMNS):
                problems.add(
                    f"cells {len(cells)}",
                    number,
                    f"{where}: {len(cells)} cells, expected {len(COLUMNS)}; quote "
                    "commas, quotes and newlines (R4.4)",
                )
            else:
                row = {}
                for column, cell in zip(COLUMNS, cells, strict=True):
                    try:
                        row[column] = _parse_cell(column, cell)
                    except ValueError as exc:
                        kind = f"{column} {failure_kind(str(exc))}"
                        problems.add(kind, number, f"{where}, column {column}: {exc}")
                        row[column] = None
                rows.append(row)
                places.append(where)
            start = reader.line_num + 1
    except csv.Error as exc:
        problems.add(
            "unreadable",
            number,
            f"{name} line {start}: unreadable CSV ({exc}); check the quoting (R4.4)",
        )
    _row_rules(problems, rows, lambda i: places[i - 1])
    return rows, errors + problems.lines()


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Typed rows of resultats-bruts.csv; raises ResultsError naming row, line and column."""
    rows, errors = _parse(Path(path))
    if errors:
        raise ResultsError(listed(errors, len(errors)), rule="R4")
    return rows


def validate_csv(path: Path) -> list[str]:
    """Every error ``gpubench-nb csv-check`` prints; empty when the file is valid."""
    return _parse(Path(path))[1]

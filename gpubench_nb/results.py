"""The fixed 38-column schema of resultats-bruts.csv (R4): one definition, used everywhere."""

from __future__ import annotations

import csv
import io
import math
import numbers
import os
import re
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from gpubench_nb.atomic import append_text_durable, write_text_atomic
from gpubench_nb.errors import ResultsError

# R4: the columns, in PROTOCOL.md's order. Never derived from data.
COLUMNS: tuple[str, ...] = (
    "experiment_id",
    "variant_id",
    "corpus_revision",
    "model_revision",
    "tokenizer_revision",
    "seed",
    "gpu_model",
    "gpu_count",
    "device",
    "driver_version",
    "python_version",
    "torch_version",
    "runtime_version",
    "precision",
    "batch",
    "context",
    "phase",
    "run_index",
    "warmup_iterations",
    "expected_ids",
    "observed_ids",
    "ids_match",
    "format_valid",
    "quality_metric",
    "quality_threshold",
    "quality_tolerance",
    "quality_value",
    "corpus_accepted",
    "elapsed_seconds",
    "baseline_allocated_bytes",
    "baseline_reserved_bytes",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "duration_days",
    "lots",
    "package_total_usd_minor",
    "accepted_unique_corpora",
    "notes",
)
assert len(COLUMNS) == 38

# R4.2: one type per column. Bytes and cents are integers; times and quality are floats.
_STR, _INT, _FLOAT, _BOOL = str, int, float, bool
TYPE_OF_COLUMN: dict[str, type] = {
    "experiment_id": _STR,
    "variant_id": _STR,
    "corpus_revision": _STR,
    "model_revision": _STR,
    "tokenizer_revision": _STR,
    "seed": _INT,
    "gpu_model": _STR,
    "gpu_count": _INT,
    "device": _STR,
    "driver_version": _STR,
    "python_version": _STR,
    "torch_version": _STR,
    "runtime_version": _STR,
    "precision": _STR,
    "batch": _INT,
    "context": _INT,
    "phase": _STR,
    "run_index": _INT,
    "warmup_iterations": _INT,
    "expected_ids": _INT,
    "observed_ids": _INT,
    "ids_match": _BOOL,
    "format_valid": _BOOL,
    "quality_metric": _STR,
    "quality_threshold": _FLOAT,
    "quality_tolerance": _FLOAT,
    "quality_value": _FLOAT,
    "corpus_accepted": _BOOL,
    "elapsed_seconds": _FLOAT,
    "baseline_allocated_bytes": _INT,
    "baseline_reserved_bytes": _INT,
    "peak_allocated_bytes": _INT,
    "peak_reserved_bytes": _INT,
    "duration_days": _INT,
    "lots": _INT,
    "package_total_usd_minor": _INT,
    "accepted_unique_corpora": _INT,
    "notes": _STR,
}
assert tuple(TYPE_OF_COLUMN) == COLUMNS

PHASES = ("load", "cold", "warm")  # R3.2: never mix timings
PACKAGE_DAYS = (3, 7, 30)  # R5.1
BOUNDED_METRICS = ("macro_f1", "weighted_f1", "accuracy")  # values in [0, 1]
HEADER = ",".join(COLUMNS) + "\n"
MAX_LISTED = 20  # errors listed in one exception; validate_csv returns them all
_INT_TEXT = re.compile(r"-?[0-9]+")
_FLOAT_TEXT = re.compile(r"-?[0-9]+\.[0-9]+")  # R4.2: a decimal point, no exponent
_NEEDS_QUOTES = re.compile(r'[,"\r\n]')
# A true acceptance must not fail on float rounding of a value equal to its threshold.
_SLACK = 1e-12


def empty_row() -> dict[str, Any]:
    """A row with every column not recorded (R4.3: empty, never zero)."""
    return dict.fromkeys(COLUMNS)


# ---------------------------------------------------------------------------------------------
# Writing


def format_float(value: float) -> str:
    """Plain decimal with a '.', never an exponent or a locale's comma, round-tripping (R4.2).

    ``repr`` gives the shortest text that reads back to the same float; an exponent form
    (``1e-05``) is rewritten as its exact plain decimal (``0.00001``).
    """
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
    if kind is bool:
        if not isinstance(value, bool):
            raise TypeError(f"expects true/false, got {value!r}")
        return "true" if value else "false"
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"expects an integer, got {value!r} ({type(value).__name__})")
        return str(int(value))
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"expects a number, got {value!r} ({type(value).__name__})")
        return format_float(value)
    if not isinstance(value, str):
        raise TypeError(f"expects a string, got {value!r} ({type(value).__name__})")
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
    text = []
    errors = []
    for number, row in enumerate(rows, start=1):
        text.append(format_row(row))
        errors += [f"new row {number}, column {col}: {msg}" for col, msg in check_row(row)]
    errors += _duplicate_runs(list(rows), lambda i: f"new row {i}")
    if errors:
        raise ResultsError(_join(errors), rule="R4")
    return "".join(text)


def append_rows(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Append rows in one durable write; the header first when the file is new or empty (R4.1).

    Refuses to append to a file whose header differs, or whose last record is torn (call
    ``repair_torn_tail`` first), so a crash never glues half a row to the next one.
    """
    path = Path(path)
    text = _checked_text(rows)
    existing = path.read_bytes() if path.exists() else b""
    if existing.removeprefix(b"\xef\xbb\xbf"):
        header = existing.removeprefix(b"\xef\xbb\xbf").split(b"\n", 1)[0].rstrip(b"\r")
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
    """Cut a final record that a crash left without its newline; True when something was cut.

    The pipeline calls this before resuming. Rows are appended in one write, so a torn tail
    can only be part of the last append: the complete rows before it are kept.
    """
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


# ---------------------------------------------------------------------------------------------
# Reading and validating


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
        raise ValueError(f"{text!r} is not an integer (bytes and cents are whole numbers, R4.2)")
    if _FLOAT_TEXT.fullmatch(text):
        return float(text)
    raise ValueError(f"{text!r} is not a decimal number with a '.' (R4.2), e.g. 1.25")


def check_row(row: dict[str, Any]) -> list[tuple[str, str]]:
    """Rules one typed row must meet: [(column, message)], empty when the row is sound."""
    errors: list[tuple[str, str]] = []

    def bad(column: str, message: str) -> None:
        errors.append((column, message))

    for column, kind in TYPE_OF_COLUMN.items():
        value = row.get(column)
        if kind in (int, float) and value is not None and value < 0:
            bad(column, f"R4.3: {value} is negative; readings and counts are never negative")
    positive = {
        "elapsed_seconds": "R5.8: a duration of zero is not a measurement; leave it empty "
        "when the run failed and say why in notes",
        "expected_ids": "R1.5: a corpus has at least one expected ID",
        "batch": "R2.1: a batch holds at least one text",
        "context": "R2.1: a context holds at least one token",
        "run_index": "R3.4: runs are numbered from 1",
        "lots": "R5.1: a package has at least one lot",
        "package_total_usd_minor": "R5.1: a package price of 0 is not a price; leave it "
        "empty when not priced",
    }
    for column, message in positive.items():
        if row.get(column) == 0:
            bad(column, f"0 where zero is impossible; {message}")
    phase = row.get("phase")
    if phase is not None and phase not in PHASES:
        bad("phase", f"R3.2: {phase!r} is not one of {list(PHASES)}")
    days = row.get("duration_days")
    if days is not None and days not in PACKAGE_DAYS:
        bad("duration_days", f"R5.1: {days} is not a package length; use 3, 7 or 30")
    if row.get("gpu_count") == 0 and row.get("gpu_model"):
        bad("gpu_count", f"R2.4: 0 GPUs used but gpu_model is {row['gpu_model']!r}")
    if row.get("quality_metric") in BOUNDED_METRICS:
        for column in ("quality_value", "quality_threshold"):
            if row.get(column) is not None and row[column] > 1:
                bad(column, f"R1.3: {row[column]} > 1 for {row['quality_metric']}")

    def pair(low: str, high: str, rule: str) -> None:
        a, b = row.get(low), row.get(high)
        if a is not None and b is not None and a > b:
            bad(low, f"{rule}: {low} {a} > {high} {b}")

    pair("peak_allocated_bytes", "peak_reserved_bytes", "R3.9 (allocated is inside reserved)")
    pair(
        "baseline_allocated_bytes", "baseline_reserved_bytes", "R3.9 (allocated is inside reserved)"
    )
    pair(
        "baseline_allocated_bytes",
        "peak_allocated_bytes",
        "R3.8 (the peak is taken after the baseline)",
    )
    pair(
        "baseline_reserved_bytes",
        "peak_reserved_bytes",
        "R3.8 (the peak is taken after the baseline)",
    )
    expected, observed = row.get("expected_ids"), row.get("observed_ids")
    if row.get("ids_match") is True and None not in (expected, observed) and expected != observed:
        bad("ids_match", f"R1.5: true, yet observed_ids {observed} != expected_ids {expected}")
    if row.get("corpus_accepted") is True:
        for column in ("ids_match", "format_valid"):
            if row.get(column) is not True:
                shown = "empty" if row.get(column) is None else "false"
                bad("corpus_accepted", f"R1.5: true while {column} is {shown}")
        value, threshold = row.get("quality_value"), row.get("quality_threshold")
        if value is None or threshold is None:
            bad("corpus_accepted", "R1.3/R1.5: true without a quality_value and its threshold")
        elif value < threshold - _SLACK:
            bad(
                "corpus_accepted", f"R1.5: true while quality_value {value} < threshold {threshold}"
            )
    return errors


def _duplicate_runs(rows: list[dict[str, Any]], where: Any) -> list[str]:
    keys = ("experiment_id", "variant_id", "phase", "run_index")
    seen: dict[tuple, int] = {}
    errors = []
    for number, row in enumerate(rows, start=1):
        key = tuple(row.get(k) for k in keys)
        if None in key:
            continue
        if key in seen:
            run = dict(zip(keys, key, strict=True))
            errors.append(
                f"{where(number)}: R4.1: a second row for run {run} (first: "
                f"{where(seen[key])}); one row per run"
            )
        else:
            seen[key] = number
    return errors


def _join(errors: list[str]) -> str:
    more = f"; ... and {len(errors) - MAX_LISTED} more" if len(errors) > MAX_LISTED else ""
    return f"{len(errors)} error(s): " + "; ".join(errors[:MAX_LISTED]) + more


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
        for index, (got, want) in enumerate(zip(header, COLUMNS, strict=False), start=1):
            if got != want:
                message = f"column {index} is {got!r}, expected {want!r}"
                break
        else:
            message = f"{len(header)} columns, expected {len(COLUMNS)}"
            if len(header) > len(COLUMNS):
                message += f" (first extra: {header[len(COLUMNS)]!r})"
            else:
                message += f" (first missing: {COLUMNS[len(header)]!r})"
        return [], [
            *errors,
            f"{name} line 1: R4.1: wrong header: {message}; copy the header "
            "of the shipped resultats-bruts.csv",
        ]
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    start = reader.line_num + 1
    number = 0
    try:
        for cells in reader:
            number += 1
            where = f"{name} row {number} (line {start})"
            if len(cells) != len(COLUMNS):
                errors.append(
                    f"{where}: {len(cells)} cells, expected {len(COLUMNS)}; quote "
                    "commas, quotes and newlines (R4.4)"
                )
            else:
                row = {}
                for column, cell in zip(COLUMNS, cells, strict=True):
                    try:
                        row[column] = _parse_cell(column, cell)
                    except ValueError as exc:
                        errors.append(f"{where}, column {column}: {exc}")
                        row[column] = None
                errors += [f"{where}, column {col}: {msg}" for col, msg in check_row(row)]
                rows.append(row)
                lines.append(start)
            start = reader.line_num + 1
    except csv.Error as exc:
        errors.append(f"{name} line {start}: unreadable CSV ({exc}); check the quoting (R4.4)")
    errors += _duplicate_runs(rows, lambda i: f"{name} row {i} (line {lines[i - 1]})")
    return rows, errors


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Typed rows of resultats-bruts.csv; raises ResultsError naming row, line and column."""
    rows, errors = _parse(Path(path))
    if errors:
        raise ResultsError(_join(errors), rule="R4")
    return rows


def validate_csv(path: Path) -> list[str]:
    """Every error ``gpubench-nb csv-check`` prints; empty when the file is valid."""
    return _parse(Path(path))[1]

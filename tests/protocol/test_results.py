"""resultats-bruts.csv (R4.1-R4.4): fixed schema, typed cells, durable appends, validation."""

from __future__ import annotations

import csv
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpubench_nb.errors import ResultsError
from gpubench_nb.protocol.results import (
    COLUMNS,
    HEADER,
    TYPE_OF_COLUMN,
    append_rows,
    format_float,
    format_row,
    read_rows,
    repair_torn_tail,
    validate_csv,
    write_rows_atomic,
)
from gpubench_nb.protocol.results_schema import empty_row


def warm_row(**changes) -> dict:
    """A realistic, valid row: warm run 3 of variant b4 on one H100."""
    row = empty_row()
    row.update(
        experiment_id="demo-bow-batch",
        variant_id="b4",
        corpus_revision="f4f1" * 16,
        model_revision="ab" * 32,
        tokenizer_revision="cd" * 32,
        seed=20261202,
        gpu_model="NVIDIA H100 80GB HBM3",
        gpu_count=1,
        device="cuda:0",
        driver_version="550.54.15",
        python_version="3.11.7",
        torch_version="2.4.1",
        runtime_version="cuda 12.4",
        precision="fp32",
        batch=4,
        context=128,
        phase="warm",
        run_index=3,
        warmup_iterations=2,
        expected_ids=1000,
        observed_ids=1000,
        ids_match=True,
        format_valid=True,
        quality_metric="macro_f1",
        quality_threshold=0.7,
        quality_tolerance=0.01,
        quality_value=0.781,
        corpus_accepted=True,
        elapsed_seconds=1.25,
        baseline_allocated_bytes=0,  # R4.3: truly zero at the start of a fresh process
        baseline_reserved_bytes=0,
        peak_allocated_bytes=123_456_789,
        peak_reserved_bytes=134_217_728,
        duration_days=7,
        lots=1,
        package_total_usd_minor=123_456,
        accepted_unique_corpora=1,
        notes="scope processing; tolerance: absolute drop below b1",
    )
    row.update(changes)
    return row


def csv_file(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "resultats-bruts.csv"
    write_rows_atomic(path, rows)
    return path


def raw_csv(tmp_path: Path, cells_by_row: list[dict[str, str]]) -> Path:
    """Write rows cell by cell (bypassing the writer's checks) to test the validator."""
    path = tmp_path / "raw.csv"
    text = HEADER
    for cells in cells_by_row:
        base = format_row(warm_row()).rstrip("\n")
        row = dict(zip(COLUMNS, next(csv.reader([base])), strict=True))
        row.update(cells)
        text += ",".join(row[c] for c in COLUMNS) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# Schema (R4.1)


def test_shipped_template_is_the_header_only(repo_root):
    template = (repo_root / "resultats-bruts.csv").read_text(encoding="utf-8")
    assert template == ",".join(COLUMNS) + "\n" == HEADER
    assert len(template.strip().split(",")) == 38
    assert validate_csv(repo_root / "resultats-bruts.csv") == []
    assert read_rows(repo_root / "resultats-bruts.csv") == []


def test_every_column_has_one_type():
    assert tuple(TYPE_OF_COLUMN) == COLUMNS
    assert TYPE_OF_COLUMN["peak_reserved_bytes"] is int
    assert TYPE_OF_COLUMN["package_total_usd_minor"] is int
    assert TYPE_OF_COLUMN["elapsed_seconds"] is float
    assert TYPE_OF_COLUMN["corpus_accepted"] is bool
    assert TYPE_OF_COLUMN["notes"] is str


# ---------------------------------------------------------------------------------------------
# Writing (R4.2-R4.4)


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.25, "1.25"), (3.0, "3.0"), (0.1, "0.1"), (1e-05, "0.00001"), (2.5e-7, "0.00000025"),
     (1e16, "10000000000000000.0"), (0.0, "0.0")],
)  # fmt: skip
def test_floats_are_plain_decimals_with_a_point(value, text):
    assert format_float(value) == text
    assert float(text) == value


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_property_float_text_round_trips_and_has_a_point(value):
    text = format_float(value)
    assert float(text) == value
    assert "." in text and "e" not in text.lower() and "," not in text


def test_empty_means_not_recorded_and_zero_means_zero_r4_3(tmp_path):
    row = warm_row(peak_allocated_bytes=None, peak_reserved_bytes=None, quality_tolerance=0.0)
    line = format_row(row)
    cells = next(csv.reader([line]))
    assert cells[COLUMNS.index("baseline_allocated_bytes")] == "0"
    assert cells[COLUMNS.index("peak_allocated_bytes")] == ""
    assert cells[COLUMNS.index("quality_tolerance")] == "0.0"
    assert cells[COLUMNS.index("ids_match")] == "true"
    assert cells[COLUMNS.index("package_total_usd_minor")] == "123456"
    (back,) = read_rows(csv_file(tmp_path, [row]))
    assert back["baseline_allocated_bytes"] == 0 and back["peak_allocated_bytes"] is None
    assert back == row


def test_notes_with_comma_quote_and_newline_are_quoted_rfc4180(tmp_path):
    note = 'scope processing, 2 GPUs offered; "only one used"\nsecond line'
    line = format_row(warm_row(notes=note))
    assert line.endswith(',"scope processing, 2 GPUs offered; ""only one used""\nsecond line"\n')
    path = csv_file(tmp_path, [warm_row(notes=note)])
    assert read_rows(path)[0]["notes"] == note
    import pandas as pd  # an independent reader of the same file

    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert list(frame.columns) == list(COLUMNS) and frame.loc[0, "notes"] == note


notes = st.text(min_size=1).filter(lambda s: s != "")
finite = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(note=notes, gpu=st.text(min_size=1, max_size=20), seconds=finite, seed=st.integers(0, 2**63))
def test_property_rows_round_trip_with_any_notes(note, gpu, seconds, seed):
    seconds = seconds or 0.5  # zero seconds is refused (R5.8); tested apart
    row = warm_row(notes=note, gpu_model=gpu, elapsed_seconds=seconds, seed=seed)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "r.csv"
        append_rows(path, [row])
        append_rows(path, [warm_row(run_index=4, notes=note + ',\n"')])
        back = read_rows(path)
    assert back[0] == row
    assert back[1]["notes"] == note + ',\n"'


def test_empty_string_is_written_as_not_recorded(tmp_path):
    (back,) = read_rows(csv_file(tmp_path, [warm_row(notes="", driver_version="")]))
    assert back["notes"] is None and back["driver_version"] is None


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("batch", "4", "column batch (int) expects an integer, got '4'"),
        ("batch", 4.0, "column batch (int) expects an integer, got 4.0"),
        ("lots", True, "column lots (int) expects an integer, got True"),
        ("elapsed_seconds", "1.5", "column elapsed_seconds (float) expects a number"),
        ("elapsed_seconds", math.nan, "nan is not a finite number"),
        ("ids_match", 1, "column ids_match (bool) expects true/false, got 1"),
        ("notes", 3, "column notes (str) expects a string"),
    ],
)
def test_format_row_refuses_wrong_types(column, value, message):
    with pytest.raises(ResultsError, match=r"^R4\.2: ") as caught:
        format_row(warm_row(**{column: value}))
    assert message in str(caught.value)


def test_format_row_refuses_missing_or_unknown_columns():
    row = warm_row()
    del row["notes"]
    row["note"] = "x"
    with pytest.raises(ResultsError, match=r"R4\.1: .*missing \['notes'\], unknown \['note'\]"):
        format_row(row)


# ---------------------------------------------------------------------------------------------
# Durable appends and torn tails


def test_append_writes_the_header_once_then_rows(tmp_path):
    path = tmp_path / "r.csv"
    append_rows(path, [warm_row(run_index=1)])
    append_rows(path, [warm_row(run_index=2), warm_row(run_index=3)])
    text = path.read_text(encoding="utf-8")
    assert text.startswith(HEADER) and text.count("experiment_id") == 1
    assert [r["run_index"] for r in read_rows(path)] == [1, 2, 3]


def test_append_refuses_an_invalid_row_and_writes_nothing(tmp_path):
    path = tmp_path / "r.csv"
    append_rows(path, [warm_row(run_index=1)])
    before = path.read_bytes()
    with pytest.raises(ResultsError, match=r"new row 1, column elapsed_seconds: 0 where zero"):
        append_rows(path, [warm_row(run_index=2, elapsed_seconds=0.0)])
    assert path.read_bytes() == before


def test_append_refuses_a_foreign_header(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(ResultsError, match=r"R4\.1: .* does not start with the fixed header"):
        append_rows(path, [warm_row()])


@pytest.mark.parametrize(
    "torn",
    [
        "demo-bow-batch,b4,abc",  # cut mid-row
        'demo-bow-batch,b4,a,b,c,1,gpu,1,cpu,,,,,fp32,4,128,warm,5,2,1000,1000,true,true,m,'
        '0.7,0.01,0.8,true,1.0,,,,,7,1,100,1,"note with\n',  # cut inside a quoted newline
    ],
)  # fmt: skip
def test_torn_tail_is_refused_then_repaired(tmp_path, torn):
    path = tmp_path / "r.csv"
    append_rows(path, [warm_row(run_index=1), warm_row(run_index=2)])
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(torn)  # a crash in the middle of the next append
    with pytest.raises(ResultsError, match=r"line 4: R4\.1: the last record has no final newline"):
        read_rows(path)
    assert "torn write" in validate_csv(path)[0]
    with pytest.raises(ResultsError, match="call repair_torn_tail"):
        append_rows(path, [warm_row(run_index=3)])
    assert repair_torn_tail(path) is True
    assert [r["run_index"] for r in read_rows(path)] == [1, 2]
    assert repair_torn_tail(path) is False
    assert repair_torn_tail(tmp_path / "never-written.csv") is False
    append_rows(path, [warm_row(run_index=3)])
    assert [r["run_index"] for r in read_rows(path)] == [1, 2, 3]


def test_write_rows_atomic_rewrites_the_whole_file(tmp_path):
    path = csv_file(tmp_path, [warm_row(run_index=1, corpus_accepted=None)])
    write_rows_atomic(path, [warm_row(run_index=1, corpus_accepted=True)])
    assert [r["corpus_accepted"] for r in read_rows(path)] == [True]


# ---------------------------------------------------------------------------------------------
# The validator behind `gpubench-nb csv-check`


def test_wrong_header_names_the_first_differing_column(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text(HEADER.replace(",seed,", ",sed,"), encoding="utf-8")
    (error,) = validate_csv(path)
    assert "line 1: R4.1: wrong header: column 6 is 'sed', expected 'seed'" in error
    path.write_text(HEADER.replace(",notes", ""), encoding="utf-8")
    assert "37 columns, expected 38 (first missing: 'notes')" in validate_csv(path)[0]
    with pytest.raises(ResultsError, match="wrong header"):
        read_rows(path)


@pytest.mark.parametrize(
    ("cells", "column", "message"),
    [
        ({"elapsed_seconds": "2"}, "elapsed_seconds", "'2' is not a decimal number with a '.'"),
        ({"elapsed_seconds": "1e-05"}, "elapsed_seconds", "not a decimal number"),
        ({"elapsed_seconds": "1,5"}, "", "39 cells, expected 38"),
        ({"batch": "4.0"}, "batch", "'4.0' is not an integer"),
        ({"ids_match": "True"}, "ids_match", "'True' is not true/false"),
        ({"elapsed_seconds": "0.0"}, "elapsed_seconds", "0 where zero is impossible; R5.8"),
        ({"expected_ids": "0", "observed_ids": "0"}, "expected_ids", "R1.5"),
        ({"lots": "0"}, "lots", "R5.1: a package has at least one lot"),
        ({"duration_days": "5"}, "duration_days", "R5.1: 5 is not a package length"),
        ({"gpu_count": "0"}, "gpu_count", "R2.4: 0 GPUs used but gpu_model is"),
        ({"peak_reserved_bytes": "-1"}, "peak_reserved_bytes", "R4.3: -1 is negative"),
        ({"peak_reserved_bytes": "0"}, "peak_allocated_bytes", "R3.9"),
        ({"baseline_allocated_bytes": "200000000", "baseline_reserved_bytes": "300000000"},
         "baseline_allocated_bytes", "R3.8"),
        ({"phase": "hot"}, "phase", "R3.2: 'hot' is not one of ['load', 'cold', 'warm']"),
        ({"ids_match": "false"}, "corpus_accepted", "R1.5: true while ids_match is false"),
        ({"format_valid": ""}, "corpus_accepted", "R1.5: true while format_valid is empty"),
        ({"quality_value": "0.69"}, "corpus_accepted", "quality_value 0.69 < threshold 0.7"),
        ({"quality_value": ""}, "corpus_accepted", "without a quality_value"),
        ({"observed_ids": "999"}, "ids_match", "observed_ids 999 != expected_ids 1000"),
        ({"quality_value": "1.5", "corpus_accepted": "false"}, "quality_value", "R1.3: 1.5 > 1"),
    ],
)  # fmt: skip
def test_validator_names_row_line_and_column(tmp_path, cells, column, message):
    path = raw_csv(tmp_path, [{"run_index": "1"}, {"run_index": "2", **cells}])
    errors = validate_csv(path)
    assert len(errors) >= 1, errors
    where = "raw.csv row 2 (line 3)" + (f", column {column}" if column else "")
    assert any(e.startswith(where) and message in e for e in errors), errors
    with pytest.raises(ResultsError, match=r"^R4: "):
        read_rows(path)


def test_valid_rows_pass_and_a_second_row_for_one_run_does_not(tmp_path):
    assert validate_csv(raw_csv(tmp_path, [{"run_index": "1"}, {"run_index": "2"}])) == []
    errors = validate_csv(raw_csv(tmp_path, [{"run_index": "1"}, {"run_index": "1"}]))
    assert errors == [
        "raw.csv row 2 (line 3): R4.1: a second row for run {'experiment_id': 'demo-bow-batch', "
        "'variant_id': 'b4', 'phase': 'warm', 'run_index': 1} (first: raw.csv row 1 (line 2)); "
        "one row per run"
    ]


def test_the_same_failure_in_every_row_is_said_once_with_its_rows(tmp_path, capsys):
    # Issue 25: column batch set to "x" in each of 45 rows printed 45 near-identical lines.
    from gpubench_nb.cli import main

    path = raw_csv(tmp_path, [{"run_index": str(i), "batch": "x"} for i in range(1, 46)])
    (error,) = validate_csv(path)
    assert error.startswith("raw.csv row 1 (line 2), column batch: 'x' is not an integer (R4.2")
    assert "leave the cell empty for a value not recorded (R4.3)" in error  # the fix
    assert error.endswith("; the same in 45 rows (rows 1-45)")
    assert main(["csv-check", str(path)]) == 2
    assert capsys.readouterr().err == error + "\n"  # one line on the terminal, not 45
    with pytest.raises(ResultsError) as caught:
        read_rows(path)
    assert str(caught.value).count("is not an integer") == 1


def test_a_failure_with_other_values_is_the_same_kind_and_others_stay_apart(tmp_path):
    cells = [{"run_index": str(i)} for i in range(1, 13)]
    for i in (0, 1, 2, 6):  # rows 1-3 and 7: batch not an integer, whatever the value
        cells[i]["batch"] = "x" if i < 3 else "4.5"
    for i in range(4, 12):  # rows 5-12: another failure, in another column
        cells[i]["phase"] = "hot"
    errors = validate_csv(raw_csv(tmp_path, cells))
    assert len(errors) == 2, errors
    assert errors[0].startswith("raw.csv row 1 (line 2), column batch: 'x'")
    assert errors[0].endswith("; the same in 4 rows (rows 1-3, 7)")
    assert errors[1].startswith("raw.csv row 5 (line 6), column phase: R3.2: 'hot' is not one")
    assert errors[1].endswith("; the same in 8 rows (rows 5-12)")


def test_a_failure_on_one_row_names_that_row_alone(tmp_path):
    errors = validate_csv(raw_csv(tmp_path, [{"run_index": "1"}, {"run_index": "2", "batch": "x"}]))
    assert errors == [
        "raw.csv row 2 (line 3), column batch: 'x' is not an integer (R4.2: bytes, cents and "
        "counts are whole numbers); write one, e.g. 128, or leave the cell empty for a value not "
        "recorded (R4.3)"
    ]


def test_multiline_notes_keep_line_numbers_right(tmp_path):
    path = tmp_path / "r.csv"
    append_rows(path, [warm_row(run_index=1, notes="a\nb\nc")])
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(format_row(warm_row(run_index=2)).replace(",warm,", ",hot,"))
    (error,) = validate_csv(path)
    assert error.startswith("r.csv row 2 (line 5), column phase: R3.2")


def test_missing_and_empty_files_are_reported(tmp_path):
    assert "cannot read" in validate_csv(tmp_path / "absent.csv")[0]
    (tmp_path / "empty.csv").write_bytes(b"")
    assert "empty file" in validate_csv(tmp_path / "empty.csv")[0]

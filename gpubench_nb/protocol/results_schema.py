"""The fixed 38-column schema of resultats-bruts.csv (R4): columns, types and row rules."""

from __future__ import annotations

from typing import Any

from gpubench_nb.protocol.experiment_spec import METRICS, PACKAGE_DAYS, QUALITY_SLACK
from gpubench_nb.protocol.records import PHASES

# R2.4: the hardware and environment actually observed, copied from environment.json into
# every row (engine.environment.ROW_FIELDS is ENVIRONMENT_COLUMNS).
_ENVIRONMENT_TYPES: dict[str, type] = {
    "gpu_model": str,
    "gpu_count": int,
    "device": str,
    "driver_version": str,
    "python_version": str,
    "torch_version": str,
    "runtime_version": str,
}
ENVIRONMENT_COLUMNS: tuple[str, ...] = tuple(_ENVIRONMENT_TYPES)
# R4, R4.2: the columns in PROTOCOL.md's order (never derived from data), one type each.
# Bytes and cents are integers; times and quality are floats.
TYPE_OF_COLUMN: dict[str, type] = {
    "experiment_id": str,
    "variant_id": str,
    "corpus_revision": str,
    "model_revision": str,
    "tokenizer_revision": str,
    "seed": int,
    **_ENVIRONMENT_TYPES,
    "precision": str,
    "batch": int,
    "context": int,
    "phase": str,
    "run_index": int,
    "warmup_iterations": int,
    "expected_ids": int,
    "observed_ids": int,
    "ids_match": bool,
    "format_valid": bool,
    "quality_metric": str,
    "quality_threshold": float,
    "quality_tolerance": float,
    "quality_value": float,
    "corpus_accepted": bool,
    "elapsed_seconds": float,
    "baseline_allocated_bytes": int,
    "baseline_reserved_bytes": int,
    "peak_allocated_bytes": int,
    "peak_reserved_bytes": int,
    "duration_days": int,
    "lots": int,
    "package_total_usd_minor": int,
    "accepted_unique_corpora": int,
    "notes": str,
}
COLUMNS: tuple[str, ...] = tuple(TYPE_OF_COLUMN)
assert len(COLUMNS) == 38


def empty_row() -> dict[str, Any]:
    """A row with every column not recorded (R4.3: empty, never zero)."""
    return dict.fromkeys(COLUMNS)


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
        bad("phase", f"R3.2: {phase!r} is not one of {list(map(str, PHASES))}")
    days = row.get("duration_days")
    if days is not None and days not in PACKAGE_DAYS:
        bad("duration_days", f"R5.1: {days} is not a package length; use 3, 7 or 30")
    if row.get("gpu_count") == 0 and row.get("gpu_model"):
        bad("gpu_count", f"R2.4: 0 GPUs used but gpu_model is {row['gpu_model']!r}")
    if row.get("quality_metric") in METRICS:  # every metric is a fraction
        for column in ("quality_value", "quality_threshold"):
            if row.get(column) is not None and row[column] > 1:
                bad(column, f"R1.3: {row[column]} > 1 for {row['quality_metric']}")
    inside, after = (
        "R3.9 (allocated is inside reserved)",
        "R3.8 (the peak is taken after the baseline)",
    )
    for low, high, rule in (
        ("peak_allocated_bytes", "peak_reserved_bytes", inside),
        ("baseline_allocated_bytes", "baseline_reserved_bytes", inside),
        ("baseline_allocated_bytes", "peak_allocated_bytes", after),
        ("baseline_reserved_bytes", "peak_reserved_bytes", after),
    ):
        a, b = row.get(low), row.get(high)
        if a is not None and b is not None and a > b:
            bad(low, f"{rule}: {low} {a} > {high} {b}")
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
        elif value < threshold - QUALITY_SLACK:
            bad(
                "corpus_accepted", f"R1.5: true while quality_value {value} < threshold {threshold}"
            )
    return errors

"""The quality stage (R1.5, R1.6, R5.7): acceptance of every run, filled into the raw CSV."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench_nb.protocol.acceptance import AcceptanceReport, check_predictions, write_checks
from gpubench_nb.protocol.bundle import CSV_NAME, run_dir
from gpubench_nb.protocol.corpus import Corpus
from gpubench_nb.protocol.experiment_spec import QualitySpec
from gpubench_nb.protocol.results import read_rows, write_rows_atomic

MEASURED_PHASES = ("cold", "warm")
PREDICTIONS_NAME = "predictions.jsonl"
CHECKS_NAME = "checks.json"
# A bundle that holds no run of the reference variant (a `classify` bundle of another variant)
# keeps the reference value it was judged against here, with where it was measured (R1.3).
REFERENCE_NAME = "reference.json"


@dataclass(frozen=True)
class QualityOutcome:
    """Acceptance of every measured run, keyed ``<variant>/<phase>-<n>``."""

    reference_variant: str
    reference_value: float | None
    reports: dict[str, AcceptanceReport | None]  # None: the run left no predictions


def _key(row: dict[str, Any]) -> str:
    return f"{row['variant_id']}/{row['phase']}-{row['run_index']}"


def assess_runs(
    bundle_dir: Path,
    rows: Sequence[dict[str, Any]],
    corpus: Corpus,
    classes: Sequence[str],
    quality: QualitySpec,
    reference_value: float | None = None,
) -> QualityOutcome:
    """Check each measured run's predictions against the expected IDs and the declared quality.

    The reference value is the median quality of the reference variant's runs whose IDs and
    format are valid; every run's drop is measured against it (R1.3 tolerance). A bundle with
    no run of the reference variant may be given the value measured elsewhere
    (``reference_value``, kept in reference.json).
    """
    measured = [row for row in rows if row["phase"] in MEASURED_PHASES]

    def predictions(row: dict[str, Any]) -> Path:
        folder = run_dir(bundle_dir, row["variant_id"], row["phase"], row["run_index"])
        return folder / PREDICTIONS_NAME

    reference_values = []
    for row in measured:
        if row["variant_id"] == quality.reference_variant and predictions(row).exists():
            report = check_predictions(corpus, predictions(row), classes, quality)
            if report.quality_value is not None:
                reference_values.append(report.quality_value)
    if reference_values:
        reference_value = statistics.median(reference_values)
    reports: dict[str, AcceptanceReport | None] = {}
    for row in measured:
        path = predictions(row)
        reports[_key(row)] = (
            check_predictions(corpus, path, classes, quality, reference_value=reference_value)
            if path.exists()
            else None
        )
    return QualityOutcome(quality.reference_variant, reference_value, reports)


def kept_reference_value(bundle_dir: Path) -> float | None:
    """The reference value a bundle kept in reference.json, or None when it has none."""
    path = Path(bundle_dir) / REFERENCE_NAME
    if not path.exists():
        return None
    value = json.loads(path.read_text(encoding="utf-8")).get("reference_value")
    return float(value) if isinstance(value, int | float) else None


def accepted(report: AcceptanceReport | None, reference_value: float | None) -> bool:
    """R1.5: accepted only with every check passed, the tolerance included (needs a reference)."""
    return bool(report and report.corpus_accepted and reference_value is not None)


def quality_note(
    report: AcceptanceReport | None, quality: QualitySpec, reference_value: float | None
) -> str:
    """The row's quality decision, with the tolerance's direction and base (R4 `notes`)."""
    if report is None:
        return "quality: no predictions were kept (the run failed); not accepted (R1.5, R3.6)"
    base = (
        f"reference {quality.reference_variant} median {reference_value:.4f}"
        if reference_value is not None
        else f"no valid run of reference {quality.reference_variant}: tolerance not checkable"
    )
    value = "none" if report.quality_value is None else f"{report.quality_value:.4f}"
    verdict = "accepted" if accepted(report, reference_value) else "NOT accepted"
    return (
        f"quality: {quality.metric} {value} vs threshold {quality.threshold} (must be >=); "
        f"tolerance {quality.tolerance} = largest allowed absolute drop below {base}; "
        f"ids_match={str(report.ids_match).lower()} format_valid={str(report.format_valid).lower()}"
        f"; {verdict}"
    )


def apply_outcome(
    rows: Sequence[dict[str, Any]], outcome: QualityOutcome, quality: QualitySpec
) -> list[dict[str, Any]]:
    """New rows with the acceptance columns filled from ``outcome`` (load rows unchanged)."""
    filled = []
    for row in rows:
        row = dict(row)
        if row["phase"] in MEASURED_PHASES:
            report = outcome.reports.get(_key(row))
            row.update(
                quality_metric=quality.metric,
                quality_threshold=quality.threshold,
                quality_tolerance=quality.tolerance,
                expected_ids=report.expected_count if report else None,
                observed_ids=report.observed_count if report else None,
                ids_match=report.ids_match if report else None,
                format_valid=report.format_valid if report else None,
                quality_value=report.quality_value if report else None,
                corpus_accepted=accepted(report, outcome.reference_value),
            )
            note = quality_note(report, quality, outcome.reference_value)
            kept = [part for part in (row.get("notes") or "").split(" | ") if part]
            kept = [part for part in kept if not part.startswith("quality: ")]
            row["notes"] = " | ".join([*kept, note])
        filled.append(row)
    return filled


def fill_quality(
    bundle_dir: Path, corpus: Corpus, classes: Sequence[str], quality: QualitySpec
) -> QualityOutcome:
    """Assess every run, archive each ``checks.json`` (R1.6), rewrite the CSV atomically."""
    csv_path = Path(bundle_dir) / CSV_NAME
    rows = read_rows(csv_path)
    reference = kept_reference_value(bundle_dir)
    outcome = assess_runs(bundle_dir, rows, corpus, classes, quality, reference)
    for key, report in outcome.reports.items():
        if report is not None:
            variant_id, _, phase_run = key.partition("/")
            phase, _, index = phase_run.rpartition("-")
            folder = run_dir(bundle_dir, variant_id, phase, int(index))
            write_checks(report, folder / CHECKS_NAME)
    write_rows_atomic(csv_path, apply_outcome(rows, outcome, quality))
    return outcome

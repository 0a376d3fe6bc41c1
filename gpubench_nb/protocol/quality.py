"""The quality stage (R1.5, R1.6, R5.7): acceptance of every run, filled into the raw CSV."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench_nb.errors import ResultsError
from gpubench_nb.protocol.acceptance import AcceptanceReport, check_predictions, write_checks
from gpubench_nb.protocol.bundle import (
    CHECKS_NAME,
    CSV_NAME,
    PREDICTIONS_NAME,
    run_dir,
)
from gpubench_nb.protocol.corpus import Corpus
from gpubench_nb.protocol.experiment_spec import QualitySpec
from gpubench_nb.protocol.records import MEASURED_PHASES, PHASES, ReferenceRecord
from gpubench_nb.protocol.results import read_rows, write_rows_atomic


@dataclass(frozen=True)
class QualityOutcome:
    """Acceptance of every measured run, keyed ``<variant>/<phase>-<n>``."""

    reference_value: float | None
    reports: dict[str, AcceptanceReport | None]  # None: the run left no predictions


def run_key(row: Mapping[str, Any]) -> str:
    """``<variant>/<phase>-<n>``: the run's name in messages, its folder under ``runs/``."""
    return f"{row['variant_id']}/{row['phase']}-{row['run_index']}"


def _folder(bundle_dir: Path, row: Mapping[str, Any]) -> Path:
    return run_dir(bundle_dir, row["variant_id"], row["phase"], row["run_index"])


def assess_runs(
    bundle_dir: Path,
    rows: Sequence[dict[str, Any]],
    corpus: Corpus,
    classes: Sequence[str],
    quality: QualitySpec,
    reference_value: float | None = None,
) -> QualityOutcome:
    """Check each measured run's predictions (R1.5); a drop is measured from the reference variant's
    median valid quality, or ``reference_value`` (R1.3)."""
    measured = [row for row in rows if row["phase"] in MEASURED_PHASES]
    predictions = {run_key(row): _folder(bundle_dir, row) / PREDICTIONS_NAME for row in measured}
    reference_values = []
    for row in measured:
        path = predictions[run_key(row)]
        if row["variant_id"] == quality.reference_variant and path.exists():
            report = check_predictions(corpus, path, classes, quality)
            if report.quality_value is not None:
                reference_values.append(report.quality_value)
    if reference_values:
        reference_value = statistics.median(reference_values)
    reports = {
        key: check_predictions(corpus, path, classes, quality, reference_value)
        if path.exists()
        else None
        for key, path in predictions.items()
    }
    return QualityOutcome(reference_value, reports)


def kept_reference_value(bundle_dir: Path) -> float | None:
    """The reference value a bundle kept in reference.json, or None when it has none."""
    kept = ReferenceRecord.read(bundle_dir)
    value = kept.reference_value if kept is not None else None
    return value if value is not None and math.isfinite(value) else None


def accepted(report: AcceptanceReport | None, reference_value: float | None) -> bool:
    """R1.5: accepted only with every check passed, the tolerance included (needs a reference)."""
    return bool(report and report.corpus_accepted and reference_value is not None)


# The CSV's acceptance columns and the field of the run's report each one mirrors (R1.6, R4).
REPORTED_COLUMNS = {
    "expected_ids": "expected_count",
    "observed_ids": "observed_count",
    "ids_match": "ids_match",
    "format_valid": "format_valid",
    "quality_value": "quality_value",
    "corpus_accepted": "corpus_accepted",
}


def acceptance_columns(
    report: AcceptanceReport | None, reference_value: float | None
) -> dict[str, Any]:
    """The CSV's acceptance columns of one run, as its report decides them (R1.5, R4)."""
    columns = {c: report and getattr(report, f) for c, f in REPORTED_COLUMNS.items()}
    return {**columns, "corpus_accepted": accepted(report, reference_value)}


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
            report = outcome.reports.get(run_key(row))
            row.update(acceptance_columns(report, outcome.reference_value))
            row.update(
                quality_metric=quality.metric,
                quality_threshold=quality.threshold,
                quality_tolerance=quality.tolerance,
            )
            note = quality_note(report, quality, outcome.reference_value)
            parts = (row.get("notes") or "").split(" | ")
            kept = [part for part in parts if part and not part.startswith("quality: ")]
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
    for key, path in ((run_key(row), _folder(bundle_dir, row)) for row in rows):
        if (report := outcome.reports.get(key)) is not None:
            write_checks(report, path / CHECKS_NAME)
    write_rows_atomic(csv_path, apply_outcome(rows, outcome, quality))
    return outcome


# -- the rule: is a variant accepted (R1.5, R5.3, R5.7) ----------------------------------------


_STATUS = {True: "accepted", False: "not accepted", None: "acceptance not recorded"}


@dataclass(frozen=True)
class VariantAcceptance:
    """One variant's verdict over its measured (cold and warm) runs: the one rule that
    economics, the decision table, the report and the run summary all read (R1.5, R5.7)."""

    variant_id: str
    measured_runs: int
    accepted_runs: int
    failed: tuple[str, ...]  # runs whose corpus_accepted is false ("cold-1", ...)
    unrecorded: tuple[str, ...]  # runs whose corpus_accepted is empty (R4.3: not recorded)

    @property
    def verdict(self) -> bool | None:
        """True when every measured run was accepted; False when one was not or none ran; None while
        some is unrecorded and none failed (R4.3)."""
        if self.failed or self.measured_runs == 0:
            return False
        return None if self.unrecorded else True

    @property
    def accepted(self) -> bool:
        return self.verdict is True

    @property
    def status(self) -> str:
        return _STATUS[self.verdict]

    @property
    def accepted_unique_corpora(self) -> int | None:
        """1 (the one distinct corpus) when accepted, 0 when not, None when not recorded:
        repeats of one corpus never add up (R5.3)."""
        return {True: 1, False: 0, None: None}[self.verdict]

    @property
    def reason(self) -> str | None:
        """Why there is no cost per result, in words (R5.5, R5.7); None when accepted."""
        if self.failed:
            return (
                f"not accepted: {len(self.failed)} of {self.measured_runs} measured runs failed "
                f"acceptance ({', '.join(self.failed)}); a configuration that was not accepted "
                "does not reach the same goal, whatever its speed, so it gets no cost per "
                "result (R5.7)"
            )
        if self.measured_runs == 0:
            return "not accepted: no measured run (cold or warm), so no accepted corpus (R5.7)"
        if self.unrecorded:
            return (
                f"acceptance not recorded for {', '.join(self.unrecorded)} (run the quality "
                "checks first); no cost per result without a measured accepted count (R5.5)"
            )
        return None


def variant_acceptance(rows: Sequence[Mapping[str, Any]]) -> dict[str, VariantAcceptance]:
    """Per variant, in first-seen order, the :class:`VariantAcceptance` verdict over typed rows; bad
    phase or acceptance cells are a ResultsError (R3.2, R4)."""
    runs: dict[str, dict[bool | None, list[str]]] = {}  # variant -> corpus_accepted -> runs
    for row in rows:
        variant, phase = str(row["variant_id"]), row["phase"]
        if phase not in PHASES:
            raise ResultsError(
                f"variant {variant!r}: phase must be one of {', '.join(PHASES)}, got {phase!r}",
                rule="R3.2",
            )
        verdicts = runs.setdefault(variant, {True: [], False: [], None: []})
        if phase not in MEASURED_PHASES:
            continue
        verdict = row.get("corpus_accepted")
        run = f"{phase}-{row.get('run_index') or '?'}"
        if verdict is not None and not isinstance(verdict, bool):
            raise ResultsError(
                f"variant {variant!r} {run}: corpus_accepted must be true, false or empty, "
                f"got {verdict!r}",
                rule="R4",
            )
        verdicts[verdict].append(run)
    return {
        variant: VariantAcceptance(
            variant, sum(map(len, v.values())), len(v[True]), tuple(v[False]), tuple(v[None])
        )
        for variant, v in runs.items()
    }

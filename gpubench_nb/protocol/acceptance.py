"""Corpus acceptance (R1.5, R1.6, R5.7): ID set equality, duplicates, format, quality verdicts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gpubench_nb.errors import CorpusError, ProtocolError
from gpubench_nb.protocol.bundle import CHECKS_NAME
from gpubench_nb.protocol.corpus_file import encodable
from gpubench_nb.protocol.experiment_spec import METRICS, QUALITY_SLACK, QualitySpec
from gpubench_nb.protocol.ids import id_key, id_problem
from gpubench_nb.protocol.predictions_file import lines_of_records, read_predictions
from gpubench_nb.protocol.problems import Problems, failure_kind
from gpubench_nb.protocol.records import Record

if TYPE_CHECKING:
    from gpubench_nb.protocol.corpus import Corpus


@dataclass(frozen=True, kw_only=True)
class AcceptanceReport(Record):
    """Everything ``checks.json`` archives (R1.6); the lists are kept in full. Built whole by
    ``check_predictions``; a key an older or hand-made file lacks reads as empty, and
    check-bundle compares every reported one with its re-derived value."""

    NAME = CHECKS_NAME
    RULE = "R1.6"
    expected_count: int | None = None
    observed_count: int | None = None  # prediction records carrying a string ID, duplicates in
    missing_ids: list[str] = field(default_factory=list)  # corpus order
    duplicated_ids: dict[str, list[int]] = field(default_factory=dict)  # id -> its lines
    extra_ids: list[str] = field(default_factory=list)  # first-appearance order
    malformed_lines: list[dict[str, Any]] = field(default_factory=list)  # {"line", "error"}
    ids_match: bool | None = None
    format_valid: bool | None = None
    metric: str | None = None
    quality_value: float | None = None
    threshold: float | None = None
    tolerance: float | None = None
    reference_value: float | None = None
    meets_threshold: bool | None = None
    within_tolerance: bool | None = None
    corpus_accepted: bool = False
    quality_drop: float | None = None  # reference_value - quality_value (positive = worse)
    bom: bool = False  # the predictions file started with a UTF-8 BOM (tolerated)
    in_corpus_order: bool | None = None  # informational; acceptance compares sets, not order
    corpus_revision: str | None = None
    predictions_file: str | None = None  # file name only: checks.json lies beside it


def _require_metric(metric: str) -> None:
    """Refuse a metric the protocol does not know (R1.3)."""
    if metric not in METRICS:
        raise ProtocolError(
            f"quality.metric {metric!r} is not supported; use one of {list(METRICS)}",
            rule="R1.3",
        )


def quality_score(metric: str, y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> float:
    """The declared metric over label indices, equal (tested) to scikit-learn's
    f1_score/accuracy_score, without importing it (~1.7 s per kernel)."""
    _require_metric(metric)
    total = len(y_true)
    if metric == "accuracy":
        return float(np.count_nonzero(y_true == y_pred) / total) if total else 0.0
    confusion = np.bincount(y_true * n_classes + y_pred, minlength=n_classes * n_classes)
    confusion = confusion.reshape(n_classes, n_classes)
    tp = np.diag(confusion).astype(np.float64)
    support = confusion.sum(axis=1).astype(np.float64)  # true counts
    predicted = confusion.sum(axis=0).astype(np.float64)
    denominator = support + predicted  # = 2 TP + FP + FN
    f1 = np.divide(2.0 * tp, denominator, out=np.zeros(n_classes), where=denominator > 0)
    if metric == "macro_f1":
        return float(f1.mean()) if n_classes else 0.0
    weight = support.sum()
    return float((f1 * support).sum() / weight) if weight > 0 else 0.0


@dataclass(frozen=True)
class _IdMatch:
    """How the observed IDs compare with the expected ones (R1.5, R1.6)."""

    ids: list[str]  # observed, in file order; canonical text unless they equal the corpus order
    predicted: Sequence[int | None]  # label index per expected ID, None where it is missing
    in_order: bool  # the IDs are the corpus IDs in corpus order, each once
    missing: list[str]  # corpus order
    duplicated: dict[str, list[int]]  # id -> every line it appears on
    extra: list[str]  # first-appearance order
    record_lines: list[int] | None  # line of each record; computed only when a fault needs it

    @property
    def ids_match(self) -> bool:
        """Set equality and no duplicate (R1.5, R1.6)."""
        return not self.missing and not self.duplicated and not self.extra


def _match_ids(
    expected_ids: Sequence[str], ids: list[str], labels: list[int], skipped: list[int]
) -> _IdMatch:
    """Compare the observed IDs with the expected ones: missing, duplicated, extra (R1.6)."""
    # Fast path: corpus IDs are unique, so an equal sequence proves set equality, no duplicate.
    if ids == list(expected_ids):
        return _IdMatch(ids, labels, True, [], {}, [], None)
    # IDs compare as canonical text: equal after NFC is the same ID (protocol/ids.py).
    ids = list(map(id_key, ids))
    observed = dict(zip(ids, labels, strict=True))  # duplicates are reported below
    predicted = list(map(observed.get, map(id_key, expected_ids)))  # None where missing
    missing = []
    if None in predicted:
        missing = [i for i, p in zip(expected_ids, predicted, strict=True) if p is None]
    has_duplicates = len(observed) != len(ids)
    has_extra = len(observed) > len(expected_ids) - len(missing)  # distinct, not expected
    if not (has_duplicates or has_extra):
        return _IdMatch(ids, predicted, False, missing, {}, [], None)
    record_lines = lines_of_records(len(ids), skipped)
    twice = {item_id for item_id, n in Counter(ids).items() if n > 1}
    duplicated: dict[str, list[int]] = {}
    for item_id, line in zip(ids, record_lines, strict=True):
        if item_id in twice:
            duplicated.setdefault(item_id, []).append(line)
    expected_set = set(map(id_key, expected_ids))
    extra = [item_id for item_id in dict.fromkeys(ids) if item_id not in expected_set]
    return _IdMatch(ids, predicted, False, missing, duplicated, extra, record_lines)


def _extra_id_faults(match: _IdMatch) -> list[dict[str, Any]]:
    """The extras that are a format fault, not a foreign item, at the line of first use."""
    if not match.extra or match.record_lines is None:
        return []
    # reversed: the last pair written for an ID is its first use
    first_line = dict(zip(reversed(match.ids), reversed(match.record_lines), strict=True))
    faults = []
    for item_id in match.extra:
        if not encodable(item_id):
            error = "'id' holds bytes that are not UTF-8"
        elif (why := id_problem(item_id)) is not None:
            error = f"'id' {item_id!r} {why}; write the ID exactly as in the corpus"
        else:
            continue
        faults.append({"line": first_line[item_id], "error": error})
    return faults


def _quality_value(
    expected: Corpus, predicted: Sequence[int | None], class_index: dict[str, int], metric: str
) -> float:
    """The declared metric of the predictions against the corpus's gold labels (R1.3)."""
    truth = list(map(class_index.get, expected.labels))
    if None in truth:
        bad = next(label for label in expected.labels if label not in class_index)
        raise CorpusError(
            f"the expected corpus {expected.path} has label {bad!r} outside the declared "
            f"classes {list(class_index)}; load it with classes=... (R1.3)",
            rule="R1.5",
        )
    y_true = np.fromiter(truth, dtype=np.int64, count=len(truth))
    y_pred = np.fromiter(predicted, dtype=np.int64, count=len(predicted))
    return quality_score(metric, y_true, y_pred, len(class_index))


def check_predictions(
    expected: Corpus,
    predictions_path: Path,
    classes: Sequence[str],
    quality: QualitySpec,
    reference_value: float | None = None,
) -> AcceptanceReport:
    """Accept a predictions file only when every expected ID appears once, each label is declared,
    the metric meets the threshold and any drop from a reference is within tolerance (R1.5, R1.6,
    R5.7)."""
    path = Path(predictions_path)
    class_index = {name: i for i, name in enumerate(classes)}
    _require_metric(quality.metric)
    ids, labels, skipped, malformed, bom = read_predictions(path, class_index)
    match = _match_ids(expected.ids, ids, labels, skipped)
    if match.extra:
        malformed = sorted(malformed + _extra_id_faults(match), key=lambda entry: entry["line"])
    format_valid = not malformed
    quality_value = None
    if match.ids_match and format_valid:
        quality_value = _quality_value(expected, match.predicted, class_index, quality.metric)
    meets = within = drop = None  # not judged without a value, or without a reference
    if quality_value is not None:
        meets = quality_value >= quality.threshold - QUALITY_SLACK
        if reference_value is not None:
            within = quality_value >= reference_value - quality.tolerance - QUALITY_SLACK
            drop = reference_value - quality_value
    return AcceptanceReport(
        expected_count=len(expected.ids),
        observed_count=len(match.ids),
        missing_ids=match.missing,
        duplicated_ids=match.duplicated,
        extra_ids=match.extra,
        malformed_lines=malformed,
        ids_match=match.ids_match,
        format_valid=format_valid,
        metric=quality.metric,
        quality_value=quality_value,
        threshold=float(quality.threshold),
        tolerance=float(quality.tolerance),
        reference_value=None if reference_value is None else float(reference_value),
        meets_threshold=meets,
        within_tolerance=within,
        corpus_accepted=bool(
            match.ids_match and format_valid and meets and (reference_value is None or within)
        ),
        quality_drop=drop,
        bom=bom,
        in_corpus_order=match.in_order if match.ids_match else None,
        corpus_revision=expected.revision,
        predictions_file=path.name,
    )


def write_checks(report: AcceptanceReport, path: Path) -> None:
    """Archive the report as ``checks.json`` beside the predictions (R1.6), atomically."""
    AcceptanceReport.save(path, report)


def _lines_text(lines: list[int]) -> str:
    head = ", ".join(str(n) for n in lines[:-1])
    return f"lines {head} and {lines[-1]}" if head else f"line {lines[-1]}"


def _malformed_text(malformed: list[dict]) -> str:
    """``N malformed line(s) (line 4: ...; the same in 20 lines (lines 4-23))``: the first
    kind of fault said once with its lines, and how many other kinds there are."""
    problems = Problems("line")
    for fault in malformed:
        line, error = fault["line"], fault["error"]
        problems.add(failure_kind(error), line, f"line {line}: {error}")
    first, *others = problems.lines()
    more = f"; and {len(others)} other kind(s) of fault, see checks.json" if others else ""
    return f"{len(malformed)} malformed line(s) ({first}{more})"


def summarise(report: AcceptanceReport) -> str:
    """A short human verdict for the CLI and the notebooks."""
    r = report
    counts = f"{r.observed_count}/{r.expected_count} IDs"
    faults = []
    if r.missing_ids:
        faults.append(f"{len(r.missing_ids)} missing (first: {r.missing_ids[0]})")
    if r.duplicated_ids:
        first, lines = next(iter(r.duplicated_ids.items()))
        faults.append(f"{len(r.duplicated_ids)} duplicated ({first}, {_lines_text(lines)})")
    if r.extra_ids:
        faults.append(f"{len(r.extra_ids)} extra (first: {r.extra_ids[0]})")
    if r.malformed_lines:
        faults.append(_malformed_text(r.malformed_lines))
    if r.quality_value is None:
        quality = f"{r.metric} not computed (IDs or format invalid)"
    else:
        sign = ">=" if r.meets_threshold else "<"
        quality = f"{r.metric} {r.quality_value:.4f} {sign} {r.threshold:g}"
        if r.reference_value is not None:
            sign = "<=" if r.within_tolerance else ">"
            quality += (
                f", drop {r.quality_drop:.4f} {sign} tolerance {r.tolerance:g} "
                f"vs reference {r.reference_value:.4f}"
            )
    verdict = "accepted" if r.corpus_accepted else "REFUSED (R1.5)"
    notes = "; BOM tolerated" if r.bom else ""
    return "; ".join([f"{verdict}: {quality}", counts, *faults]) + notes

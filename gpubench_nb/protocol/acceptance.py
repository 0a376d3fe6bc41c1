"""Corpus acceptance (R1.5, R1.6, R5.7): ID set equality, duplicates, format, quality verdicts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from gpubench_nb.atomic import write_json_atomic
from gpubench_nb.errors import CorpusError, PredictionsError, ProtocolError
from gpubench_nb.protocol.experiment_spec import (
    METRICS,  # the metrics a declaration may name (R1.3)
)
from gpubench_nb.protocol.ids import (
    DuplicateKeyError,
    id_key,
    id_problem,
    strict_json_line,
    strict_json_loads,
)

if TYPE_CHECKING:
    from gpubench_nb.protocol.corpus import Corpus

PREDICTION_KEYS = frozenset({"id", "label"})
# A value that equals its bound mathematically must not fail by float rounding (F1 values are
# ratios of counts); 1e-12 is far below any difference one item can make on 10^6 items.
_SLACK = 1e-12


class QualityRule(Protocol):
    """What acceptance reads of the declared quality (``experiment_spec.QualitySpec``, R1.3)."""

    metric: str
    threshold: float
    tolerance: float


@dataclass(frozen=True)
class AcceptanceReport:
    """Everything ``checks.json`` archives (R1.6); the lists are kept in full."""

    expected_count: int
    observed_count: int  # prediction records carrying a string ID, duplicates included
    missing_ids: list[str]  # corpus order
    duplicated_ids: dict[str, list[int]]  # id -> every line it appears on
    extra_ids: list[str]  # first-appearance order
    malformed_lines: list[dict[str, Any]]  # {"line": n, "error": "..."}
    ids_match: bool
    format_valid: bool
    metric: str
    quality_value: float | None
    threshold: float
    tolerance: float
    reference_value: float | None
    meets_threshold: bool | None
    within_tolerance: bool | None
    corpus_accepted: bool
    # Additions to the ARCHITECTURE.md contract, for the audit trail:
    quality_drop: float | None  # reference_value - quality_value (positive = worse)
    bom: bool  # the predictions file started with a UTF-8 BOM (tolerated)
    in_corpus_order: bool | None  # informational; acceptance compares sets, not order
    corpus_revision: str
    predictions_file: str  # file name only: checks.json lies beside it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------------------------
# Reading the predictions


def _has_surrogate(text: str) -> bool:
    # Bytes that are not UTF-8 were decoded with surrogateescape: they show as lone surrogates.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _diagnose(raw: str, class_index: dict[str, int]) -> tuple[str | None, int, str]:
    """Slow path for a line the fast path did not take: (id or None, label index, error)."""
    if not raw.strip():
        return None, -1, "blank line; remove it (one JSON object per line)"
    if _has_surrogate(raw):
        return None, -1, "bytes that are not UTF-8; write the predictions as UTF-8"
    try:
        obj = strict_json_loads(raw)
    except DuplicateKeyError as exc:
        return None, -1, f"{exc}; write 'id' and 'label' once each"
    except ValueError as exc:
        return None, -1, f"not valid JSON ({exc})"
    if not isinstance(obj, dict):
        return None, -1, f'a JSON {type(obj).__name__}, not an object {{"id": ..., "label": ...}}'
    errors = []
    item_id = obj.get("id")
    if "id" not in obj:
        errors.append("field 'id' is missing")
    elif not isinstance(item_id, str):
        errors.append(f"'id' is a {type(item_id).__name__} ({item_id!r}), not a string")
        item_id = None
    label = obj.get("label")
    label_index = -1
    if "label" not in obj:
        errors.append("field 'label' is missing")
    elif not isinstance(label, str):
        errors.append(f"'label' is a {type(label).__name__} ({label!r}), not a string")
    elif label not in class_index:
        errors.append(f"label {label!r} is not one of the declared classes (R1.3)")
    else:
        label_index = class_index[label]
    extra = sorted(set(obj) - PREDICTION_KEYS)
    if extra:
        errors.append(f"extra field(s) {extra}; only 'id' and 'label' are allowed")
    return item_id, label_index, "; ".join(errors)


def _read(path: Path, class_index: dict[str, int]) -> tuple[list, list, list, list, bool]:
    """Parse once with json.loads per line, cheap type checks on the fast path.

    Returns (ids, label indices, line numbers that gave no record, malformed entries, bom).
    Label index -1 marks a record whose label is unusable (it is also in ``malformed``).
    """
    try:
        with open(path, "rb") as probe:
            bom = probe.read(3) == b"\xef\xbb\xbf"
        handle = open(  # noqa: SIM115 - closed by the with below
            path, encoding="utf-8-sig" if bom else "utf-8", errors="surrogateescape"
        )
    except OSError as exc:
        raise PredictionsError(
            f"cannot read predictions file {path} ({exc.strerror or exc}); check that the run "
            "wrote it",
            rule="R1.5",
        ) from exc
    ids: list[str] = []
    labels: list[int] = []
    skipped: list[int] = []
    malformed: list[dict[str, Any]] = []
    add_id, add_label, class_of = ids.append, labels.append, class_index.get
    loads = strict_json_line  # a key given twice is refused, not "last one wins"
    with handle:
        try:
            for raw in handle:
                try:
                    obj = loads(raw)
                except ValueError:
                    obj = None
                if type(obj) is dict and len(obj) == 2:
                    item_id = obj.get("id")
                    label = obj.get("label")
                    if type(item_id) is str and type(label) is str:
                        index = class_of(label)
                        if index is not None:
                            add_id(item_id)
                            add_label(index)
                            continue
                # Slow path: the line number is the count of lines consumed so far.
                line = len(ids) + len(skipped) + 1
                item_id, index, error = _diagnose(raw, class_index)
                if item_id is None:
                    skipped.append(line)
                else:
                    add_id(item_id)
                    add_label(index)
                if error:
                    malformed.append({"line": line, "error": error})
        except OSError as exc:
            raise PredictionsError(
                f"cannot read predictions file {path} ({exc}); check the file", rule="R1.5"
            ) from exc
    return ids, labels, skipped, malformed, bom


def _record_lines(count: int, skipped: list[int]) -> list[int]:
    """Line number of each record, given the lines that produced no record."""
    if not skipped:
        return list(range(1, count + 1))
    lines: list[int] = []
    skip = set(skipped)
    line = 0
    while len(lines) < count:
        line += 1
        if line not in skip:
            lines.append(line)
    return lines


# ---------------------------------------------------------------------------------------------
# Quality


def quality_score(metric: str, y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> float:
    """The declared metric over label indices, as scikit-learn computes it (zero_division=0).

    f1_score(average="macro" | "weighted", labels=classes, zero_division=0) and
    accuracy_score, from one confusion matrix: per class F1 = 2 TP / (2 TP + FP + FN), 0 when
    the class is absent from both truth and predictions; macro = plain mean over every declared
    class; weighted = mean weighted by true support. Not a call to scikit-learn: its import
    alone costs ~1.7 s per kernel; equality with it is tested (tests/test_acceptance.py).
    """
    if metric not in METRICS:
        raise ProtocolError(
            f"quality.metric {metric!r} is not supported; use one of {list(METRICS)}",
            rule="R1.3",
        )
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


# ---------------------------------------------------------------------------------------------
# The check


def check_predictions(
    expected: Corpus,
    predictions_path: Path,
    classes: Sequence[str],
    quality: QualityRule,
    reference_value: float | None = None,
) -> AcceptanceReport:
    """Check one predictions file against the expected corpus (R1.5, R1.6).

    Accepted only when every expected ID appears exactly once, no extra ID appears, every line
    is ``{"id": str, "label": <declared class>}``, the metric meets the threshold and, given a
    reference value, the drop stays within the tolerance. A faster run that is not accepted
    did not do the same work (R5.7).
    """
    path = Path(predictions_path)
    classes = tuple(classes)
    class_index = {name: i for i, name in enumerate(classes)}
    if quality.metric not in METRICS:
        raise ProtocolError(
            f"quality.metric {quality.metric!r} is not supported; use one of {list(METRICS)}",
            rule="R1.3",
        )
    ids, labels, skipped, malformed, bom = _read(path, class_index)

    expected_ids = expected.ids
    # Fast path, the usual case: the IDs in corpus order, each once. Corpus IDs are unique
    # (Corpus checks it), so an equal sequence proves set equality, no duplicate, no extra.
    in_order = ids == list(expected_ids)
    missing: list[str] = []
    if in_order:
        distinct = len(ids)
        predicted: Sequence[int | None] = labels
    else:
        # IDs compare as canonical text: equal after NFC is the same ID (protocol/ids.py).
        ids = list(map(id_key, ids))
        observed = dict(zip(ids, labels, strict=True))  # duplicates are reported below
        distinct = len(observed)
        predicted = list(map(observed.get, map(id_key, expected_ids)))  # None where missing
        if None in predicted:
            missing = [i for i, p in zip(expected_ids, predicted, strict=True) if p is None]
    # Distinct observed IDs that are not found expected ones are extra.
    n_extra = distinct - (len(expected_ids) - len(missing))
    record_lines: list[int] | None = None
    duplicated: dict[str, list[int]] = {}
    if distinct != len(ids):
        record_lines = _record_lines(len(ids), skipped)
        twice = {item_id for item_id, n in Counter(ids).items() if n > 1}
        for item_id, line in zip(ids, record_lines, strict=True):
            if item_id in twice:
                duplicated.setdefault(item_id, []).append(line)
    extra: list[str] = []
    if n_extra:
        expected_set = set(map(id_key, expected_ids))
        extra = [item_id for item_id in dict.fromkeys(ids) if item_id not in expected_set]
        # Explain the extras that are a format fault, not a foreign item (line of first use).
        record_lines = record_lines or _record_lines(len(ids), skipped)
        first_line: dict[str, int] = {}
        for item_id, line in zip(ids, record_lines, strict=True):
            first_line.setdefault(item_id, line)
        for item_id in extra:
            if _has_surrogate(item_id):
                error = "'id' holds bytes that are not UTF-8"
            elif (why := id_problem(item_id)) is not None:
                error = f"'id' {item_id!r} {why}; write the ID exactly as in the corpus"
            else:
                continue
            malformed.append({"line": first_line[item_id], "error": error})
        malformed.sort(key=lambda entry: entry["line"])

    ids_match = not missing and not duplicated and not extra
    format_valid = not malformed
    quality_value: float | None = None
    if ids_match and format_valid:
        truth = list(map(class_index.get, expected.labels))
        if None in truth:
            bad = next(label for label in expected.labels if label not in class_index)
            raise CorpusError(
                f"the expected corpus {expected.path} has label {bad!r} outside the declared "
                f"classes {list(classes)}; load it with classes=... (R1.3)",
                rule="R1.5",
            )
        y_true = np.fromiter(truth, dtype=np.int64, count=len(truth))
        y_pred = np.fromiter(predicted, dtype=np.int64, count=len(predicted))
        quality_value = quality_score(quality.metric, y_true, y_pred, len(classes))

    meets = within = None
    drop = None
    if quality_value is not None:
        meets = quality_value >= quality.threshold - _SLACK
        if reference_value is not None:
            drop = reference_value - quality_value
            within = quality_value >= reference_value - quality.tolerance - _SLACK
    accepted = bool(ids_match and format_valid and meets and (reference_value is None or within))
    return AcceptanceReport(
        expected_count=len(expected_ids),
        observed_count=len(ids),
        missing_ids=missing,
        duplicated_ids=duplicated,
        extra_ids=extra,
        malformed_lines=malformed,
        ids_match=ids_match,
        format_valid=format_valid,
        metric=quality.metric,
        quality_value=quality_value,
        threshold=float(quality.threshold),
        tolerance=float(quality.tolerance),
        reference_value=None if reference_value is None else float(reference_value),
        meets_threshold=meets,
        within_tolerance=within,
        corpus_accepted=accepted,
        quality_drop=drop,
        bom=bom,
        in_corpus_order=in_order if ids_match else None,
        corpus_revision=expected.revision,
        predictions_file=path.name,
    )


def write_checks(report: AcceptanceReport, path: Path) -> None:
    """Archive the report as ``checks.json`` beside the predictions (R1.6), atomically."""
    write_json_atomic(Path(path), report.to_dict())


def _lines_text(lines: list[int]) -> str:
    head = ", ".join(str(n) for n in lines[:-1])
    return f"lines {head} and {lines[-1]}" if head else f"line {lines[-1]}"


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
        first = r.malformed_lines[0]
        faults.append(
            f"{len(r.malformed_lines)} malformed line(s) (line {first['line']}: {first['error']})"
        )
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

"""Acceptance (R1.5, R1.6, R5.7): ID sets, duplicates, format faults, quality verdicts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import accuracy_score, f1_score

from gpubench_nb.errors import PredictionsError, ProtocolError
from gpubench_nb.protocol.acceptance import (
    AcceptanceReport,
    check_predictions,
    quality_score,
    summarise,
    write_checks,
)
from gpubench_nb.protocol.corpus import Corpus, CorpusItem, load_corpus, make_corpus
from gpubench_nb.protocol.records import FORMAT_VERSION

CLASSES = ("admin", "games", "graphics", "mail", "math", "net", "science", "sound", "text", "web")


@dataclass(frozen=True)
class Quality:  # the fields of experiment.QualitySpec that acceptance reads
    metric: str = "macro_f1"
    threshold: float = 0.70
    tolerance: float = 0.01


@pytest.fixture(scope="module")
def corpus(data_dir: Path) -> Corpus:
    return load_corpus(data_dir / "eval.jsonl", classes=CLASSES)


def lines_of(pairs) -> list[str]:
    return [json.dumps({"id": i, "label": label}) for i, label in pairs]


def write(path: Path, lines: list[str], *, end="\n", bom=False) -> Path:
    text = "".join(line + end for line in lines)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


def perfect(corpus: Corpus) -> list[str]:
    return lines_of(zip(corpus.ids, corpus.labels, strict=True))


def check(corpus, path, quality=None, reference=None) -> AcceptanceReport:
    return check_predictions(corpus, path, CLASSES, quality or Quality(), reference)


# ---------------------------------------------------------------------------------------------
# Accepted runs


def test_gold_predictions_are_accepted_with_f1_one(corpus, tmp_path):
    report = check(corpus, write(tmp_path / "p.jsonl", perfect(corpus)))
    assert report.corpus_accepted and report.ids_match and report.format_valid
    assert (report.expected_count, report.observed_count) == (1000, 1000)
    assert report.quality_value == 1.0 and report.meets_threshold is True
    assert report.within_tolerance is None and report.in_corpus_order is True
    assert report.missing_ids == [] and report.duplicated_ids == {} and report.extra_ids == []
    assert report.corpus_revision == corpus.revision


def test_macro_f1_equals_scikit_learn_on_the_real_corpus(corpus, tmp_path):
    rng = np.random.default_rng(7)
    predicted = [
        label if rng.random() < 0.75 else CLASSES[rng.integers(10)] for label in corpus.labels
    ]
    path = write(tmp_path / "p.jsonl", lines_of(zip(corpus.ids, predicted, strict=True)))
    options = {"labels": list(CLASSES), "zero_division": 0}
    for metric, reference in [
        ("macro_f1", f1_score(corpus.labels, predicted, average="macro", **options)),
        ("weighted_f1", f1_score(corpus.labels, predicted, average="weighted", **options)),
        ("accuracy", accuracy_score(corpus.labels, predicted)),
    ]:
        report = check(corpus, path, Quality(metric=metric, threshold=0.0))
        assert report.quality_value == pytest.approx(reference, abs=1e-12), metric
        assert report.corpus_accepted


def test_out_of_order_bom_and_crlf_are_tolerated_and_noted(corpus, tmp_path):
    shuffled = list(reversed(perfect(corpus)))
    report = check(corpus, write(tmp_path / "p.jsonl", shuffled, end="\r\n", bom=True))
    assert report.corpus_accepted and report.quality_value == 1.0
    assert report.bom is True and report.in_corpus_order is False
    assert "BOM tolerated" in summarise(report)


# ---------------------------------------------------------------------------------------------
# R1.5 / R1.6: refusals


def test_one_duplicate_and_one_missing_in_1000_lines_is_refused(corpus, tmp_path):
    lines = perfect(corpus)
    dropped = corpus.ids[500]
    lines[500] = lines[16]  # line 501 repeats line 17; the ID of line 501 is now missing
    report = check(corpus, write(tmp_path / "p.jsonl", lines))
    assert report.observed_count == report.expected_count == 1000  # same counts (R1.6)
    assert report.missing_ids == [dropped]
    assert report.duplicated_ids == {corpus.ids[16]: [17, 501]}
    assert report.extra_ids == [] and report.format_valid is True
    assert not report.ids_match and not report.corpus_accepted
    assert report.quality_value is None and report.meets_threshold is None
    summary = summarise(report)
    assert summary.startswith("REFUSED (R1.5)")
    assert f"1 missing (first: {dropped})" in summary
    assert f"1 duplicated ({corpus.ids[16]}, lines 17 and 501)" in summary


def test_one_fault_on_many_lines_is_said_once_with_its_lines(corpus, tmp_path):
    # Issue 25: one failure on many lines is said once, with its count and where.
    lines = perfect(corpus)
    for n in [*range(3, 23), 40]:  # lines 4-23 and 41: a label outside the declared classes
        lines[n] = lines_of([(corpus.ids[n], "cooking" if n < 30 else "baking")])[0]
    lines[99] = lines[99].replace('"label"', '"labl"')  # line 100: another kind of fault
    summary = summarise(check(corpus, write(tmp_path / "p.jsonl", lines)))
    assert summary.count("not one of the declared classes") == 1
    assert "22 malformed line(s) (line 4: label 'cooking' is not one of the declared" in summary
    assert "; the same in 21 lines (lines 4-23, 41); and 1 other kind(s) of fault" in summary


def test_same_count_different_sets_never_pass(corpus, tmp_path):
    lines = perfect(corpus)
    lines[999] = lines_of([("deb:not-in-corpus", "web")])[0]
    report = check(corpus, write(tmp_path / "p.jsonl", lines))
    assert report.observed_count == 1000
    assert report.missing_ids == [corpus.ids[999]]
    assert report.extra_ids == ["deb:not-in-corpus"]
    assert not report.ids_match and not report.corpus_accepted


def test_an_extra_id_is_refused(corpus, tmp_path):
    lines = [*perfect(corpus), *lines_of([("deb:extra", "net")])]
    report = check(corpus, write(tmp_path / "p.jsonl", lines))
    assert report.extra_ids == ["deb:extra"] and report.missing_ids == []
    assert report.observed_count == 1001 and not report.corpus_accepted


def test_whitespace_padded_id_is_a_format_fault_and_an_extra(corpus, tmp_path):
    lines = perfect(corpus)
    lines[3] = lines_of([(f" {corpus.ids[3]}", corpus.labels[3])])[0]
    report = check(corpus, write(tmp_path / "p.jsonl", lines))
    assert report.missing_ids == [corpus.ids[3]]
    assert report.extra_ids == [f" {corpus.ids[3]}"]
    assert report.malformed_lines[0]["line"] == 4
    assert "whitespace-padded" in report.malformed_lines[0]["error"]
    assert not report.format_valid and not report.corpus_accepted


def test_label_outside_classes_is_malformed_and_blocks_quality(corpus, tmp_path):
    lines = perfect(corpus)
    lines[9] = lines_of([(corpus.ids[9], "cooking")])[0]
    report = check(corpus, write(tmp_path / "p.jsonl", lines))
    assert report.ids_match is True  # the ID is there, once
    assert report.malformed_lines == [
        {"line": 10, "error": "label 'cooking' is not one of the declared classes (R1.3)"}
    ]
    assert report.format_valid is False and report.quality_value is None
    assert not report.corpus_accepted


def test_every_malformed_line_is_listed_with_its_number(corpus, tmp_path):
    ids = corpus.ids
    lines = perfect(corpus)[:8]
    lines[1] = '{"id": "' + ids[1] + '", "label": '  # truncated JSON
    lines[2] = ""  # blank line
    lines[3] = json.dumps([ids[3], "net"])
    lines[4] = json.dumps({"id": 5, "label": "net"})
    lines[5] = json.dumps({"id": ids[5], "label": None})
    lines[6] = json.dumps({"id": ids[6], "label": corpus.labels[6], "score": 0.9})
    lines[7] = json.dumps({"label": "net"})
    report = check(make_corpus(corpus.path, corpus.items[:8]), write(tmp_path / "p.jsonl", lines))
    errors = {entry["line"]: entry["error"] for entry in report.malformed_lines}
    assert sorted(errors) == [2, 3, 4, 5, 6, 7, 8]
    assert errors[2].startswith("not valid JSON")
    assert errors[3].startswith("blank line")
    assert errors[4].startswith("a JSON list, not an object")
    assert errors[5] == "'id' is a int (5), not a string"
    assert errors[6] == "'label' is a NoneType (None), not a string"
    assert errors[7] == "extra field(s) ['score']; only 'id' and 'label' are allowed"
    assert errors[8] == "field 'id' is missing"
    # Records 6 and 7 carry their IDs; 2, 3, 4, 5 and 8 do not.
    assert report.observed_count == 3
    assert report.missing_ids == [ids[1], ids[2], ids[3], ids[4], ids[7]]
    assert not report.corpus_accepted


def test_non_utf8_bytes_are_a_format_fault_with_their_line(corpus, tmp_path):
    path = write(tmp_path / "p.jsonl", perfect(corpus))
    data = path.read_bytes().split(b"\n")
    data[2] = data[2].replace(b'"label": "', b'"label": "\xff')
    path.write_bytes(b"\n".join(data))
    report = check(corpus, path)
    assert report.malformed_lines == [
        {"line": 3, "error": "bytes that are not UTF-8; write the predictions as UTF-8"}
    ]
    assert report.missing_ids == [corpus.ids[2]] and not report.corpus_accepted


def test_empty_file_is_refused_with_every_id_missing(corpus, tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_bytes(b"")
    report = check(corpus, path)
    assert report.observed_count == 0 and len(report.missing_ids) == 1000
    assert report.missing_ids[:2] == list(corpus.ids[:2])  # corpus order
    assert not report.ids_match and not report.corpus_accepted


def test_unreadable_path_raises_predictions_error(corpus, tmp_path):
    with pytest.raises(PredictionsError, match=r"R1\.5: cannot read predictions file"):
        check(corpus, tmp_path / "absent.jsonl")
    with pytest.raises(PredictionsError):
        check(corpus, tmp_path)  # a folder


def test_unknown_metric_is_a_protocol_error(corpus, tmp_path):
    path = write(tmp_path / "p.jsonl", perfect(corpus))
    with pytest.raises(ProtocolError, match=r"R1\.3: quality.metric 'auc' is not supported"):
        check(corpus, path, Quality(metric="auc"))


# ---------------------------------------------------------------------------------------------
# Threshold and tolerance (R1.3, R5.7)

TINY = make_corpus(
    Path("tiny.jsonl"),
    [CorpusItem(f"t{i}", "text", label) for i, label in enumerate(["web", "web", "net", "net"])],
)


def tiny_run(tmp_path, predicted) -> Path:
    return write(tmp_path / "p.jsonl", lines_of(zip(TINY.ids, predicted, strict=True)))


def test_accuracy_worked_example_threshold_and_tolerance(tmp_path):
    # 3 of 4 right: accuracy 0.75. Reference 0.80, tolerance 0.05: drop 0.05, within (bound).
    path = tiny_run(tmp_path, ["web", "web", "net", "web"])
    quality = Quality(metric="accuracy", threshold=0.75, tolerance=0.05)
    report = check_predictions(TINY, path, CLASSES, quality, reference_value=0.80)
    assert report.quality_value == 0.75 and report.meets_threshold is True
    assert report.quality_drop == pytest.approx(0.05)
    assert report.within_tolerance is True and report.corpus_accepted
    # Same run, stricter tolerance: the drop 0.05 exceeds 0.04, so the run is refused (R5.7).
    strict = Quality(metric="accuracy", threshold=0.75, tolerance=0.04)
    report = check_predictions(TINY, path, CLASSES, strict, reference_value=0.80)
    assert report.within_tolerance is False and not report.corpus_accepted
    assert "drop 0.0500 > tolerance 0.04" in summarise(report)


def test_macro_f1_worked_example_below_threshold(tmp_path):
    # web: TP 2, FP 1 -> F1 = 4/5; net: TP 1, FN 1 -> F1 = 2/3; the other 8 declared classes
    # are absent from truth and predictions -> 0 (zero_division=0). Macro = (0.8 + 2/3) / 10.
    path = tiny_run(tmp_path, ["web", "web", "net", "web"])
    report = check_predictions(TINY, path, CLASSES, Quality(threshold=0.70))
    assert report.quality_value == pytest.approx((0.8 + 2 / 3) / 10, abs=1e-15)
    assert report.meets_threshold is False and not report.corpus_accepted
    assert summarise(report).startswith("REFUSED (R1.5): macro_f1 0.1467 < 0.7")


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=1, max_value=6).flatmap(
        lambda k: st.tuples(
            st.just(k),
            st.lists(
                st.tuples(st.integers(0, k - 1), st.integers(0, k - 1)), min_size=1, max_size=40
            ),
        )
    )
)
def test_property_quality_score_matches_scikit_learn(case):
    k, pairs = case
    y_true = np.array([t for t, _ in pairs])
    y_pred = np.array([p for _, p in pairs])
    labels = list(range(k))
    for metric, average in [("macro_f1", "macro"), ("weighted_f1", "weighted")]:
        expected = f1_score(y_true, y_pred, average=average, labels=labels, zero_division=0)
        assert quality_score(metric, y_true, y_pred, k) == pytest.approx(expected, abs=1e-12)
    accuracy = accuracy_score(y_true, y_pred)
    assert quality_score("accuracy", y_true, y_pred, k) == pytest.approx(accuracy, abs=1e-15)


# ---------------------------------------------------------------------------------------------
# The archive (R1.6)


def test_checks_json_keeps_the_full_lists(corpus, tmp_path):
    lines = perfect(corpus)
    lines[500] = lines[16]
    report = check(corpus, write(tmp_path / "p.jsonl", lines))
    write_checks(report, tmp_path / "checks.json")
    saved = json.loads((tmp_path / "checks.json").read_text(encoding="utf-8"))
    assert saved == {**report.to_dict(), "format_version": FORMAT_VERSION}  # stamped (R5.6)
    assert saved["duplicated_ids"] == {corpus.ids[16]: [17, 501]}
    assert saved["missing_ids"] == [corpus.ids[500]]
    assert saved["predictions_file"] == "p.jsonl" and saved["corpus_accepted"] is False

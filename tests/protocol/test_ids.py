"""IDs are canonical text and JSON records give each key once (issue 11 §6, R1.2, R1.4, R1.5).

Reproduces the sweep's cases: IDs holding a line separator that `expected_ids.txt` cannot keep,
two spellings of one ID (NFC and NFD), a record with `id` or `label` given twice ("last one
wins" before), leakage hidden by Unicode composition, and a bundle whose corpus has unusual but
valid IDs, which check-bundle must re-derive intact.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from gpubench_nb.errors import CorpusError
from gpubench_nb.protocol.acceptance import check_predictions
from gpubench_nb.protocol.corpus import check_disjoint, load_corpus
from gpubench_nb.protocol.experiment_spec import QualitySpec
from gpubench_nb.protocol.ids import id_problem

CLASSES = ("a", "b")
QUALITY = QualitySpec(metric="accuracy", threshold=0.5, tolerance=0.1, reference_variant="b1")
CAFE_NFC = unicodedata.normalize("NFC", "café")
CAFE_NFD = unicodedata.normalize("NFD", "café")
# Unusual but valid: non-ASCII, commas, quotes, '#', spaces inside, a backslash, an emoji.
UNUSUAL_IDS = [CAFE_NFC, "a,b", 'say "hi"', "#1", "it's", "x y", "back\\slash", "日本-7", "🙂"]


def _jsonl(path: Path, records: list[dict] | list[str]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _items(ids: list[str]) -> list[dict]:
    return [{"id": i, "text": f"text {n}", "label": CLASSES[n % 2]} for n, i in enumerate(ids)]


def _refusal(path: Path) -> str:
    with pytest.raises(CorpusError) as caught:
        load_corpus(path, classes=CLASSES)
    return str(caught.value)


@pytest.mark.parametrize(
    "bad", ["a\u2028b", "a\u2029b", "a\x85b", "a\x0bb", "a\x1cb", "a\tb", "a\u200bb", "\ufeffa"]
)
def test_ids_with_control_or_line_separator_characters_are_refused(
    tmp_path: Path, bad: str
) -> None:
    message = _refusal(_jsonl(tmp_path / "c.jsonl", _items(["ok", bad])))
    assert f"line 2 [R1.2]: ID {bad!r} holds the control" in message
    assert f"U+{ord(next(c for c in bad if c not in 'ab')):04X}" in message


@pytest.mark.parametrize("bad", [" a", "a ", "a\u00a0", "\u3000a"])
def test_ids_with_surrounding_whitespace_of_any_kind_are_refused(tmp_path: Path, bad: str) -> None:
    assert "whitespace-padded" in _refusal(_jsonl(tmp_path / "c.jsonl", _items(["ok", bad])))


def test_two_ids_equal_after_nfc_are_one_id_twice(tmp_path: Path) -> None:
    assert CAFE_NFC != CAFE_NFD
    message = _refusal(_jsonl(tmp_path / "c.jsonl", _items([CAFE_NFC, "x", CAFE_NFD])))
    assert "line 3 [R1.2]: duplicate ID" in message and "after Unicode NFC normalisation" in message
    assert "(first on line 1)" in message


@pytest.mark.parametrize("key", ["id", "label", "text"])
def test_a_corpus_record_giving_a_key_twice_is_refused(tmp_path: Path, key: str) -> None:
    record = '{"id": "x", "text": "t", "label": "a", "' + key + '": "b"}'
    message = _refusal(_jsonl(tmp_path / "c.jsonl", [json.dumps(_items(["ok"])[0]), record]))
    assert f"line 2: key '{key}' is given twice in one object" in message


def test_unusual_but_valid_ids_are_accepted() -> None:
    assert [id_problem(i) for i in UNUSUAL_IDS] == [None] * len(UNUSUAL_IDS)


# --- predictions compared under the same rule -------------------------------------------------


def _predictions(path: Path, pairs: list[tuple[str, str]]) -> Path:
    return _jsonl(path, [{"id": i, "label": label} for i, label in pairs])


def test_predictions_match_expected_ids_after_nfc(tmp_path: Path) -> None:
    corpus = load_corpus(_jsonl(tmp_path / "c.jsonl", _items([CAFE_NFC, "z"])), classes=CLASSES)
    path = _predictions(tmp_path / "p.jsonl", [("z", "b"), (CAFE_NFD, "a")])  # other order
    report = check_predictions(corpus, path, CLASSES, QUALITY)
    assert report.ids_match and report.corpus_accepted and report.quality_value == 1.0
    # Both spellings in one file: one ID given twice, with both lines.
    path = _predictions(tmp_path / "p.jsonl", [(CAFE_NFC, "a"), ("z", "b"), (CAFE_NFD, "a")])
    report = check_predictions(corpus, path, CLASSES, QUALITY)
    assert report.duplicated_ids == {CAFE_NFC: [1, 3]} and not report.corpus_accepted


@pytest.mark.parametrize("key", ["id", "label"])
def test_a_prediction_giving_a_key_twice_is_malformed(tmp_path: Path, key: str) -> None:
    corpus = load_corpus(_jsonl(tmp_path / "c.jsonl", _items(["x", "y"])), classes=CLASSES)
    second = {"id": '"y", "label": "b", "id": "x"', "label": '"y", "label": "b", "label": "a"'}
    path = tmp_path / "p.jsonl"
    text = '{"id": "x", "label": "a"}\n{"id": ' + second[key] + "}\n"
    path.write_text(text, encoding="utf-8")
    report = check_predictions(corpus, path, CLASSES, QUALITY)
    assert not report.format_valid and not report.corpus_accepted
    assert report.malformed_lines[0]["line"] == 2
    assert f"key '{key}' is given twice" in report.malformed_lines[0]["error"]


def test_a_prediction_id_with_a_line_separator_is_malformed(tmp_path: Path) -> None:
    corpus = load_corpus(_jsonl(tmp_path / "c.jsonl", _items(["x", "y"])), classes=CLASSES)
    path = _predictions(tmp_path / "p.jsonl", [("x", "a"), ("y\u2028", "b")])
    report = check_predictions(corpus, path, CLASSES, QUALITY)
    assert report.missing_ids == ["y"] and report.extra_ids == ["y\u2028"]
    assert "U+2028" in report.malformed_lines[0]["error"]


# --- R1.4 after Unicode normalisation --------------------------------------------------------


@pytest.mark.parametrize(
    ("eval_text", "train_text"),
    [
        (f"Le {CAFE_NFC} du coin", f"le {CAFE_NFD}  du COIN"),  # composed vs decomposed
        ("ＧＮＵ Emacs editor", "gnu emacs editor"),  # full-width compatibility forms
        ("ﬁle manager", "file manager"),  # a ligature
    ],
)
def test_leakage_is_found_after_unicode_normalisation(
    tmp_path: Path, eval_text: str, train_text: str
) -> None:
    ev = _jsonl(tmp_path / "eval.jsonl", [{"id": "e1", "text": eval_text, "label": "a"}])
    tr = _jsonl(tmp_path / "train.jsonl", [{"id": "t1", "text": train_text, "label": "a"}])
    with pytest.raises(CorpusError, match="R1.4: .*1 text\\(s\\) identical after Unicode"):
        check_disjoint(load_corpus(ev), {"train": load_corpus(tr)})


def test_an_id_shared_across_splits_in_two_spellings_is_leakage(tmp_path: Path) -> None:
    ev = _jsonl(tmp_path / "eval.jsonl", [{"id": CAFE_NFC, "text": "one", "label": "a"}])
    tr = _jsonl(tmp_path / "train.jsonl", [{"id": CAFE_NFD, "text": "two", "label": "a"}])
    with pytest.raises(CorpusError, match="1 ID\\(s\\) in both eval"):
        check_disjoint(load_corpus(ev), {"train": load_corpus(tr)})

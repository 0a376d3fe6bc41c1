"""The corpus ledger: loading, refusals with line numbers, canonical revision, R1.4 splits."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpubench_nb.errors import CorpusError
from gpubench_nb.protocol.corpus import (
    Corpus,
    CorpusItem,
    check_disjoint,
    load_corpus,
    load_experiment_corpus,
    make_corpus,
    normalise_text,
    write_expected_ids,
)

CLASSES = ("admin", "games", "graphics", "mail", "math", "net", "science", "sound", "text", "web")
ITEMS = [
    CorpusItem("deb:vim", 'Vi IMproved, "enhanced" vi editor, with\na second line', "text"),
    CorpusItem("deb:zsh", "shell with lots of features, é ü 漢字", "admin"),
    CorpusItem("deb:0ad", "Real-time strategy game", "games"),
]


@dataclass(frozen=True)
class Spec:  # the fields of experiment.CorpusSpec that the loader reads
    path: Path
    format: str = "jsonl"
    id_field: str = "id"
    text_field: str = "text"
    label_field: str = "label"
    train: Path | None = None
    tune: Path | None = None


@dataclass(frozen=True)
class Exp:
    corpus: Spec
    classes: tuple[str, ...] = CLASSES


def write_jsonl(path: Path, records: list[dict], *, bom=False, newline="\n") -> Path:
    text = "".join(json.dumps(r, ensure_ascii=False) + newline for r in records)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


def write_csv(path: Path, header: list[str], rows: list[list[str]], *, bom=False, crlf=True):
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\r\n" if crlf else "\n")
    writer.writerow(header)
    writer.writerows(rows)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + buffer.getvalue().encode("utf-8"))
    return path


def records(items=ITEMS) -> list[dict]:
    return [{"id": i.id, "text": i.text, "label": i.label} for i in items]


# ---------------------------------------------------------------------------------------------
# The real corpus


@pytest.fixture(scope="module")
def real(data_dir: Path) -> dict[str, Corpus]:
    exp = Exp(
        Spec(data_dir / "eval.jsonl", train=data_dir / "train.jsonl", tune=data_dir / "tune.jsonl")
    )
    return {split: load_experiment_corpus(exp, split) for split in ("eval", "train", "tune")}


def test_real_eval_has_1000_unique_ids_and_the_declared_classes(real):
    corpus = real["eval"]
    assert len(corpus.ids) == 1000 == len(set(corpus.ids))  # README: exactly 1,000 items
    assert set(corpus.labels) == set(CLASSES)
    assert corpus.labels.count("admin") == 146  # README label distribution
    assert (len(real["train"]), len(real["tune"])) == (5107, 1000)
    assert re.fullmatch(r"[0-9a-f]{64}", corpus.revision)


def test_real_splits_are_disjoint_r1_4(real):
    check_disjoint(real["eval"], {"train": real["train"], "tune": real["tune"]})  # no raise


def test_expected_ids_file_lists_ids_in_corpus_order_r1_2(real, tmp_path):
    path = tmp_path / "bundle" / "expected_ids.txt"
    write_expected_ids(real["eval"], path)
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""  # final newline
    assert lines[:-1] == list(real["eval"].ids)
    assert lines[0] == "deb:0ad"  # first line of eval.jsonl


def test_split_not_declared_is_refused(tmp_path):
    exp = Exp(Spec(write_jsonl(tmp_path / "e.jsonl", records())))
    with pytest.raises(CorpusError, match=r"R1\.4: no train split is declared"):
        load_experiment_corpus(exp, "train")


def test_csv_split_uses_the_declared_fields(tmp_path):
    rows = [[i.label, i.id, i.text] for i in ITEMS]
    path = write_csv(tmp_path / "e.csv", ["gold", "key", "body"], rows)
    exp = Exp(Spec(path, format="csv", id_field="key", text_field="body", label_field="gold"))
    assert load_experiment_corpus(exp).items == tuple(ITEMS)


# ---------------------------------------------------------------------------------------------
# Canonical revision (R1.1)


def test_revision_worked_example(tmp_path):
    # sha256 of the version tag + one compact JSON array per item, computed here by hand.
    path = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": "x y", "label": "text"}])
    by_hand = hashlib.sha256(b'gpubench-nb corpus v1\n["a","x y","text"]\n').hexdigest()
    assert load_corpus(path).revision == by_hand


def test_revision_is_the_same_across_formats_bom_crlf_and_field_names(tmp_path):
    reordered = [{"label": i.label, "text": i.text, "id": i.id} for i in ITEMS]
    renamed = [{"k": i.id, "body": i.text, "gold": i.label, "extra": 1} for i in ITEMS]
    csv_rows = [[i.id, i.text, i.label] for i in ITEMS]
    loaded = [
        load_corpus(write_jsonl(tmp_path / "a.jsonl", records())),
        load_corpus(write_jsonl(tmp_path / "b.jsonl", reordered, bom=True, newline="\r\n")),
        load_corpus(
            write_jsonl(tmp_path / "c.jsonl", renamed),
            id_field="k",
            text_field="body",
            label_field="gold",
        ),
        load_corpus(write_csv(tmp_path / "d.csv", ["id", "text", "label"], csv_rows), fmt="csv"),
        load_corpus(
            write_csv(tmp_path / "e.csv", ["id", "text", "label"], csv_rows, bom=True, crlf=False),
            fmt="csv",
        ),
    ]
    assert {c.revision for c in loaded} == {make_corpus(Path("x"), ITEMS).revision}
    assert all(c.items == tuple(ITEMS) for c in loaded)


def test_revision_changes_with_order_text_or_label(tmp_path):
    base = make_corpus(Path("x"), ITEMS).revision
    swapped = make_corpus(Path("x"), [ITEMS[1], ITEMS[0], ITEMS[2]]).revision
    retext = make_corpus(Path("x"), [*ITEMS[:2], CorpusItem("deb:0ad", "Real-time", "games")])
    relabel = make_corpus(Path("x"), [*ITEMS[:2], CorpusItem("deb:0ad", ITEMS[2].text, "web")])
    assert len({base, swapped, retext.revision, relabel.revision}) == 4


ids = st.text(
    # Canonical IDs (protocol/ids.py): no control, separator or invisible format character.
    st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc", "Cf")),
    min_size=1,
    max_size=12,
)
texts = st.text(min_size=1, max_size=40).filter(lambda t: t.strip())
item_lists = st.lists(
    st.tuples(ids, texts, st.sampled_from(CLASSES)),
    min_size=1,
    max_size=8,
    unique_by=lambda t: unicodedata.normalize("NFC", t[0]),  # NFC-equal IDs are one ID
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item_lists)
def test_property_jsonl_and_csv_give_the_same_items_and_revision(tmp_path_factory, generated):
    folder = tmp_path_factory.mktemp("rev")
    recs = [{"id": i, "text": t, "label": lab} for i, t, lab in generated]
    from_jsonl = load_corpus(write_jsonl(folder / "c.jsonl", recs, newline="\r\n"))
    rows = [[i, t, lab] for i, t, lab in generated]
    from_csv = load_corpus(write_csv(folder / "c.csv", ["id", "text", "label"], rows), fmt="csv")
    assert from_jsonl.items == from_csv.items
    assert from_jsonl.revision == from_csv.revision
    assert [i.id for i in from_jsonl.items] == [g[0] for g in generated]


# ---------------------------------------------------------------------------------------------
# Refusals, each with its line number


def refusal(path: Path, **kwargs) -> str:
    with pytest.raises(CorpusError) as caught:
        load_corpus(path, classes=CLASSES, **kwargs)
    return str(caught.value)


def test_duplicate_id_names_both_lines(tmp_path):
    recs = records() + [{"id": "deb:zsh", "text": "another", "label": "admin"}]
    message = refusal(write_jsonl(tmp_path / "c.jsonl", recs))
    assert message.startswith("R1.1: corpus ")
    assert "line 4 [R1.2]: duplicate ID 'deb:zsh' (first on line 2)" in message


@pytest.mark.parametrize("bad_id", ["", " deb:x", "deb:x\t", "a\nb"])
def test_empty_or_padded_id_is_refused(tmp_path, bad_id):
    recs = [*records(), {"id": bad_id, "text": "t", "label": "web"}]
    message = refusal(write_jsonl(tmp_path / "c.jsonl", recs))
    assert f"line 4 [R1.2]: ID {bad_id!r} " in message
    assert "IDs are canonical text: non-empty, no surrounding whitespace" in message


def test_non_string_id_missing_text_and_bad_label_are_all_listed(tmp_path):
    recs = [
        {"id": 7, "text": "t", "label": "web"},
        {"id": "a", "label": "web"},
        {"id": "b", "text": "   ", "label": "web"},
        {"id": "c", "text": "t", "label": "cooking"},
        {"id": "d", "text": "t"},
    ]
    message = refusal(write_jsonl(tmp_path / "c.jsonl", recs))
    assert "5 problem(s)" in message
    assert "line 1 [R1.2]: field 'id' is a int, not a string" in message
    assert "line 2: text field 'text' is missing" in message
    assert "line 3: text field 'text' is '   '" in message
    assert "line 4 [R1.3]: label 'cooking' is not one of the declared classes" in message
    assert "line 5 [R1.3]: label field 'label' is missing" in message


def test_non_utf8_bytes_are_refused_with_their_lines(tmp_path):
    good = json.dumps({"id": "a", "text": "t", "label": "web"}).encode()
    bad = b'{"id": "b", "text": "caf\xe9", "label": "web"}'
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"\n".join([good, bad, good.replace(b'"a"', b'"c"'), bad]) + b"\n")
    message = refusal(path)
    assert "line 2 [R1.1]: bytes that are not UTF-8" in message
    assert "; the same in 2 lines (lines 2, 4)" in message  # one failure, said once (issue 25)
    assert "line 3" not in message


def test_bad_json_blank_line_and_non_object_are_refused(tmp_path):
    path = tmp_path / "c.jsonl"
    good = json.dumps({"id": "a", "text": "t", "label": "web"})
    path.write_text(f'{good}\n{{"id": "b",\n\n[1, 2]\n', encoding="utf-8")
    message = refusal(path)
    assert "line 2: not valid JSON" in message
    assert "line 3: blank line" in message
    assert "line 4: a JSON list, not an object" in message


def test_csv_problems_carry_physical_line_numbers(tmp_path):
    # Record 1 spans lines 2-3 (a quoted newline), so the short record starts on line 4.
    path = tmp_path / "c.csv"
    path.write_text('id,text,label\na,"two\nlines",web\nb,short\nc,t,web\n', encoding="utf-8")
    message = refusal(path, fmt="csv")
    assert "line 4: 2 fields where the header has 3" in message
    missing_column = write_csv(tmp_path / "d.csv", ["id", "body", "label"], [["a", "t", "web"]])
    assert "header lacks the declared field(s) ['text']" in refusal(missing_column, fmt="csv")


def test_the_same_failure_on_many_lines_is_said_once_with_its_count(tmp_path):
    # Issue 25: 25 rows with the same undeclared label were 20 sentences and "5 more".
    recs = [{"id": f"x{i}", "text": "t", "label": "cooking"} for i in range(25)]
    message = refusal(write_jsonl(tmp_path / "c.jsonl", recs))
    assert "25 problem(s)" in message
    assert message.count("is not one of the declared classes") == 1
    assert "line 1 [R1.3]: label 'cooking'" in message
    assert "; the same in 25 lines (lines 1-25)" in message


def test_many_kinds_of_problems_are_counted_and_the_listing_capped(tmp_path):
    recs = [{"id": f"x{i}", "text": "t", "label": f"other{i}"} for i in range(25)]
    message = refusal(write_jsonl(tmp_path / "c.jsonl", recs))
    assert "25 problem(s)" in message
    assert "line 20 [R1.3]" in message and "line 21 [R1.3]" not in message
    assert "and 5 more kind(s)" in message


def test_a_csv_file_read_as_jsonl_says_corpus_format_first(tmp_path):
    # Issue 25: 1,000 "not valid JSON" sentences for a CSV file declared as JSONL.
    rows = [["a", "t", "web"], ["b", "u", "admin"], ["c", "v", "web"]]
    path = write_csv(tmp_path / "c.txt", ["id", "text", "label"], rows)
    message = refusal(path)
    assert "refused, 4 problem(s): the file looks like CSV, not JSONL" in message
    assert "write corpus.format: csv" in message
    assert message.count("not valid JSON") == 1 and "; the same in 4 lines (lines 1-4)" in message


def test_an_unreadable_tune_file_names_its_key(tmp_path):
    # Issue 25: "cannot read corpus ... fix corpus.path" for a missing tune file.
    exp = Exp(Spec(path=tmp_path / "eval.jsonl", tune=tmp_path / "absent-tune.jsonl"))
    with pytest.raises(CorpusError) as caught:
        load_experiment_corpus(exp, "tune")
    message = str(caught.value)
    assert message.startswith("R1.1: corpus.tune: cannot read the corpus file ")
    assert "fix corpus.tune in the experiment YAML" in message and "corpus.path" not in message


def test_empty_corpus_unknown_format_and_missing_file(tmp_path):
    empty = tmp_path / "e.jsonl"
    empty.write_bytes(b"")
    assert "holds no item" in refusal(empty)
    assert "format 'xml' is not supported" in refusal(empty, fmt="xml")
    assert "corpus.path: cannot read the corpus file" in refusal(tmp_path / "absent.jsonl")


def test_crlf_inside_a_text_becomes_lf_and_nothing_else_changes(tmp_path):
    path = tmp_path / "c.jsonl"
    write_jsonl(path, [{"id": "a", "text": "  one\r\ntwo  ", "label": "web"}])
    assert load_corpus(path).texts == ("  one\ntwo  ",)  # no strip, no truncation (R2.3)


def test_corpus_object_refuses_duplicate_ids():
    with pytest.raises(CorpusError, match=r"R1\.2: .*1 ID\(s\) more than once \(first: 'a'\)"):
        Corpus(Path("x"), (CorpusItem("a", "t", "web"), CorpusItem("a", "u", "web")), "0")


# ---------------------------------------------------------------------------------------------
# R1.4


def test_shared_ids_and_normalised_texts_are_refused_with_counts_and_examples():
    evaluation = make_corpus(Path("eval.jsonl"), ITEMS)
    train = make_corpus(
        Path("train.jsonl"),
        [
            CorpusItem("deb:vim", "different text", "text"),  # shared ID
            CorpusItem("deb:other", "  REAL-TIME   strategy\tgame ", "games"),  # same text
        ],
    )
    tune = make_corpus(Path("tune.jsonl"), [CorpusItem("t1", "unrelated", "web")])
    with pytest.raises(CorpusError) as caught:
        check_disjoint(evaluation, {"train": train, "tune": tune})
    message = str(caught.value)
    assert message.startswith("R1.4: ")
    assert "1 ID(s) in both eval (eval.jsonl) and train (train.jsonl), e.g. ['deb:vim']" in message
    assert "1 text(s) identical" in message and "eval:deb:0ad = train:deb:other" in message
    assert "tune" not in message.split("; remove")[0]


def test_train_and_tune_overlap_is_refused_too():
    evaluation = make_corpus(Path("e"), [CorpusItem("e1", "eval text", "web")])
    train = make_corpus(Path("t"), [CorpusItem("x", "Same Text", "web")])
    tune = make_corpus(Path("u"), [CorpusItem("y", "same  text", "web")])
    with pytest.raises(CorpusError, match=r"1 text\(s\) identical .* in both train and tune"):
        check_disjoint(evaluation, {"train": train, "tune": tune})


def test_normalise_text_casefolds_and_collapses_whitespace():
    assert normalise_text("  Straße\t\nGAME ") == "strasse game"


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_without_texts_the_revision_ids_and_labels_are_the_same(tmp_path, fmt):
    # Issue 25: acceptance reads IDs and labels only; the texts are checked and fingerprinted
    # while streaming, not kept (a 535 MB corpus held 3.3 GB).
    if fmt == "jsonl":
        path = write_jsonl(tmp_path / "c.jsonl", records(), newline="\r\n")
    else:
        rows = [[i.id, i.text, i.label] for i in ITEMS]
        path = write_csv(tmp_path / "c.csv", ["id", "text", "label"], rows)
    full = load_corpus(path, fmt=fmt, classes=CLASSES)
    light = load_corpus(path, fmt=fmt, classes=CLASSES, texts=False)
    assert light.revision == full.revision == make_corpus(path, ITEMS).revision
    assert (light.ids, light.labels) == (full.ids, full.labels)
    with pytest.raises(CorpusError, match="loaded without its texts"):
        _ = light.texts
    assert full.texts == tuple(i.text for i in ITEMS)


def test_a_lone_surrogate_escape_is_still_refused_while_streaming(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(
        '{"id": "a", "text": "ok", "label": "web"}\n{"id": "b", "text": "x\\ud800", '
        '"label": "web"}\n',
        encoding="utf-8",
    )
    assert "line 2 [R1.1]: text is not valid Unicode (lone surrogate)" in refusal(path)

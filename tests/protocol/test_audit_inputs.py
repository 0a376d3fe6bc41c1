"""check-bundle on unusual and broken bundles (issue 11 §6): it reports, it never crashes.

A corpus with unusual but valid IDs must round-trip through expected_ids.txt; a lock file that
is not a JSON object, a manifest line that does not parse, a checks.json that is not an object
are findings (exit 1), never a traceback.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
import yaml

from gpubench_nb.cli import main
from gpubench_nb.protocol import bundle as layout
from gpubench_nb.protocol.audit import check_bundle
from gpubench_nb.protocol.corpus import load_experiment_corpus, write_expected_ids
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.lock import LOCK_NAME, freeze
from gpubench_nb.protocol.quality import fill_quality
from gpubench_nb.protocol.results import write_rows_atomic
from gpubench_nb.protocol.results_schema import empty_row
from tests.support.experiments import declaration

CLASSES = ("a", "b")
# Unusual but valid: non-ASCII, commas, quotes, '#', spaces inside, a backslash, an emoji.
UNUSUAL_IDS = [
    unicodedata.normalize("NFC", "café"),
    "a,b",
    'say "hi"',
    "#1",
    "it's",
    "x y",
    "back\\slash",
    "日本-7",
    "🙂",
]


def _row(corpus_revision: str) -> dict:
    row = empty_row()
    row.update(
        experiment_id="ids",
        variant_id="b1",
        corpus_revision=corpus_revision,
        model_revision="ab" * 32,
        tokenizer_revision="cd" * 32,
        seed=7,
        gpu_count=0,
        device="cpu",
        python_version="3.11.7",
        torch_version="2.13.0",
        precision="fp32",
        batch=1,
        context=64,
        phase="warm",
        run_index=1,
        warmup_iterations=1,
        elapsed_seconds=0.5,
        notes="scope processing",
    )
    return row


def build_bundle(tmp_path: Path, ids: list[str]) -> Path:
    """A sealed bundle made by the library's own writers, without kernels (one warm run)."""
    items = [{"id": i, "text": f"text {n}", "label": CLASSES[n % 2]} for n, i in enumerate(ids)]
    corpus_path = tmp_path / "eval.jsonl"
    corpus_path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in items), encoding="utf-8"
    )
    data = declaration(
        experiment_id="ids",
        corpus={"train": None},
        classes=list(CLASSES),
        quality={"metric": "accuracy", "tolerance": 0.1},
        variants=[{"id": "b1", "batch": 1}],
    )
    source = tmp_path / "exp.yaml"
    source.write_text(yaml.safe_dump(data), encoding="utf-8")
    exp = load_experiment(source)
    corpus = load_experiment_corpus(exp)
    bundle = tmp_path / "outputs" / "ids"
    bundle.mkdir(parents=True)
    fingerprints = {"corpus_revision": corpus.revision}
    fingerprints.update(model_revision="ab" * 32, tokenizer_revision="cd" * 32)
    freeze(bundle, exp, fingerprints)
    (bundle / "protocol").mkdir()
    (bundle / "protocol" / "corpus.jsonl").write_bytes(corpus_path.read_bytes())
    write_expected_ids(corpus, bundle / layout.EXPECTED_IDS_NAME)
    run = layout.run_dir(bundle, "b1", "warm", 1)
    run.mkdir(parents=True)
    gold = [{"id": item.id, "label": item.label} for item in reversed(corpus.items)]
    (run / "predictions.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in gold), encoding="utf-8"
    )
    record = {"precision": "fp32", "batch": 1, "context": 64, "elapsed_seconds": 0.5}
    (run / "run.json").write_text(json.dumps(record), encoding="utf-8")  # what the run applied
    write_rows_atomic(bundle / layout.CSV_NAME, [_row(corpus.revision)])
    fill_quality(bundle, corpus, exp.classes, exp.quality)
    layout.write_manifest(bundle)
    return bundle


def test_check_bundle_round_trips_unusual_but_valid_ids(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path, UNUSUAL_IDS)
    assert check_bundle(bundle) == []
    kept = (bundle / layout.EXPECTED_IDS_NAME).read_text(encoding="utf-8")
    assert kept.split("\n")[:-1] == UNUSUAL_IDS
    checks = json.loads((layout.run_dir(bundle, "b1", "warm", 1) / "checks.json").read_text())
    assert checks["ids_match"] is True and checks["corpus_accepted"] is True


def _reseal(bundle: Path) -> None:
    layout.write_manifest(bundle)  # as a forger would: the manifest then matches the edit


@pytest.mark.parametrize("content", ["[]", '"lock"', "42", "null", '{"declaration": []}'])
def test_a_lock_that_is_not_a_json_object_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture, content: str
) -> None:
    bundle = build_bundle(tmp_path, ["x", "y"])
    (bundle / LOCK_NAME).write_text(content, encoding="utf-8")
    _reseal(bundle)
    problems = check_bundle(bundle)
    assert len(problems) == 1 and problems[0].startswith(f"{LOCK_NAME}:")
    assert main(["check-bundle", str(bundle)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and LOCK_NAME in err


def test_a_lock_with_a_garbled_quality_is_reported(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path, ["x", "y"])
    lock = json.loads((bundle / LOCK_NAME).read_text(encoding="utf-8"))
    lock["declaration"]["quality"]["bogus"] = 1
    (bundle / LOCK_NAME).write_text(json.dumps(lock), encoding="utf-8")
    _reseal(bundle)
    assert any("declaration.quality" in p for p in check_bundle(bundle))


@pytest.mark.parametrize("line", ["not a manifest line", "abc  file", "\u2028", "x" * 64])
def test_a_manifest_line_that_does_not_parse_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture, line: str
) -> None:
    bundle = build_bundle(tmp_path, ["x", "y"])
    manifest = bundle / layout.MANIFEST_NAME
    manifest.write_text(manifest.read_text(encoding="utf-8") + line + "\n", encoding="utf-8")
    assert any("malformed manifest line" in p for p in check_bundle(bundle))
    assert main(["check-bundle", str(bundle)]) == 1
    assert "Traceback" not in capsys.readouterr().err


def test_a_manifest_that_is_not_utf8_is_reported(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path, ["x", "y"])
    (bundle / layout.MANIFEST_NAME).write_bytes(b"\xff\xfe garbage\n")
    assert check_bundle(bundle)[0].startswith("manifest:")


def test_a_checks_file_that_is_not_an_object_is_reported(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path, ["x", "y"])
    (layout.run_dir(bundle, "b1", "warm", 1) / "checks.json").write_text("[1]", encoding="utf-8")
    _reseal(bundle)
    (problem,) = check_bundle(bundle)
    assert problem.startswith("b1/warm-1: R1.6: ")
    assert problem.endswith(
        "checks.json: expected a JSON object, got list; fix: restore it from the "
        "bundle it came from (its MANIFEST.sha256 names the original), it is "
        "written by gpubench-nb only"
    )

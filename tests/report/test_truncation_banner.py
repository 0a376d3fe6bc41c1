"""Issue 22 §6: a report that merges one model and corpus at different contexts, one of them
truncating, says so in a banner (R2.3): a cut text is different work."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from gpubench_nb.report import render as report
from tests.support.golden import write_bundle


def _at_context(bundle: Path, context: int, truncated: int) -> Path:
    path = bundle / "resultats-bruts.csv"
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row["context"] = str(context)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    for record in bundle.glob("runs/*/*/run.json"):
        data = json.loads(record.read_text(encoding="utf-8"))
        data.update(truncated_texts=truncated, dropped_tokens=7 * truncated)
        record.write_text(json.dumps(data), encoding="utf-8")
    return bundle


def test_different_contexts_with_truncation_get_a_banner(tmp_path: Path) -> None:
    short = _at_context(write_bundle(tmp_path, "short", gpu=True), 64, 3)
    long = _at_context(write_bundle(tmp_path, "long", gpu=True), 512, 0)
    title = report.title_markdown(report.load_bundles([short, long], allow_mismatch=True))
    assert "Different contexts, some truncating (R2.3)" in title
    assert "context 64: up to 3 texts cut per pass" in title and "context 512: no text cut" in title


def test_no_banner_without_truncation_or_with_one_context(tmp_path: Path) -> None:
    a = _at_context(write_bundle(tmp_path, "a", gpu=True), 64, 0)
    b = _at_context(write_bundle(tmp_path, "b", gpu=True), 512, 0)
    c = _at_context(write_bundle(tmp_path, "c", gpu=True), 64, 3)
    for pair in ([a, b], [a, c]):
        title = report.title_markdown(report.load_bundles(pair, allow_mismatch=True))
        assert "Different contexts" not in title

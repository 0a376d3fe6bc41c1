"""check-bundle: re-derive every check of a finished bundle from its kept files (R1.6, R5.6)."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from gpubench_nb.errors import BundleError
from gpubench_nb.protocol import bundle as layout
from gpubench_nb.protocol.corpus import load_corpus
from gpubench_nb.protocol.experiment_spec import QualitySpec
from gpubench_nb.protocol.lock import canonical_sha256, read_lock
from gpubench_nb.protocol.quality import (
    CHECKS_NAME,
    accepted,
    assess_runs,
    kept_reference_value,
)
from gpubench_nb.protocol.results import read_rows, validate_csv

COMPARED_CHECKS = (
    "expected_count",
    "observed_count",
    "ids_match",
    "format_valid",
    "quality_value",
    "corpus_accepted",
)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return a == b


def check_bundle(bundle_dir: str | Path) -> list[str]:
    """Every mismatch found; an empty list means the bundle re-checks cleanly."""
    root = Path(bundle_dir)
    if not root.is_dir():
        raise BundleError(f"{root}: not a bundle folder; give outputs/<experiment_id>")
    problems = [f"manifest: {p}" for p in layout.verify_manifest(root)]
    lock = read_lock(root)
    frozen = {"declaration": lock.get("declaration"), "fingerprints": lock.get("fingerprints")}
    if canonical_sha256(frozen) != lock.get("sha256"):
        problems.append("protocol.lock.json: its sha256 does not match its content (R1.3)")
    csv_path = root / layout.CSV_NAME
    problems += [f"{layout.CSV_NAME}: {p}" for p in validate_csv(csv_path)]
    if problems:
        return problems  # re-deriving from altered inputs would only repeat the same finding
    declaration = lock["declaration"]
    corpus_decl = declaration["corpus"]
    kept = next((root / "protocol").glob("corpus.*"), None)
    if kept is None:
        return ["protocol/: the kept copy of the corpus is missing (R5.6)"]
    corpus = load_corpus(
        kept,
        fmt=corpus_decl["format"],
        id_field=corpus_decl["id_field"],
        text_field=corpus_decl["text_field"],
        label_field=corpus_decl["label_field"],
        classes=declaration["classes"],
    )
    if corpus.revision != lock["fingerprints"]["corpus_revision"]:
        problems.append("protocol/corpus: revision differs from the frozen corpus_revision (R1.1)")
    expected = (root / layout.EXPECTED_IDS_NAME).read_text(encoding="utf-8").splitlines()
    if expected != list(corpus.ids):
        problems.append(f"{layout.EXPECTED_IDS_NAME}: differs from the corpus IDs (R1.2)")
    rows = read_rows(csv_path)
    keys = Counter((r["variant_id"], r["phase"], r["run_index"]) for r in rows)
    problems += [
        f"{layout.CSV_NAME}: run {k} has {n} rows (R4.1: one row per run)"
        for k, n in keys.items()
        if n > 1
    ]
    quality = QualitySpec(**declaration["quality"])
    reference = kept_reference_value(root)  # a classify bundle of a non-reference variant
    outcome = assess_runs(root, rows, corpus, declaration["classes"], quality, reference)
    for row in rows:
        if row["phase"] not in ("cold", "warm"):
            continue
        key = f"{row['variant_id']}/{row['phase']}-{row['run_index']}"
        report = outcome.reports.get(key)
        problems += _compare_run(root, key, row, report, outcome.reference_value)
    return problems


def _compare_run(
    root: Path, key: str, row: dict[str, Any], report: Any, reference_value: float | None
) -> list[str]:
    if report is None:
        if row["corpus_accepted"]:
            return [f"{key}: accepted in the CSV but its predictions are missing (R1.5)"]
        return []
    found = []
    checks_path = root / "runs" / key / CHECKS_NAME
    try:
        kept = json.loads(checks_path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError) as exc:
        return [f"{key}: {CHECKS_NAME} unreadable or missing ({exc.__class__.__name__}) (R1.6)"]
    derived = report.to_dict()
    for name in COMPARED_CHECKS:
        if not _same(kept.get(name), derived.get(name)):
            found.append(
                f"{key}: {CHECKS_NAME} says {name}={kept.get(name)!r}, "
                f"re-derived {derived.get(name)!r}"
            )
    csv_view = {
        "observed_ids": report.observed_count,
        "ids_match": report.ids_match,
        "format_valid": report.format_valid,
        "quality_value": report.quality_value,
        "corpus_accepted": accepted(report, reference_value),
    }
    for column, value in csv_view.items():
        if not _same(row[column], value):
            found.append(f"{key}: CSV {column}={row[column]!r}, re-derived {value!r}")
    return found

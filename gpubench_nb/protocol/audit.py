"""check-bundle: re-derive every check of a finished bundle from its kept files (R1.6, R5.6)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import fields
from pathlib import Path
from typing import Any

from gpubench_nb.errors import BundleError, CorpusError, ProtocolError
from gpubench_nb.protocol import bundle as layout
from gpubench_nb.protocol.acceptance import AcceptanceReport
from gpubench_nb.protocol.corpus import Corpus, load_corpus
from gpubench_nb.protocol.experiment_spec import QualitySpec
from gpubench_nb.protocol.lock import LOCK_NAME, LockRecord, lock_problems, read_lock
from gpubench_nb.protocol.problems import Problems, failure_kind
from gpubench_nb.protocol.quality import (
    CHECKS_NAME,
    REPORTED_COLUMNS,
    QualityOutcome,
    acceptance_columns,
    assess_runs,
    kept_reference_value,
    run_key,
)
from gpubench_nb.protocol.records import (
    MEASURED_PHASES,
    EconomicsRecord,
    EnvironmentRecord,
    Phase,
    ReferenceRecord,
    RunRecord,
    ScheduleRecord,
    read_run,
)
from gpubench_nb.protocol.results import read_rows, validate_csv


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return a == b


def check_bundle(bundle_dir: str | Path) -> list[str]:
    """Every mismatch found; an empty list means the bundle re-checks cleanly."""
    root = Path(bundle_dir)
    problems = seal_problems(root)
    if problems:
        return problems  # re-deriving from altered inputs would only repeat the same finding
    lock = read_lock(root)
    csv_path = root / layout.CSV_NAME
    declaration = dict(lock.declaration or {})  # seal_problems checked its parts
    try:
        corpus = kept_corpus(root, declaration, texts=False)  # acceptance: IDs and labels
    except CorpusError as exc:
        return [str(exc)]
    if corpus.revision != lock.corpus_revision:
        problems.append("protocol/corpus: revision differs from the frozen corpus_revision (R1.1)")
    if lock.corpus_identity is not None:  # the identity needs the texts: read them for it alone
        with_texts = kept_corpus(root, declaration)
        if with_texts.identity != lock.corpus_identity:
            problems.append(
                "protocol/corpus: identity differs from the frozen corpus_identity (R5.3)"
            )
    expected = layout.split_lines((root / layout.EXPECTED_IDS_NAME).read_text(encoding="utf-8"))
    if expected != list(corpus.ids):
        problems.append(f"{layout.EXPECTED_IDS_NAME}: differs from the corpus IDs (R1.2)")
    problems += record_problems(root)
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
    found: list[tuple[str, str]] = []  # (run, problem naming it)
    for row in rows:
        key = run_key(row)
        if row["phase"] in MEASURED_PHASES:
            found += [(key, p) for p in _compare_run(root, key, row, outcome)]
        found += [(key, p) for p in compare_with_record(root, row)]
    return problems + grouped("run", found)


def record_problems(root: Path) -> list[str]:
    """Every sealed typed record read by its one reader (its form, its format version, no key
    given twice), a bad one a finding, never a traceback (R2.4, R3.6, R3.7, R5.6; a scheduled
    `run` bundle keeps environment.json and economics.json)."""
    found: list[str] = []
    scheduled = (root / layout.SCHEDULE_NAME).is_file()  # a `run` bundle writes all three
    readers: list[tuple[Path, Any, bool]] = [(root / layout.SCHEDULE_NAME, ScheduleRecord, False)]
    readers += [(root / layout.ENVIRONMENT_NAME, EnvironmentRecord, scheduled)]
    readers += [(root / layout.ECONOMICS_NAME, EconomicsRecord, scheduled)]
    readers += [(root / layout.REFERENCE_NAME, ReferenceRecord, False)]
    readers += [(path, RunRecord, False) for path in sorted(root.glob("runs/*/*/run.json"))]
    for path, record, needed in readers:
        if not path.is_file():
            found += [f"{path.name}: missing; a finished bundle keeps it (R5.6)"] * needed
            continue
        try:
            record.load(path)
        except BundleError as exc:
            found.append(str(exc))
    return found


def grouped(unit: str, found: list[tuple[str, str]]) -> list[str]:
    """``(place, problem naming it)`` pairs, the same failure in many places (every run of a
    bundle, every file of a folder) said once with its count and places."""
    problems = Problems(unit)
    for place, message in found:
        problems.add(failure_kind(message.replace(place, "")), place, message)
    return problems.lines()


def seal_problems(bundle_dir: str | Path) -> list[str]:
    """check-bundle's first stage, before the ledger counts a bundle (R5.3, R5.6): manifest, lock
    checksums, CSV schema; BundleError without a manifest."""
    root = Path(bundle_dir)
    if not root.is_dir():
        raise BundleError(f"{root}: not a bundle folder; give outputs/<experiment_id>")
    problems = _manifest_problems(root)
    lock, lock_problem = _lock_object(root)
    if lock is None:
        return [
            *problems,
            str(lock_problem),
        ]  # nothing can be re-derived without the frozen protocol
    problems += lock_problems(lock)  # both checksums, one rule (R1.3)
    problems += [f"{layout.CSV_NAME}: {p}" for p in validate_csv(root / layout.CSV_NAME)]
    return problems


def compare_with_record(root: Path, row: dict[str, Any]) -> list[str]:
    """A row must say what its run recorded in run.json: the settings applied and the times
    measured (R1.3, R3.6), so a hand-edited CSV cell is caught even under a rewritten manifest."""
    phase = Phase.COLD if row["phase"] == Phase.LOAD else row["phase"]
    where = f"{layout.CSV_NAME}: {row['phase']} row of {run_key({**row, 'phase': phase})}"
    try:
        record = read_run(layout.run_dir(root, str(row["variant_id"]), phase, row["run_index"]))
    except BundleError:
        record = None
    if record is None:
        timed = row["elapsed_seconds"] is not None
        return [f"{where}: a time without a readable run.json to support it (R3.6)"] * timed
    found = [
        f"{where}: {name}={row[name]!r} but the run applied {getattr(record, name)!r} (R1.3)"
        for name in ("precision", "batch", "context")
        if row[name] is not None and row[name] != getattr(record, name)
    ]
    measured = record.load_seconds if row["phase"] == Phase.LOAD else record.elapsed_seconds
    elapsed = row["elapsed_seconds"]
    if elapsed is not None and (measured is None or not _same(float(elapsed), float(measured))):
        found.append(
            f"{where}: elapsed_seconds={elapsed!r} but run.json recorded {measured!r} (R3.6)"
        )
    return found


def kept_corpus(root: Path, declaration: dict[str, Any], *, texts: bool = True) -> Corpus:
    """The bundle's kept corpus, read as its lock declares (``texts=False``: IDs and labels only);
    CorpusError naming the file when missing or unreadable (R5.6)."""
    declared = declaration["corpus"]
    kept = next((Path(root) / "protocol").glob("corpus.*"), None)
    if kept is None:
        raise CorpusError("protocol/: the kept copy of the corpus is missing (R5.6)")
    named = {name: declared[name] for name in ("id_field", "text_field", "label_field")}
    try:
        return load_corpus(
            kept, fmt=declared["format"], classes=declaration["classes"], texts=texts, **named
        )
    except CorpusError as exc:
        raise CorpusError(f"protocol/{kept.name}: the kept corpus cannot be read: {exc}") from None


def _manifest_problems(root: Path) -> list[str]:
    """The manifest's findings, a line that does not parse among them (exit 1); a missing
    manifest is an error (exit 2): the folder is not a finished bundle."""
    if not (root / layout.MANIFEST_NAME).is_file():
        layout.verify_manifest(root)  # raises, names the fix
    try:
        found = layout.verify_manifest(root)
    except (BundleError, UnicodeDecodeError) as exc:
        return [f"manifest: {exc}"]
    # each problem starts with the file's name: a failure on many files is said once
    return [f"manifest: {p}" for p in grouped("file", [(p.split(": ")[0], p) for p in found])]


_LOCK_PARTS = {  # what the audit reads of the lock; quality is rebuilt as a QualitySpec
    "declaration": {"corpus", "classes", "quality"},
    "declaration.corpus": {"format", "id_field", "text_field", "label_field"},
    "declaration.quality": {f.name for f in fields(QualitySpec)},
    "fingerprints": {"corpus_revision"},
}


def _lock_object(root: Path) -> tuple[LockRecord | None, str | None]:
    """The lock with the parts the audit reads, or the reason it is not one."""
    try:
        lock = read_lock(root)  # unreadable, not JSON, not an object, bad version: refused
    except ProtocolError as exc:
        return None, f"{LOCK_NAME}: {exc}"
    for name, keys in _LOCK_PARTS.items():
        part: Any = lock.to_dict()
        for step in name.split("."):
            part = part.get(step) if isinstance(part, dict) else None
        exact = name == "declaration.quality"  # every field of QualitySpec, and no other
        if not isinstance(part, dict) or not keys <= set(part) or (exact and set(part) != keys):
            return (
                None,
                f"{LOCK_NAME}: {name} is missing or not an object with {sorted(keys)} (R1.3)",
            )
    return lock, None


def _compare_run(root: Path, key: str, row: dict[str, Any], outcome: QualityOutcome) -> list[str]:
    """The kept checks.json and the CSV's acceptance columns against the re-derived report."""
    report = outcome.reports.get(key)
    if report is None:
        if row["corpus_accepted"]:
            return [f"{key}: accepted in the CSV but its predictions are missing (R1.5)"]
        return []
    found = []
    checks_path = layout.run_dir(root, row["variant_id"], row["phase"], row["run_index"])
    try:  # not JSON, a key twice, not an object, an unknown version, a field's form: refused
        kept = AcceptanceReport.read(checks_path)
    except BundleError as exc:
        return [f"{key}: {exc}"]
    if kept is None:
        return [f"{key}: {CHECKS_NAME} is missing (R1.6)"]
    for name in REPORTED_COLUMNS.values():
        if not _same(getattr(kept, name), getattr(report, name)):
            found.append(
                f"{key}: {CHECKS_NAME} says {name}={getattr(kept, name)!r}, "
                f"re-derived {getattr(report, name)!r}"
            )
    for column, value in acceptance_columns(report, outcome.reference_value).items():
        if not _same(row[column], value):
            found.append(f"{key}: CSV {column}={row[column]!r}, re-derived {value!r}")
    return found

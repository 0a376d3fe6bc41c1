"""`gpubench-nb classify`: one accepted-or-not pass of a declared variant, as a small sealed
bundle (no warm-up, no repeats) that the rental ledger counts (R1.5, R5.3, R5.6)."""

from __future__ import annotations

import shutil
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench_nb.economics.reprice import verify_bundle
from gpubench_nb.engine.environment import record_environment
from gpubench_nb.engine.faults import check_fault_spec
from gpubench_nb.errors import ProtocolError
from gpubench_nb.pipeline.observations import rows_for_run
from gpubench_nb.pipeline.orchestrate import prepare_bundle
from gpubench_nb.pipeline.run import execute_run
from gpubench_nb.pipeline.schedule import ScheduledRun
from gpubench_nb.protocol import bundle as layout
from gpubench_nb.protocol.acceptance import AcceptanceReport
from gpubench_nb.protocol.clock import utc_stamp
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.lock import LockRecord, read_lock
from gpubench_nb.protocol.outputs import check_output_folder
from gpubench_nb.protocol.quality import fill_quality
from gpubench_nb.protocol.records import MEASURED_PHASES, Phase, ReferenceRecord
from gpubench_nb.protocol.results import append_rows, read_rows

CLASSIFY_NOTE = (
    "classify: one accepted-or-not pass of a declared variant, not a timing study (no warm-up, "
    "no repeats); it counts in the rental ledger as one corpus (R5.3)"
)


@dataclass(frozen=True)
class ClassifyResult:
    bundle_dir: Path
    row: dict[str, Any]
    accepted: bool


def reference_from(benchmark: Path, lock: LockRecord | None = None) -> float:
    """The reference variant's median quality in a verified (R5.6) benchmark bundle of the same
    frozen protocol (R1.3)."""
    benchmark = Path(benchmark)

    def refused(what: str, fix: str, rule: str = "R1.3") -> ProtocolError:
        return ProtocolError(f"--reference-bundle {benchmark}: {what}; fix: {fix}", rule=rule)

    if not benchmark.is_dir():
        fix = "pass the finished benchmark of this experiment (outputs/<experiment_id>)"
        raise refused("no such bundle folder", fix)
    if not (benchmark / layout.MANIFEST_NAME).is_file():
        what = f"not a finished bundle (no {layout.MANIFEST_NAME})"
        raise refused(what, "finish that benchmark first (gpubench-nb run)", "R5.6")
    if problems := verify_bundle(benchmark):
        listing = "\n  ".join(problems[:10])
        what = f"fails check-bundle, so its reference quality cannot be trusted:\n  {listing}"
        raise refused(what, "restore the bundle from a copy, or rerun the benchmark", "R5.6")
    theirs = read_lock(benchmark)
    lock = theirs if lock is None else lock
    if theirs.sha256 != lock.sha256:
        what = (
            f"its frozen protocol (sha256 {str(theirs.sha256)[:12]}) is not this "
            f"experiment's ({str(lock.sha256)[:12]})"
        )
        raise refused(what, "pass the benchmark bundle of this very experiment")
    reference = lock.declared("quality", "reference_variant")
    values = [
        r["quality_value"]
        for r in read_rows(benchmark / layout.CSV_NAME)
        if r["variant_id"] == reference
        and r["phase"] in MEASURED_PHASES
        and r.get("ids_match") is True
        and r.get("format_valid") is True
        and r.get("quality_value") is not None
    ]
    if not values:
        what = f"no valid run of the reference variant {reference!r}"
        raise refused(what, "finish that benchmark first (gpubench-nb run)")
    return statistics.median(values)


def _reserve_bundle_dir(output_dir: Path, experiment_id: str, variant_id: str) -> Path:
    """A new bundle folder no other ``classify`` holds (``mkdir`` fails on an existing name)."""
    base = Path(output_dir).resolve() / f"{experiment_id}-classify-{variant_id}-{utc_stamp()}"
    base.parent.mkdir(parents=True, exist_ok=True)
    path, number = base, 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            number += 1
            path = base.with_name(f"{base.name}-{number}")


def classify(
    experiment_path: str | Path,
    variant_id: str,
    *,
    output_dir: str | Path = "outputs",
    reference_bundle: str | Path | None = None,
) -> ClassifyResult:
    """Run ``variant_id`` once over the corpus and seal the outcome in a new bundle; a variant
    other than the reference needs ``reference_bundle`` (R1.3). A failure leaves no folder."""
    check_fault_spec()  # before any folder or kernel, as `run` and campaigns do
    exp = load_experiment(experiment_path)
    exp.variant(variant_id)  # an unknown variant fails before anything is written
    if variant_id != exp.quality.reference_variant and reference_bundle is None:
        raise ProtocolError(
            f"variant {variant_id!r} is accepted only within the tolerance below the reference "
            f"variant {exp.quality.reference_variant!r}'s quality; fix: pass --reference-bundle "
            f"with the finished benchmark of {exp.experiment_id}, or classify "
            f"--variant {exp.quality.reference_variant}",
            rule="R1.3",
        )
    check_output_folder(Path(output_dir), option="--output-dir", inputs=[exp.source])
    if reference_bundle is not None:  # verified (check-bundle) before any folder is made
        reference_from(Path(reference_bundle))
    bundle_dir = _reserve_bundle_dir(Path(output_dir), exp.experiment_id, variant_id)
    try:
        return _classify_into(exp, variant_id, bundle_dir, reference_bundle)
    except BaseException:
        shutil.rmtree(bundle_dir, ignore_errors=True)  # never a half-made bundle
        raise


def _classify_into(
    exp: Any, variant_id: str, bundle_dir: Path, reference_bundle: str | Path | None
) -> ClassifyResult:
    """The body of :func:`classify`, inside the folder it reserved."""
    corpus, fingerprints = prepare_bundle(exp, bundle_dir)
    if reference_bundle is not None:
        ReferenceRecord.write(
            bundle_dir,
            ReferenceRecord(
                reference_variant=exp.quality.reference_variant,
                reference_value=reference_from(Path(reference_bundle), read_lock(bundle_dir)),
                from_bundle=str(Path(reference_bundle).resolve()),
            ),
        )
    # the run first: its import clock and CUDA context come before the environment's (R3.2)
    record = execute_run(exp.source, variant_id, Phase.COLD, 1, bundle_dir)
    record_environment(exp.source, bundle_dir)
    run = ScheduledRun(position=1, variant_id=variant_id, phase=Phase.COLD, run_index=1)
    row = rows_for_run(exp, fingerprints, run, record)[-1]  # the pass; one row, no load row
    row["notes"] = f"{CLASSIFY_NOTE} | {row['notes']}" if row.get("notes") else CLASSIFY_NOTE
    csv_path = bundle_dir / layout.CSV_NAME
    append_rows(csv_path, [row])
    fill_quality(bundle_dir, corpus, exp.classes, exp.quality)  # reads reference.json
    layout.write_manifest(bundle_dir)
    final = read_rows(csv_path)[0]
    return ClassifyResult(bundle_dir, final, bool(final.get("corpus_accepted")))


def summary(result: ClassifyResult) -> str:
    """What the command prints: the verdict, the quality and where the bundle is."""
    row = result.row
    checks = AcceptanceReport.read(
        layout.run_dir(result.bundle_dir, row["variant_id"], Phase.COLD, 1)
    )
    verdict = "ACCEPTED" if result.accepted else "NOT accepted"
    quality = row.get("quality_value")
    lines = [
        f"{row['variant_id']}: corpus {verdict} (R1.5): ids_match={row.get('ids_match')}, "
        f"format_valid={row.get('format_valid')}, {row.get('quality_metric')}="
        f"{'—' if quality is None else f'{quality:.4f}'} (threshold "
        f"{row.get('quality_threshold')})",
        f"bundle sealed: {result.bundle_dir} (count it with gpubench-nb ledger)",
    ]
    if checks is not None and checks.missing_ids:
        lines.insert(1, f"missing IDs: {len(checks.missing_ids)}")
    return "\n".join(lines)

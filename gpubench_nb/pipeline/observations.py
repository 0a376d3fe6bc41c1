"""One finished (or failed) run turned into raw CSV rows (R3.2, R3.6, R4, R5.8)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpubench_nb.engine.environment import ROW_FIELDS
from gpubench_nb.engine.memory import MEMORY_FIELDS
from gpubench_nb.pipeline.schedule import ScheduledRun
from gpubench_nb.protocol.experiment_spec import Experiment
from gpubench_nb.protocol.records import EnvironmentRecord, Phase, RunRecord
from gpubench_nb.protocol.results_schema import empty_row


def _join(*parts: str | None) -> str:
    return " | ".join(part for part in parts if part)


def _figures(record: RunRecord) -> str:
    """The figures run.json records beside the load, outside its clock (R3.2)."""
    values = {key: getattr(record, key) for key in ("fingerprint_seconds", "cuda_context_seconds")}
    parts = [f"{key}={value:.6f}" for key, value in values.items() if value is not None]
    return f" ({', '.join(parts)})" if parts else ""


def _memory(readings: Mapping[str, Any] | None) -> dict[str, Any]:
    return {key: (readings or {}).get(key) for key in MEMORY_FIELDS}


def rows_for_run(
    experiment: Experiment,
    fingerprints: dict[str, str],
    run: ScheduledRun,
    record: RunRecord | None,
    failure: str | None = None,
) -> list[dict[str, Any]]:
    """The rows of one run from its run.json (None: the kernel died first): ``load`` + ``cold``,
    or ``warm``. ``failure``: seen from outside (dead kernel, timeout). A failed pass keeps its
    row, elapsed empty, never 0 (R3.6, R5.8); settings as the run applied them (R4.3)."""
    record = record or RunRecord()
    environment = record.environment or EnvironmentRecord()
    base = empty_row()
    base.update(
        experiment_id=experiment.experiment_id,
        variant_id=run.variant_id,
        corpus_revision=record.corpus_revision or fingerprints.get("corpus_revision"),
        # R1.1: the revisions the run actually loaded; the lock's when the run never got there.
        model_revision=record.model_revision or fingerprints.get("model_revision"),
        tokenizer_revision=record.tokenizer_revision or fingerprints.get("tokenizer_revision"),
        seed=experiment.seed,
        precision=record.precision,
        batch=record.batch,
        context=record.context,
        run_index=run.run_index,
        **{key: environment.to_dict().get(key) for key in ROW_FIELDS},
    )
    truncation = (
        f"truncation at context {record.context}: {record.truncated_texts} texts, "
        f"{record.dropped_tokens} tokens dropped (R2.3)"
        if record.truncated_texts is not None
        else None
    )
    context_note = _join(
        f"pid {record.pid}" if record.pid is not None else None,
        f"batching: {record.batching}" if record.batching else None,
        record.notes,
    )
    error = _join(record.error, failure)
    event = f"FAILED: {error}" if error else None
    measured = dict(
        base,
        phase=run.phase,
        warmup_iterations=record.warmup_iterations,
        elapsed_seconds=None if error else record.elapsed_seconds,
        notes=_join(event, truncation, context_note),  # the notes state the scope (R3.1)
        **_memory(record.memory),
    )
    if run.phase != Phase.COLD:
        return [measured]
    load_notes = _join(
        "load: weights + tokenizer onto the device, its own phase (R3.2); fingerprinting "
        "and CUDA context creation excluded" + _figures(record),
        event if record.load_seconds is None else None,
        context_note,
    )
    load = dict(base, phase=Phase.LOAD, elapsed_seconds=record.load_seconds, notes=load_notes)
    return [load | _memory(record.load_memory), measured]

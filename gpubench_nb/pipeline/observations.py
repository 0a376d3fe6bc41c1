"""One finished (or failed) run turned into raw CSV rows (R3.2, R3.6, R4, R5.8)."""

from __future__ import annotations

from typing import Any

from gpubench_nb.engine.environment import ROW_FIELDS
from gpubench_nb.pipeline.schedule import ScheduledRun
from gpubench_nb.protocol.experiment_spec import Experiment
from gpubench_nb.protocol.records import Phase
from gpubench_nb.protocol.results_schema import empty_row

MEMORY_KEYS = (
    "baseline_allocated_bytes",
    "baseline_reserved_bytes",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
)


def applied_settings(record: dict[str, Any]) -> dict[str, Any]:
    """precision, batch, context as the run applied them (its run.json), never as declared: a
    run that never wrote its record applied nothing that can be stated, so they stay empty
    (R4.3); the kernel refuses to run with settings other than the frozen ones (R1.3)."""
    return {key: record.get(key) for key in ("precision", "batch", "context")}


def _join(*parts: str | None) -> str:
    return " | ".join(part for part in parts if part)


def _figures(record: dict[str, Any]) -> str:
    """The untimed-by-load figures run.json records beside the load (R3.2)."""
    parts = [
        f"{key}={record[key]:.6f}"
        for key in ("fingerprint_seconds", "cuda_context_seconds")
        if isinstance(record.get(key), (int, float))
    ]
    return f" ({', '.join(parts)})" if parts else ""


def rows_for_run(
    experiment: Experiment,
    fingerprints: dict[str, str],
    run: ScheduledRun,
    record: dict[str, Any] | None,
    failure: str | None = None,
) -> list[dict[str, Any]]:
    """The rows of one scheduled run: ``load`` + ``cold`` for a cold run, ``warm`` for a warm one.

    ``record`` is the run's ``run.json`` (None when the kernel died before writing it);
    ``failure`` names an event seen from outside the kernel (dead kernel, timeout). A failed
    pass keeps its row with an empty elapsed time and a note, never a 0 (R3.6, R5.8).
    """
    record = record or {}
    applied = applied_settings(record)
    environment = record.get("environment") or {}
    base = empty_row()
    base.update(
        experiment_id=experiment.experiment_id,
        variant_id=run.variant_id,
        corpus_revision=record.get("corpus_revision") or fingerprints.get("corpus_revision"),
        # R1.1: the revisions the run actually loaded; the lock's when the run never got there.
        model_revision=record.get("model_revision") or fingerprints.get("model_revision"),
        tokenizer_revision=record.get("tokenizer_revision")
        or fingerprints.get("tokenizer_revision"),
        seed=experiment.seed,
        **applied,
        run_index=run.run_index,
        **{key: environment.get(key) for key in ROW_FIELDS},
    )
    truncation = (
        f"truncation at context {applied['context']}: {record['truncated_texts']} texts, "
        f"{record['dropped_tokens']} tokens dropped (R2.3)"
        if record.get("truncated_texts") is not None
        else None
    )
    context_note = _join(
        f"pid {record['pid']}" if record.get("pid") is not None else None,
        f"batching: {record['batching']}" if record.get("batching") else None,
        record.get("notes"),
    )
    error = _join(record.get("error"), failure)
    event = f"FAILED: {error}" if error else None
    rows = []
    if run.phase == Phase.COLD:
        load = dict(
            base,
            phase=Phase.LOAD,
            elapsed_seconds=record.get("load_seconds"),
            # The load's own R3.8 readings, as run.json holds them (empty = not recorded).
            **{key: (record.get("load_memory") or {}).get(key) for key in MEMORY_KEYS},
        )
        load["notes"] = _join(
            "load: weights + tokenizer onto the device, its own phase (R3.2); fingerprinting "
            "and CUDA context creation excluded" + _figures(record),
            event if record.get("load_seconds") is None else None,
            context_note,
        )
        rows.append(load)
    measured = dict(
        base,
        phase=run.phase,
        warmup_iterations=record.get("warmup_iterations"),
        elapsed_seconds=None if error else record.get("elapsed_seconds"),
        **{key: (record.get("memory") or {}).get(key) for key in MEMORY_KEYS},
    )
    measured["notes"] = _join(
        event, truncation, context_note
    )  # the run's notes state the scope (R3.1)
    rows.append(measured)
    return rows

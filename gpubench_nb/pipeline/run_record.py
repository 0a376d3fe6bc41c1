"""What run.json says of one run as it goes: the record while it runs, the passes' outcome,
and the finished record with its notes (R3.2, R3.6, R2.5)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from gpubench_nb.engine.clocks import telemetry_text
from gpubench_nb.engine.environment import environment_notes, row_fields
from gpubench_nb.engine.faults import FaultPlan
from gpubench_nb.engine.measure import PassResult
from gpubench_nb.engine.memory import NOT_RECORDED
from gpubench_nb.engine.timing import LOAD_SCOPE, scope_note
from gpubench_nb.protocol.bundle import PREDICTIONS_NAME
from gpubench_nb.protocol.clock import utc_now
from gpubench_nb.protocol.records import Phase

# What run.json says while the run is in progress: if the process dies (dead kernel, crash,
# timeout), this record stays, so the event is kept and explained, never dropped (R3.6).
DIED = "the process ended before the run finished (dead kernel, crash or timeout)"


# The cold pass's memory peak includes the cuBLAS workspace (32 MiB per stream and handle on
# recent GPUs with CUDA >= 12) that torch allocates at the first matrix product and keeps
#: part of what a fresh process pays, reported with the cold row.
CUBLAS_NOTE = (
    "on CUDA its peak memory includes the cuBLAS workspace (32 MiB on Hopper/Blackwell with "
    "CUDA >= 12) that torch allocates at the first matrix product and keeps for the process"
)


def phase_note(phase: str, warmups: int) -> str:
    """What the phase holds: a fresh process's first pass, or passes after warm-up (R3.2)."""
    if phase == Phase.COLD:
        return f"phase=cold: first pass in a fresh process, no warm-up (R3.2, R3.7); {CUBLAS_NOTE}"
    return f"phase=warm: {warmups} unrecorded warm-up pass(es), then one measured pass (R3.4)"


def generation_facts(record: dict[str, Any], notes: list[str]) -> None:
    """A causal LM's effective generation config, top-level in run.json and in the notes
    (R2.5): only declared options; the folder's others are named as overridden."""
    described = record.get("backend") or {}
    if "generation_config_effective" not in described:
        return
    effective = described["generation_config_effective"]
    overridden = described.get("generation_config_folder_overridden") or []
    record["generation_config_effective"] = effective
    record["generation_config_folder_overridden"] = overridden
    options = " ".join(f"{k}={v}" for k, v in sorted(effective.items()))
    notes.append(
        f"R2.5 generation config effective: {options}; model folder options overridden: "
        + (", ".join(overridden) or "none")
    )


@dataclass
class RunNotes:
    """What run.json's notes gather besides scope and phase: facts of the load and the pass
    (seconds kept apart, residency, generation config, telemetry), then events (R3.6)."""

    facts: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)


def running_record(
    exp: Any,
    settings: Any,
    run: tuple[str, str, int],
    warmups: int,
    corpus_revision: str,
    started: str,
) -> dict[str, Any]:
    """run.json while the run is in progress: every figure empty, the error ``DIED`` (R3.6)."""
    variant_id, phase, run_index = run
    return {
        "experiment_id": exp.experiment_id,
        "variant_id": variant_id,
        "phase": phase,
        "run_index": run_index,
        "pid": os.getpid(),
        "status": "running",
        "started_utc": started,
        "finished_utc": None,
        "scope": exp.timing.scope,
        "warmup_iterations": warmups,
        "precision": settings.precision,
        "batch": settings.batch,
        "context": settings.context,
        "batching": settings.batching,
        "declared_device": settings.device,
        "compile": settings.compile,  # how the model is run, as declared (R2.1)
        "attention": settings.attention,
        "quantization": settings.quantization,
        "corpus_revision": corpus_revision,
        "model_revision": None,
        "tokenizer_revision": None,
        "elapsed_seconds": None,
        "load_seconds": None,
        "memory": NOT_RECORDED.to_dict(),
        "load_memory": NOT_RECORDED.to_dict(),
        "import_seconds": None,  # importing the backend's modules, before the load clock
        "fingerprint_seconds": None,  # SHA-256 of model + tokenizer files, outside the load
        "weight_residency_at_load_start": None,  # page cache (engine/residency.py)
        "cuda_context_seconds": None,  # CUDA context creation, outside every timer; CPU: None
        "truncated_texts": None,
        "dropped_tokens": None,
        "item_count": None,
        "predictions": None,
        "error": DIED,
        "notes": DIED,
    }


def record_pass(result: PassResult, record: dict[str, Any], notes: RunNotes) -> None:
    """The warm-up and measured passes' outcome written into the record (R3.6, R1.5)."""
    record.update(
        elapsed_seconds=result.elapsed_seconds,
        memory=result.memory.to_dict(),
        truncated_texts=result.truncated_texts,
        dropped_tokens=result.dropped_tokens,
        item_count=result.item_count,
        tokens_processed=result.tokens_processed,
        off_label_answers=result.off_label_answers,
        predictions=PREDICTIONS_NAME if result.predictions_path is not None else None,
        error=result.error,
        out_of_memory=result.out_of_memory,  # R5.8, read by the report (never the message)
        gpu_telemetry=result.gpu_telemetry,
    )
    if result.gpu_telemetry is not None:
        notes.facts.append(telemetry_text(result.gpu_telemetry))
    notes.events.extend(result.notes)
    if result.off_label_answers:
        notes.events.append(
            f"R1.5 {result.off_label_answers} of {result.item_count} generated answers are "
            "outside the declared classes, written as-is (format_valid fails)"
        )
    notes.events.extend(result.memory.problems())


def finish_record(
    record: dict[str, Any],
    exp: Any,
    phase: str,
    warmups: int,
    plan: FaultPlan,
    env: dict[str, Any],
    notes: RunNotes,
) -> None:
    """The finished record: status, the environment's row fields and the notes (R2.4, R2.5)."""
    lines = [
        scope_note(exp.timing.scope),
        LOAD_SCOPE,
        phase_note(phase, warmups),
        *notes.facts,
        *notes.events,
    ]
    if exp.model.prompt is not None:  # a prompted causal LM's generation options (R2.5)
        record["generation"] = exp.model.prompt.options()
        lines.insert(1, exp.model.prompt.note())
    if plan.describe():
        lines.append(plan.describe())
    lines.append(environment_notes(env))
    record.update(row_fields(env))
    record.update(
        status="failed" if record["error"] else "finished",
        finished_utc=utc_now(),
        code_revision=env["code_revision"],
        notes="; ".join(lines),
        environment=env,
    )

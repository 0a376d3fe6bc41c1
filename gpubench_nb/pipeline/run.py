"""One scheduled run (load, then a cold or warm measured pass) in this fresh process -> run.json."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gpubench_nb.atomic import write_json_atomic
from gpubench_nb.engine.environment import (
    capture_environment,
    environment_notes,
    finish_environment,
    row_fields,
    utc_now,
)
from gpubench_nb.engine.faults import FaultPlan, trigger
from gpubench_nb.engine.measure import PassResult, measure_pass
from gpubench_nb.engine.memory import NOT_RECORDED, MemoryReading, probe_for
from gpubench_nb.engine.timing import LOAD_SCOPE, Stopwatch, scope_note, synchronizer
from gpubench_nb.errors import ProtocolError
from gpubench_nb.protocol.bundle import run_dir

PHASES = ("cold", "warm")
RUN_FILE = "run.json"
PREDICTIONS_FILE = "predictions.jsonl"
# What run.json says while the run is in progress: if the process dies (dead kernel, crash,
# timeout), this record stays, so the event is kept and explained, never dropped (R3.6).
DIED = "the process ended before the run finished (dead kernel, crash or timeout)"


def _phase_note(phase: str, warmups: int) -> str:
    if phase == "cold":
        return "phase=cold: first pass in a fresh process, no warm-up (R3.2, R3.7)"
    return f"phase=warm: {warmups} unrecorded warm-up pass(es), then one measured pass (R3.4)"


def _check_run(exp: Any, variant_id: str, phase: str, run_index: int) -> Any:
    """The declared variant, or a ProtocolError: these are declaration errors, never rows."""
    if phase not in PHASES:
        raise ProtocolError(
            f"phase {phase!r} is not one of {list(PHASES)}; load is timed inside every run "
            "and written as its own row",
            rule="R3.2",
        )
    if isinstance(run_index, bool) or not isinstance(run_index, int) or run_index < 1:
        raise ProtocolError(f"run_index must be an integer >= 1, got {run_index!r}", rule="R3.4")
    return exp.variant(variant_id)


def _load(
    exp: Any, settings: Any, device: Any, plan: FaultPlan
) -> tuple[Any, float, MemoryReading]:
    """Load model + tokenizer onto the device, timed and synchronised (R3.2), with its memory.

    Returns ``(backend, load_seconds, memory)``; exceptions propagate to the caller. The
    synchronise before the timer also initialises the CUDA context, so context creation is not
    part of the load time.
    """
    from gpubench_nb.engine.backends import load_backend

    probe = probe_for(device)
    watch = Stopwatch(sync=synchronizer(device))
    probe.begin()
    watch.start()
    fault = plan.load_fault()
    if fault is not None:
        trigger(fault, "load")
    backend = load_backend(
        exp.model,
        exp.tokenizer,
        classes=exp.classes,
        device=settings.device,
        precision=settings.precision,
    )
    load_seconds = watch.stop()
    return backend, load_seconds, probe.end()


def execute_run(
    experiment_path: Path | str,
    variant_id: str,
    phase: str,
    run_index: int,
    bundle_dir: Path | str,
) -> dict[str, Any]:
    """Run one scheduled (variant, phase, run_index) in this process and write its run.json.

    ``cold``: load, then one measured pass. ``warm``: load, ``timing.warmup_iterations``
    unrecorded passes, then one measured pass (R3.2, R3.4). Loading and every pass are observed:
    a failure (unsupported precision, OOM, any exception) is written to run.json with
    ``error`` set and elapsed empty (R3.6, R5.8), and no predictions.jsonl is left. Only
    declaration errors raise: a bad experiment YAML, variant, phase, run index, GPUBENCH_FAULT
    (``ProtocolError``), or an unreadable corpus (``CorpusError``).
    """
    from gpubench_nb.protocol.corpus import load_experiment_corpus
    from gpubench_nb.protocol.experiment import load_experiment

    started = utc_now()
    exp = load_experiment(experiment_path)
    variant = _check_run(exp, variant_id, phase, run_index)
    settings = variant.settings
    plan = FaultPlan.from_env(variant=variant_id, phase=phase, run=run_index)
    corpus = load_experiment_corpus(exp, "eval")
    warmups = exp.timing.warmup_iterations if phase == "warm" else 0

    out = run_dir(bundle_dir, variant_id, phase, run_index)
    out.mkdir(parents=True, exist_ok=True)
    predictions = out / PREDICTIONS_FILE
    predictions.unlink(missing_ok=True)
    record: dict[str, Any] = {
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
        "corpus_revision": corpus.revision,
        "model_revision": None,
        "tokenizer_revision": None,
        "elapsed_seconds": None,
        "load_seconds": None,
        "memory": NOT_RECORDED.to_dict(),
        "load_memory": NOT_RECORDED.to_dict(),
        "truncated_texts": None,
        "dropped_tokens": None,
        "item_count": None,
        "predictions": None,
        "error": DIED,
        "notes": DIED,
    }
    write_json_atomic(out / RUN_FILE, record)

    events: list[str] = []
    backend = device = None
    try:
        from gpubench_nb.engine.backends import resolve_device

        device = resolve_device(settings.device)
        backend, load_seconds, load_memory = _load(exp, settings, device, plan)
        record["load_seconds"] = load_seconds
        record["load_memory"] = load_memory.to_dict()
        record["model_revision"] = backend.model_revision
        record["tokenizer_revision"] = backend.tokenizer_revision
        if hasattr(backend, "describe"):
            record["backend"] = backend.describe()
    except Exception as exc:  # a failed load is an observation too (R3.6)
        message = " ".join(str(exc).split())[:500]
        record["error"] = f"load failed: {type(exc).__name__}: {message}"
        events.append(f"R3.6 load failed ({type(exc).__name__}): no pass was run")

    env = capture_environment(device, used=backend)
    if backend is not None:

        def reader() -> Any:
            return load_experiment_corpus(exp, "eval")

        result = _passes(
            backend, corpus, settings, exp.timing.scope, predictions, plan, warmups, reader
        )
        record.update(
            elapsed_seconds=result.elapsed_seconds,
            memory=result.memory.to_dict(),
            truncated_texts=result.truncated_texts,
            dropped_tokens=result.dropped_tokens,
            item_count=result.item_count,
            tokens_processed=result.tokens_processed,
            off_label_answers=result.off_label_answers,
            predictions=PREDICTIONS_FILE if result.predictions_path is not None else None,
            error=result.error,
        )
        events.extend(result.notes)
        if result.off_label_answers:
            events.append(
                f"R1.5 {result.off_label_answers} of {result.item_count} generated answers are "
                "outside the declared classes, written as-is (format_valid fails)"
            )
        events.extend(result.memory.problems())
    env = finish_environment(env)

    notes = [scope_note(exp.timing.scope), LOAD_SCOPE, _phase_note(phase, warmups), *events]
    if exp.model.prompt is not None:  # a prompted causal LM's generation options (R2.5)
        record["generation"] = exp.model.prompt.options()
        notes.insert(1, exp.model.prompt.note())
    if plan.describe():
        notes.append(plan.describe())
    notes.append(environment_notes(env))
    record.update(row_fields(env))
    record.update(
        status="failed" if record["error"] else "finished",
        finished_utc=utc_now(),
        code_revision=env["code_revision"],
        notes="; ".join(notes),
        environment=env,
    )
    write_json_atomic(out / RUN_FILE, record)
    return record


def _passes(
    backend: Any,
    corpus: Any,
    settings: Any,
    scope: str,
    predictions: Path,
    plan: FaultPlan,
    warmups: int,
    reader: Any,
) -> PassResult:
    """The declared warm-up passes (unrecorded), then the measured pass (R3.4)."""
    for number in range(1, warmups + 1):
        warm = measure_pass(
            backend,
            corpus,
            settings,
            scope,
            predictions,
            faults=plan,
            pass_kind="warmup",
            reader=reader,
        )
        if not warm.ok:
            predictions.unlink(missing_ok=True)
            return PassResult(
                elapsed_seconds=None,
                memory=warm.memory,
                truncated_texts=warm.truncated_texts,
                dropped_tokens=warm.dropped_tokens,
                error=f"warm-up pass {number} of {warmups} failed: {warm.error}",
                notes=(f"warm-up pass {number}: {warm.notes[0]}; no measured pass was run",),
            )
    return measure_pass(backend, corpus, settings, scope, predictions, faults=plan, reader=reader)

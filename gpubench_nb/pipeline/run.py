"""One scheduled run (load, then a cold or warm measured pass) in this fresh process -> run.json."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench_nb.engine.clocks import telemetry_text
from gpubench_nb.engine.environment import (
    capture_environment,
    environment_notes,
    finish_environment,
    row_fields,
)
from gpubench_nb.engine.faults import FaultPlan, trigger
from gpubench_nb.engine.measure import PassResult, measure_pass
from gpubench_nb.engine.memory import NOT_RECORDED, MemoryReading, probe_for
from gpubench_nb.engine.residency import residency, residency_text
from gpubench_nb.engine.timing import (
    LOAD_SCOPE,
    Stopwatch,
    cuda_context_seconds,
    scope_note,
    synchronizer,
)
from gpubench_nb.errors import ProtocolError
from gpubench_nb.protocol.bundle import PREDICTIONS_NAME, run_dir
from gpubench_nb.protocol.clock import utc_now
from gpubench_nb.protocol.lock import require_frozen
from gpubench_nb.protocol.records import MEASURED_PHASES, Phase, write_run
from gpubench_nb.protocol.writer import bundle_writer

PHASES = MEASURED_PHASES  # load is timed inside every run (R3.2)
# What run.json says while the run is in progress: if the process dies (dead kernel, crash,
# timeout), this record stays, so the event is kept and explained, never dropped (R3.6).
DIED = "the process ended before the run finished (dead kernel, crash or timeout)"


# The cold pass's memory peak includes the cuBLAS workspace (32 MiB per stream and handle on
# recent GPUs with CUDA >= 12) that torch allocates at the first matrix product and keeps
# (issue 23 §6): part of what a fresh process pays, reported with the cold row.
CUBLAS_NOTE = (
    "on CUDA its peak memory includes the cuBLAS workspace (32 MiB on Hopper/Blackwell with "
    "CUDA >= 12) that torch allocates at the first matrix product and keeps for the process"
)


def _phase_note(phase: str, warmups: int) -> str:
    if phase == Phase.COLD:
        return f"phase=cold: first pass in a fresh process, no warm-up (R3.2, R3.7); {CUBLAS_NOTE}"
    return f"phase=warm: {warmups} unrecorded warm-up pass(es), then one measured pass (R3.4)"


def _check_run(exp: Any, variant_id: str, phase: str, run_index: int) -> Any:
    """The declared variant, or a ProtocolError: these are declaration errors, never rows."""
    if phase not in PHASES:
        raise ProtocolError(
            f"phase {phase!r} is not one of {list(map(str, PHASES))}; load is timed inside "
            "every run and written as its own row",
            rule="R3.2",
        )
    if isinstance(run_index, bool) or not isinstance(run_index, int) or run_index < 1:
        raise ProtocolError(f"run_index must be an integer >= 1, got {run_index!r}", rule="R3.4")
    return exp.variant(variant_id)


@dataclass
class LoadOutcome:
    """What the load phase observed; a failed load keeps its readings (R3.6, R5.8)."""

    backend: Any = None
    load_seconds: float | None = None
    memory: MemoryReading = NOT_RECORDED
    import_seconds: float | None = None
    fingerprint_seconds: float | None = None
    cuda_context_seconds: float | None = None
    residency: dict[str, Any] | None = None
    error: str | None = None
    event: str | None = None


def _load(
    exp: Any,
    settings: Any,
    device: Any,
    plan: FaultPlan,
    check_frozen: Callable[[tuple[str, str]], None] | None = None,
) -> LoadOutcome:
    """Import, create the CUDA context, fingerprint, then load model + tokenizer, timed (R3.2).

    ``check_frozen(revisions)`` runs between fingerprinting and the load: model or tokenizer
    files that differ from the lock are refused (R1.3, raised) before they are loaded.

    Four figures, in this order and never inside each other: ``import_seconds`` (importing
    every module the backend's load uses, issue 23 §1), ``cuda_context_seconds`` (context
    creation, None on CPU), ``fingerprint_seconds`` (SHA-256 of the files, R1.1) and
    ``load_seconds`` (reading each file once and placing it on the device, synchronised, with
    its R3.8 memory readings). Just before the load clock the page-cache residency of the files
    is recorded (``residency``; fingerprinting has just read them). No forward pass runs here.
    A failure is returned, not raised: out of memory is R5.8 and keeps the readings taken so
    far, anything else is R3.6.
    """
    started = time.perf_counter_ns()
    from gpubench_nb.engine.backends.imports import import_backend_modules

    out = LoadOutcome()
    stage = "imports"
    probe = None
    try:
        import_backend_modules(exp.model, exp.tokenizer)
        out.import_seconds = (time.perf_counter_ns() - started) / 1e9
        from gpubench_nb.engine.backends import fingerprints_for, load_backend, revision_files

        stage = "CUDA context creation"
        out.cuda_context_seconds = cuda_context_seconds(device)
        stage = "fingerprinting"
        started = time.perf_counter_ns()
        revisions = fingerprints_for(exp.model, exp.tokenizer)
        out.fingerprint_seconds = (time.perf_counter_ns() - started) / 1e9
        if check_frozen is not None:
            check_frozen(revisions)
        stage = "load"
        model_files, tokenizer_files = revision_files(exp.model, exp.tokenizer)
        out.residency = residency(dict.fromkeys([*model_files, *tokenizer_files]))
        probe = probe_for(device)
        watch = Stopwatch(sync=synchronizer(device))
        probe.begin()
        watch.start()
        fault = plan.load_fault()
        if fault is not None:
            trigger(fault, "load")
        out.backend = load_backend(
            exp.model,
            exp.tokenizer,
            classes=exp.classes,
            device=settings.device,
            precision=settings.precision,
            revisions=revisions,
        )
        out.load_seconds = watch.stop()
        out.memory = probe.end()
    except ProtocolError:  # not an observation: files that are not the frozen ones (R1.3)
        raise
    except Exception as exc:  # a failed load is an observation too (R3.6, R5.8)
        out.backend = None
        out.load_seconds = None
        out.memory = _readings_so_far(probe)
        message = " ".join(str(exc).split())[:500]
        out.error = f"load failed: {type(exc).__name__}: {message}"
        if _is_oom(exc):
            out.event = (
                f"R5.8 out of memory during {stage}: failed observation, load time not recorded "
                "(never 0); memory readings taken so far kept; no pass was run"
            )
        else:
            out.event = f"R3.6 {stage} failed ({type(exc).__name__}): no pass was run"
    return out


def _is_oom(exc: BaseException) -> bool:
    import torch

    return isinstance(exc, torch.cuda.OutOfMemoryError)


def _generation_facts(record: dict[str, Any], notes: list[str]) -> None:
    """A causal LM's effective generation config, top-level in run.json and in the notes
    (R2.5, issue 23 §7): only declared options; the folder's others are named as overridden."""
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


def _seconds_note(loaded: LoadOutcome) -> str:
    """The figures kept apart from load_seconds, for the notes (R3.2, issue 23 §1)."""

    def text(value: float | None) -> str:
        return "not recorded" if value is None else f"{value:.3f} s"

    return (
        f"outside the load clock: imports {text(loaded.import_seconds)}, CUDA context "
        f"{text(loaded.cuda_context_seconds)}, fingerprinting {text(loaded.fingerprint_seconds)}"
    )


def _readings_so_far(probe: Any) -> MemoryReading:
    """The load's memory readings up to the failure (R5.8), or none if it never began."""
    if probe is None:
        return NOT_RECORDED
    try:
        return probe.end()
    except Exception:  # begin() never ran, or the device is unusable after the fault
        try:
            return probe.partial()
        except Exception:
            return NOT_RECORDED


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
    (``ProtocolError``), a declaration or a corpus, model or tokenizer file that differs from the
    bundle's ``protocol.lock.json`` (``ProtocolError``, R1.3), an unreadable corpus
    (``CorpusError``), or another writer holding the bundle (``BundleError``).
    """
    with bundle_writer(bundle_dir, f"10_measure {variant_id} {phase} {run_index}", step=True):
        return _execute_run(experiment_path, variant_id, phase, run_index, bundle_dir)


def _refuse_unless_frozen(
    exp: Any, bundle_dir: Path | str, record: dict[str, Any], fingerprints: dict[str, str]
) -> None:
    """After the load or the pass: the files read must still be the frozen ones (R1.1, R1.3);
    otherwise run.json says the run was refused, its predictions are dropped, and it raises."""
    try:
        require_frozen(bundle_dir, exp, fingerprints, step="10_measure")
    except ProtocolError as exc:
        out = run_dir(bundle_dir, record["variant_id"], record["phase"], record["run_index"])
        (out / PREDICTIONS_NAME).unlink(missing_ok=True)
        record.update(status="refused", error=str(exc), notes=str(exc), predictions=None)
        record.update(elapsed_seconds=None, finished_utc=utc_now())
        write_run(out, record)
        raise


def _execute_run(
    experiment_path: Path | str,
    variant_id: str,
    phase: str,
    run_index: int,
    bundle_dir: Path | str,
) -> dict[str, Any]:
    from gpubench_nb.protocol.corpus import load_experiment_corpus
    from gpubench_nb.protocol.experiment import load_experiment

    started = utc_now()
    exp = load_experiment(experiment_path)
    variant = _check_run(exp, variant_id, phase, run_index)
    settings = variant.settings
    plan = FaultPlan.from_env(variant=variant_id, phase=phase, run=run_index)
    corpus = load_experiment_corpus(exp, "eval")
    # R1.3: the declaration parsed above and the corpus read are the frozen ones, or nothing
    # runs; from here on only this checked `exp` is used (a later edit of the YAML is not seen).
    require_frozen(bundle_dir, exp, {"corpus_revision": corpus.revision}, step="10_measure")
    warmups = exp.timing.warmup_iterations if phase == Phase.WARM else 0

    out = run_dir(bundle_dir, variant_id, phase, run_index)
    out.mkdir(parents=True, exist_ok=True)
    predictions = out / PREDICTIONS_NAME
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
    write_run(out, record)

    events: list[str] = []
    load_facts: list[str] = []
    backend = device = None
    try:
        from gpubench_nb.engine.backends import resolve_device

        device = resolve_device(settings.device)
    except Exception as exc:  # a device that cannot be used is an observation too (R3.6)
        message = " ".join(str(exc).split())[:500]
        record["error"] = f"load failed: {type(exc).__name__}: {message}"
        events.append(f"R3.6 load failed ({type(exc).__name__}): no pass was run")
    if device is not None:
        loaded = _load(
            exp,
            settings,
            device,
            plan,
            lambda revisions: _refuse_unless_frozen(
                exp,
                bundle_dir,
                record,
                {"model_revision": revisions[0], "tokenizer_revision": revisions[1]},
            ),
        )
        backend = loaded.backend
        record.update(
            load_seconds=loaded.load_seconds,
            load_memory=loaded.memory.to_dict(),
            import_seconds=loaded.import_seconds,
            fingerprint_seconds=loaded.fingerprint_seconds,
            cuda_context_seconds=loaded.cuda_context_seconds,
            weight_residency_at_load_start=loaded.residency,
        )
        load_facts = [_seconds_note(loaded)]
        if loaded.residency is not None:
            load_facts.append(residency_text(loaded.residency))
        if loaded.error is not None:
            record["error"] = loaded.error
            events.append(loaded.event or "")
            events.extend(loaded.memory.problems())
        else:
            record["model_revision"] = backend.model_revision
            record["tokenizer_revision"] = backend.tokenizer_revision
            if hasattr(backend, "describe"):
                record["backend"] = backend.describe()
                _generation_facts(record, load_facts)

    env = capture_environment(device, used=backend)
    read_revisions: list[str] = []
    if backend is not None:

        def reader() -> Any:
            current = load_experiment_corpus(exp, "eval")
            read_revisions.append(current.revision)
            return current

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
            predictions=PREDICTIONS_NAME if result.predictions_path is not None else None,
            error=result.error,
            gpu_telemetry=result.gpu_telemetry,
        )
        if result.gpu_telemetry is not None:
            load_facts.append(telemetry_text(result.gpu_telemetry))
        events.extend(result.notes)
        if result.off_label_answers:
            events.append(
                f"R1.5 {result.off_label_answers} of {result.item_count} generated answers are "
                "outside the declared classes, written as-is (format_valid fails)"
            )
        events.extend(result.memory.problems())
        for revision in sorted(set(read_revisions)):  # end_to_end re-reads the corpus file
            _refuse_unless_frozen(exp, bundle_dir, record, {"corpus_revision": revision})
    env = finish_environment(env)

    notes = [
        scope_note(exp.timing.scope),
        LOAD_SCOPE,
        _phase_note(phase, warmups),
        *load_facts,
        *events,
    ]
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
    write_run(out, record)
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
    """The declared warm-up passes (unrecorded), then the measured pass (R3.4). In the
    processing scope, tokenisation and batches are built once and reused (issue 25)."""
    prepared: dict[str, Any] = {}
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
            prepared=prepared,
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
    return measure_pass(
        backend, corpus, settings, scope, predictions, faults=plan, reader=reader, prepared=prepared
    )

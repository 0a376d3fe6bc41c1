"""One scheduled run (load, then a cold or warm measured pass) in this fresh process -> run.json."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench_nb.engine.environment import capture_environment, finish_environment
from gpubench_nb.engine.faults import FaultPlan, trigger
from gpubench_nb.engine.measure import PassResult, measure_pass
from gpubench_nb.engine.memory import NOT_RECORDED, MemoryReading, probe_for
from gpubench_nb.engine.residency import residency, residency_text
from gpubench_nb.engine.timing import Stopwatch, cuda_context_seconds, synchronizer
from gpubench_nb.errors import ProtocolError
from gpubench_nb.kernel import MEASURE_STEP
from gpubench_nb.pipeline.run_record import (
    RunNotes,
    finish_record,
    generation_facts,
    record_pass,
    running_record,
)
from gpubench_nb.protocol.bundle import PREDICTIONS_NAME, run_dir
from gpubench_nb.protocol.clock import utc_now
from gpubench_nb.protocol.lock import require_frozen
from gpubench_nb.protocol.records import MEASURED_PHASES, Phase, write_run
from gpubench_nb.protocol.writer import bundle_writer

PHASES = MEASURED_PHASES  # load is timed inside every run (R3.2)


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
    imports_started: int | None = None,
) -> LoadOutcome:
    """Import, create the CUDA context, fingerprint, then load model + tokenizer, timed (R3.2).

    ``check_frozen(revisions)`` runs between fingerprinting and the load: model or tokenizer
    files that differ from the lock are refused (R1.3, raised) before they are loaded.

    Four figures, in this order and never inside each other: ``import_seconds`` (from
    ``imports_started``, taken before ``_device`` imports torch, to every module the backend's
    load uses imported: torch included and, on CUDA, the driver start of
    ``torch.cuda.is_available``), ``cuda_context_seconds`` (context
    creation, None on CPU), ``fingerprint_seconds`` (SHA-256 of the files, R1.1) and
    ``load_seconds`` (reading each file once and placing it on the device, synchronised, with
    its R3.8 memory readings). Just before the load clock the page-cache residency of the files
    is recorded (``residency``; fingerprinting has just read them). No forward pass runs here.
    A failure is returned, not raised: out of memory is R5.8 and keeps the readings taken so
    far, anything else is R3.6.
    """
    started = time.perf_counter_ns() if imports_started is None else imports_started
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


def _seconds_note(loaded: LoadOutcome) -> str:
    """The figures kept apart from load_seconds, for the notes (R3.2)."""

    def text(value: float | None) -> str:
        return "not recorded" if value is None else f"{value:.3f} s"

    return (
        f"load {text(loaded.load_seconds)}; outside the load clock: imports (torch included; "
        f"on CUDA also the driver start) {text(loaded.import_seconds)}, CUDA context "
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
    with bundle_writer(bundle_dir, f"{MEASURE_STEP} {variant_id} {phase} {run_index}", step=True):
        return _execute_run(experiment_path, variant_id, phase, run_index, bundle_dir)


def _refuse_unless_frozen(
    exp: Any, bundle_dir: Path | str, record: dict[str, Any], fingerprints: dict[str, str]
) -> None:
    """After the load or the pass: the files read must still be the frozen ones (R1.1, R1.3);
    otherwise run.json says the run was refused, its predictions are dropped, and it raises."""
    try:
        require_frozen(bundle_dir, exp, fingerprints, step=MEASURE_STEP)
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
    require_frozen(bundle_dir, exp, {"corpus_revision": corpus.revision}, step=MEASURE_STEP)
    warmups = exp.timing.warmup_iterations if phase == Phase.WARM else 0

    out = run_dir(bundle_dir, variant_id, phase, run_index)
    out.mkdir(parents=True, exist_ok=True)
    predictions = out / PREDICTIONS_NAME
    predictions.unlink(missing_ok=True)
    run = (variant_id, phase, run_index)
    record = running_record(exp, settings, run, warmups, corpus.revision, started)
    write_run(out, record)

    notes = RunNotes()
    imports_started = time.perf_counter_ns()  # _device imports torch: part of import_seconds
    device = _device(settings, record, notes)
    backend = None
    if device is not None:
        backend = _load_backend(
            exp, settings, device, plan, bundle_dir, record, notes, imports_started
        )
    env = capture_environment(device, used=backend)
    read_revisions: list[str] = []

    def reader() -> Any:  # end_to_end re-reads the corpus file: it must be the frozen one
        current = load_experiment_corpus(exp, "eval")
        read_revisions.append(current.revision)
        return current

    if backend is not None:
        result = _passes(
            backend, corpus, settings, exp.timing.scope, predictions, plan, warmups, reader
        )
        record_pass(result, record, notes)
        for revision in sorted(set(read_revisions)):
            _refuse_unless_frozen(exp, bundle_dir, record, {"corpus_revision": revision})
    env = finish_environment(env)
    finish_record(record, exp, phase, warmups, plan, env, notes)
    write_run(out, record)
    return record


def _device(settings: Any, record: dict[str, Any], notes: RunNotes) -> Any:
    """The declared device, or None: a device that cannot be used is an observation (R3.6)."""
    try:
        from gpubench_nb.engine.backends import resolve_device

        return resolve_device(settings.device)
    except Exception as exc:
        message = " ".join(str(exc).split())[:500]
        record["error"] = f"load failed: {type(exc).__name__}: {message}"
        notes.events.append(f"R3.6 load failed ({type(exc).__name__}): no pass was run")
        return None


def _load_backend(
    exp: Any,
    settings: Any,
    device: Any,
    plan: FaultPlan,
    bundle_dir: Path | str,
    record: dict[str, Any],
    notes: RunNotes,
    imports_started: int | None = None,
) -> Any:
    """The load phase (``_load``) written into the record; the backend, or None if it failed."""
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
        imports_started,
    )
    record.update(
        load_seconds=loaded.load_seconds,
        load_memory=loaded.memory.to_dict(),
        import_seconds=loaded.import_seconds,
        fingerprint_seconds=loaded.fingerprint_seconds,
        cuda_context_seconds=loaded.cuda_context_seconds,
        weight_residency_at_load_start=loaded.residency,
    )
    notes.facts.append(_seconds_note(loaded))
    if loaded.residency is not None:
        notes.facts.append(residency_text(loaded.residency))
    backend = loaded.backend
    if loaded.error is not None:
        record["error"] = loaded.error
        notes.events.append(loaded.event or "")
        notes.events.extend(loaded.memory.problems())
        return backend
    record["model_revision"] = backend.model_revision
    record["tokenizer_revision"] = backend.tokenizer_revision
    if hasattr(backend, "describe"):
        record["backend"] = backend.describe()
        generation_facts(record, notes.facts)
    return backend


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
    processing scope, tokenisation and batches are built once and reused."""
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

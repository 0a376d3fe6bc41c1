"""The phases of one run (R3.2): timed load, warm-up passes, measured pass, their notes; each
returns its values, a failure an observation, never raised (R3.6, R5.8)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench_nb.engine.clocks import telemetry_text
from gpubench_nb.engine.environment import environment_notes
from gpubench_nb.engine.faults import FaultPlan, trigger
from gpubench_nb.engine.measure import PassResult, measure_pass, scope_note
from gpubench_nb.engine.memory import (
    NOT_RECORDED,
    failure_text,
    is_out_of_memory,
    probe_for,
    readings_so_far,
)
from gpubench_nb.engine.residency import residency, residency_text
from gpubench_nb.engine.timing import Stopwatch, cuda_context_seconds, synchronizer
from gpubench_nb.errors import ProtocolError
from gpubench_nb.protocol.records import LoadPart, Phase

LOAD_SCOPE = (
    "load timer covers reading weights and tokenizer (each file once) and placing them on the "
    "device, synchronised (R3.2); it excludes importing torch and the backend's Python modules "
    "(import_seconds; on CUDA also the driver start), CUDA context creation "
    "(cuda_context_seconds) and SHA-256 fingerprinting (fingerprint_seconds), all in run.json; "
    "fingerprinting has just read every file, so the load reads them from the page cache, not "
    "storage; no forward pass runs, so the cold pass is the process's first forward"
)


@dataclass(frozen=True)
class LoadSpec:
    """What the load reads of the frozen declaration (R1.3): model and tokenizer folders, the
    classes, and the variant's settings (device, precision, and the rest it applies)."""

    model: Any  # protocol.experiment_spec.ModelSpec
    tokenizer: Any  # protocol.experiment_spec.TokenizerSpec
    classes: tuple[str, ...]
    settings: Any  # protocol.experiment_spec.VariantSettings


@dataclass(frozen=True)
class LoadOutcome:
    """What the load phase observed (``record``: run.json's load fields; ``facts``, ``events``: its
    notes); a failed load keeps its readings (R3.6, R5.8)."""

    device: Any = None
    backend: Any = None
    record: LoadPart | None = None
    facts: tuple[str, ...] = ()
    events: tuple[str, ...] = ()

    @property
    def error(self) -> str | None:
        return self.record.error if self.record is not None else None


def _seconds_text(value: float | None) -> str:
    return "not recorded" if value is None else f"{value:.3f} s"


def generation_note(described: dict[str, Any]) -> str | None:
    """A causal LM's effective generation config for the notes (R2.5): only declared options;
    the folder's others are named as overridden."""
    if "generation_config_effective" not in described:
        return None
    options = " ".join(
        f"{k}={v}" for k, v in sorted(described["generation_config_effective"].items())
    )
    overridden = described.get("generation_config_folder_overridden") or []
    return f"R2.5 generation config effective: {options}; model folder options overridden: " + (
        ", ".join(overridden) or "none"
    )


def load_phase(
    spec: LoadSpec,
    plan: FaultPlan,
    check_frozen: Callable[[tuple[str, str]], None] | None = None,
    imports_started: int | None = None,
) -> LoadOutcome:
    """Resolve the device, import, create the CUDA context, fingerprint, then time the load (R3.2,
    R1.1, R3.8), never one inside another; ``import_seconds`` starts before the device is resolved
    (that imports torch). Files unlike the lock are refused before they load (R1.3); other failures
    are returned (R3.6), out of memory with its readings (R5.8)."""
    from gpubench_nb.engine.backends import resolve_device

    figures: dict[str, Any] = {"load_seconds": None, "load_memory": NOT_RECORDED.to_dict()}
    stage, probe, device = "load", None, None
    # resolving the device imports torch: part of the imports (unless the caller's clock began)
    started = time.perf_counter_ns() if imports_started is None else imports_started
    try:
        device = resolve_device(spec.settings.device)
    except Exception as exc:  # a device that cannot be used is an observation (R3.6)
        return _failed(None, figures, stage, None, exc, ())
    facts: list[str] = []
    try:
        from gpubench_nb.engine.backends.imports import import_backend_modules

        stage = "imports"
        import_backend_modules(spec.model, spec.tokenizer)
        figures["import_seconds"] = (time.perf_counter_ns() - started) / 1e9
        from gpubench_nb.engine.backends.registry import fingerprinted_files, load_backend

        stage = "CUDA context creation"
        figures["cuda_context_seconds"] = cuda_context_seconds(device)
        stage = "fingerprinting"
        started = time.perf_counter_ns()
        files, revisions = fingerprinted_files(spec.model, spec.tokenizer)
        figures["fingerprint_seconds"] = (time.perf_counter_ns() - started) / 1e9
        if check_frozen is not None:
            check_frozen(revisions)
        stage = "load"
        found = residency(dict.fromkeys([*files[0], *files[1]]))
        figures["weight_residency_at_load_start"] = found
        if found is not None:
            facts.append(residency_text(found))
        probe = probe_for(device)
        watch = Stopwatch(sync=synchronizer(device))
        probe.begin()
        watch.start()
        fault = plan.load_fault()
        if fault is not None:
            trigger(fault, "load")
        backend = load_backend(
            spec.model,
            spec.tokenizer,
            classes=spec.classes,
            device=spec.settings.device,
            precision=spec.settings.precision,
            revisions=revisions,
        )
        figures["load_seconds"] = watch.stop()
        figures["load_memory"] = probe.end().to_dict()
    except ProtocolError:  # not an observation: files that are not the frozen ones (R1.3)
        raise
    except Exception as exc:  # a failed load is an observation too (R3.6, R5.8)
        return _failed(device, figures, stage, probe, exc, facts)
    return _loaded(device, backend, figures, facts)


def _seconds_fact(figures: dict[str, Any]) -> str:
    """The figures kept apart from load_seconds, for the notes (R3.2)."""
    return (
        f"load {_seconds_text(figures['load_seconds'])}; outside the load clock: imports (torch "
        f"included; on CUDA also the driver start) {_seconds_text(figures.get('import_seconds'))}"
        f", CUDA context {_seconds_text(figures.get('cuda_context_seconds'))}, fingerprinting "
        f"{_seconds_text(figures.get('fingerprint_seconds'))}"
    )


def _loaded(device: Any, backend: Any, figures: dict[str, Any], facts: list[str]) -> LoadOutcome:
    """A backend on its device: its revisions and description join the load's figures."""
    figures.update(
        model_revision=backend.model_revision, tokenizer_revision=backend.tokenizer_revision
    )
    facts.insert(0, _seconds_fact(figures))
    if hasattr(backend, "describe"):
        described = backend.describe()
        figures["backend"] = described
        if "generation_config_effective" in described:
            figures["generation_config_effective"] = described["generation_config_effective"]
            figures["generation_config_folder_overridden"] = tuple(
                described.get("generation_config_folder_overridden") or ()
            )
            facts.append(generation_note(described) or "")
    return LoadOutcome(device, backend, LoadPart(**figures), tuple(facts))


def _failed(
    device: Any, figures: dict[str, Any], stage: str, probe: Any, exc: Exception, facts: Any
) -> LoadOutcome:
    """The load's failure as an observation: its error, event and readings so far (R3.6, R5.8)."""
    memory = readings_so_far(probe)
    figures.update(load_memory=memory.to_dict(), error=f"load failed: {failure_text(exc)}")
    figures["out_of_memory"] = is_out_of_memory(exc)
    if figures["out_of_memory"]:
        event = (
            f"R5.8 out of memory during {stage}: failed observation, load time not recorded "
            "(never 0); memory readings taken so far kept; no pass was run"
        )
    else:
        event = f"R3.6 {stage} failed ({type(exc).__name__}): no pass was run"
    lead = (_seconds_fact(figures),) if device is not None else ()
    return LoadOutcome(
        device, None, LoadPart(**figures), (*lead, *facts), (event, *memory.problems())
    )


def warmed_pass(
    backend: Any,
    corpus: Any,
    settings: Any,
    scope: str,
    predictions: Path,
    plan: FaultPlan,
    warmups: int,
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
                corpus_reread=warm.corpus_reread,
            )
    return measure_pass(
        backend, corpus, settings, scope, predictions, faults=plan, prepared=prepared
    )


# Said with the cold row: the cuBLAS workspace is part of what a fresh process pays.
CUBLAS_NOTE = (
    "on CUDA its peak memory includes the cuBLAS workspace (32 MiB on Hopper/Blackwell with "
    "CUDA >= 12) that torch allocates at the first matrix product and keeps for the process"
)


def phase_note(phase: str, warmups: int) -> str:
    """What the phase holds: a fresh process's first pass, or passes after warm-up (R3.2)."""
    if phase == Phase.COLD:
        return f"phase=cold: first pass in a fresh process, no warm-up (R3.2, R3.7); {CUBLAS_NOTE}"
    return f"phase=warm: {warmups} unrecorded warm-up pass(es), then one measured pass (R3.4)"


def run_notes(
    scope: str,
    prompt: Any,
    phase: str,
    warmups: int,
    loaded: LoadOutcome,
    result: PassResult | None,
    faults: str,
    env: dict[str, Any],
) -> str:
    """run.json's notes: scope, phase, the load's and the pass's facts (GPU clocks, R2.5), then the
    events (failures, off-label answers R1.5, memory R3.8), the injected faults and the environment
    (R3.1, R3.6, R2.4, R2.5)."""
    facts, events = [], []
    if result is not None:
        facts = [telemetry_text(result.gpu_telemetry)]
        off_label = f"R1.5 {result.off_label_answers} of {result.item_count} generated answers are"
        off_label += " outside the declared classes, written as-is (format_valid fails)"
        events = [*result.notes, *([off_label] if result.off_label_answers else [])]
        events += result.memory.problems()
    lines = [
        scope_note(scope),
        *([prompt.note()] if prompt is not None else []),  # a prompted causal LM (R2.5)
        LOAD_SCOPE,
        phase_note(phase, warmups),
        *loaded.facts,
        *filter(None, facts),
        *loaded.events,
        *events,
        *([faults] if faults else []),
        environment_notes(env),
    ]
    return "; ".join(lines)

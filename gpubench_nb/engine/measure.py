"""One measured pass over the corpus: the only place the inference loop lives (R3.1, R3.8)."""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench_nb.atomic import write_text_atomic
from gpubench_nb.engine.backends.device_errors import failure_kind
from gpubench_nb.engine.clocks import sampler_for
from gpubench_nb.engine.faults import FaultPlan, surface_pending, trigger
from gpubench_nb.engine.memory import (
    MemoryReading,
    failure_text,
    is_out_of_memory,
    probe_for,
    readings_so_far,
)
from gpubench_nb.engine.optimise import graphs_compiled
from gpubench_nb.engine.timing import Stopwatch, synchronizer
from gpubench_nb.errors import BackendError, CorpusError
from gpubench_nb.protocol.experiment_spec import SCOPES  # declared vocabulary (R3.1)
from gpubench_nb.protocol.records import GpuTelemetry, PassPart


def check_scope(scope: str) -> str:
    """Return ``scope`` if it is declared in R3.1, else raise ``ValueError`` naming the fix."""
    if scope not in SCOPES:
        raise ValueError(
            f"R3.1: timing scope {scope!r} is not one of {sorted(SCOPES)}; declare "
            "timing.scope as 'processing' or 'end_to_end'"
        )
    return scope


def scope_note(scope: str) -> str:
    """The `notes` text that states what the timer covered (R3.1)."""
    return f"scope={check_scope(scope)}: {SCOPES[scope]}"


@dataclass(frozen=True)
class PassResult:
    """What one pass observed. A failed pass keeps its row (R3.6, R5.8): ``elapsed_seconds``
    is ``None`` (never 0), ``memory`` holds the readings taken so far, ``error`` names it."""

    elapsed_seconds: float | None
    memory: MemoryReading
    truncated_texts: int | None
    dropped_tokens: int | None
    error: str | None
    notes: tuple[str, ...] = field(default_factory=tuple)  # events (failures), with rules
    predictions_path: Path | None = None  # the file written, or None (failed / not asked)
    item_count: int | None = None
    tokens_processed: int | None = None  # where the backend counts them (tokens/s)
    off_label_answers: int | None = None  # generated answers outside the classes (R1.5)
    gpu_telemetry: dict | None = None  # clocks/power/energy sampled during the span (clocks.py)
    corpus_reread: str | None = None  # end_to_end: the revision of the corpus file read again
    compiled_graphs: int | None = None  # graphs torch.compile compiled during the pass
    out_of_memory: bool = False  # the failure was the device running out of memory (R5.8)

    @property
    def ok(self) -> bool:
        return self.error is None

    def record(self) -> PassPart:
        """run.json's pass fields: what the measured pass observed (R3.6, R3.8)."""
        telemetry = self.gpu_telemetry
        return PassPart(
            elapsed_seconds=self.elapsed_seconds,
            memory=self.memory.to_dict(),
            truncated_texts=self.truncated_texts,
            dropped_tokens=self.dropped_tokens,
            item_count=self.item_count,
            tokens_processed=self.tokens_processed,
            off_label_answers=self.off_label_answers,
            predictions=None if self.predictions_path is None else self.predictions_path.name,
            error=self.error,
            out_of_memory=self.out_of_memory,
            gpu_telemetry=None
            if telemetry is None
            else GpuTelemetry.from_dict(telemetry, "gpu_telemetry"),
        )


def prediction_lines(ids: Sequence[str], labels: Sequence[str]) -> str:
    """predictions.jsonl: one ``{"id", "label"}`` per line, in corpus order (R1.2)."""
    return "".join(
        json.dumps({"id": i, "label": label}, ensure_ascii=False) + "\n"
        for i, label in zip(ids, labels, strict=True)
    )


def _labels(backend: Any, batches: Sequence[Any], outputs: Sequence[Any], total: int) -> list[str]:
    """Label names in corpus order, put back through each batch's ``indices``."""
    import torch

    flat = torch.cat([o.reshape(-1) for o in outputs]).tolist() if outputs else []
    positions = [i for b in batches for i in b.indices]
    if len(flat) != len(positions) or len(set(positions)) != total or len(positions) != total:
        raise BackendError(
            f"backend {getattr(backend, 'name', '?')} returned {len(flat)} predictions for "
            f"{len(positions)} batch positions over {total} corpus items; every item must be "
            "predicted exactly once",
            rule="R1.5",
        )
    classes = backend.classes
    labels: list[str] = [""] * total
    for pos, index in zip(positions, flat, strict=True):
        # A negative index is an answer outside the classes, written as-is (R1.5).
        labels[pos] = classes[index] if index >= 0 else backend.off_label_answer(pos)
    return labels


def _settle() -> None:
    """Collect earlier garbage before the timer (R3.1), then ``gc.freeze`` the survivors so
    collections inside a span never walk the load's heap (R3.2)."""
    gc.collect()
    gc.freeze()


def _default_reader(corpus: Any) -> Callable[[], Any]:
    def read() -> Any:
        from gpubench_nb.protocol.corpus import load_corpus

        return load_corpus(corpus.path, **corpus.read_as)

    return read


def measure_pass(
    backend: Any,
    corpus: Any,
    settings: Any,
    scope: str,
    predictions_path: Path | str | None,
    *,
    clock: Callable[[], int] = time.perf_counter_ns,
    probe: Any = None,
    sync: Callable[[], None] | None = None,
    faults: FaultPlan | None = None,
    pass_kind: str = "measured",
    reader: Callable[[], Any] | None = None,
    sampler: Any = None,
    prepared: dict[str, Any] | None = None,
) -> PassResult:
    """Classify ``corpus`` once with ``backend`` at ``settings``, timing the declared scope (R3.1),
    memory read around it (R3.8); ``prepared`` keeps the processing scope's batches for the next
    pass. Any exception is a failed observation leaving no predictions file (R3.6, R5.8)."""
    check_scope(scope)
    if sampler is None and pass_kind == "measured":
        sampler = sampler_for(backend.device)
    path = None if predictions_path is None else Path(predictions_path)
    if path is not None:
        # A stale file from an earlier (e.g. warm-up) pass must never stand in for this one.
        path.unlink(missing_ok=True)
    probe = probe if probe is not None else probe_for(backend.device)
    track = SyncTracker(sync if sync is not None else synchronizer(backend.device))
    batch_faults = (faults if faults is not None else FaultPlan.from_env()).batch_faults(pass_kind)
    span = _Span(probe, sampler, Stopwatch(clock, track))
    run = _Pass(backend, settings, path, span, track, batch_faults)
    reader = reader if reader is not None else _default_reader(corpus)
    compiled = graphs_compiled()  # new shapes recompile inside the pass: counted (R3.2)
    try:
        if scope == "processing":
            ids, labels, elapsed, memory = run.processing(corpus, prepared)
        else:
            ids, labels, elapsed, memory = run.end_to_end(corpus, reader)
    except Exception as exc:
        _quietly(sampler, "stop", span.watch.span_so_far())
        if path is not None:
            path.unlink(missing_ok=True)
        where = _where(exc, run.stage, run.number, run.total_batches, track)
        return _failed(exc, probe, run, where, _telemetry(sampler))
    return PassResult(
        elapsed_seconds=elapsed,
        memory=memory,
        truncated_texts=run.tokenized.truncated_texts,
        dropped_tokens=run.tokenized.dropped_tokens,
        error=None,
        predictions_path=path,
        item_count=len(ids),
        tokens_processed=backend.tokens_processed(run.tokenized)
        if hasattr(backend, "tokens_processed")
        else None,
        off_label_answers=sum(1 for label in labels if label not in backend.classes)
        if hasattr(backend, "off_label_answer")
        else None,
        gpu_telemetry=_telemetry(sampler),
        corpus_reread=run.reread,
        compiled_graphs=None if compiled is None else (graphs_compiled() or 0) - compiled,
    )


class _Span:
    """The timed span in the fixed order (R3.8): settle, memory baselines, sampler, timer;
    then timer (it synchronises), sampler, memory peaks."""

    def __init__(self, probe: Any, sampler: Any, watch: Stopwatch) -> None:
        self.probe, self.sampler, self.watch = probe, sampler, watch

    def begin(self) -> None:
        _settle()
        self.probe.begin()
        _quietly(self.sampler, "start")
        self.watch.start()

    def end(self) -> tuple[float, MemoryReading]:
        """(elapsed seconds, memory readings) of the span."""
        elapsed = self.watch.stop()
        _quietly(self.sampler, "stop", self.watch.span_ns)
        return elapsed, self.probe.end()


_Observed = tuple[Sequence[str], list[str], float, MemoryReading]  # ids, labels, elapsed, memory


class _Pass:
    """One pass's steps in either scope (R3.1), remembering how far it got so a failure is located
    and keeps its truncation counts."""

    def __init__(
        self,
        backend: Any,
        settings: Any,
        path: Path | None,
        span: _Span,
        track: SyncTracker,
        batch_faults: dict[int, Any],
    ) -> None:
        self.backend, self.settings, self.path, self.span = backend, settings, path, span
        self.track, self.batch_faults = track, batch_faults
        self.stage = "start"
        self.reread: str | None = None  # end_to_end: the revision of the corpus read again
        self.number = 0  # the batch being launched
        self.total_batches: int | str = "?"
        self.tokenized: Any = None

    def processing(self, corpus: Any, prepared: dict[str, Any] | None) -> _Observed:
        """Tokens and batches before the timer, predictions written after it."""
        ids = corpus.ids
        batches = self._prepared_batches(corpus, prepared)
        self.total_batches = len(batches)
        self.stage = "timer start"
        self.span.begin()
        outputs = self._forward(batches)
        self.stage = "synchronisation"
        elapsed, memory = self.span.end()
        self.stage = "writing predictions"
        return ids, self._write(batches, outputs, ids), elapsed, memory

    def end_to_end(self, corpus: Any, reader: Callable[[], Any]) -> _Observed:
        """Reading, tokens, batches, forward passes and the predictions file, all timed."""
        self.stage = "timer start"
        self.span.begin()
        self.stage = "reading the corpus"
        current = reader()
        self.reread = current.revision
        batches = self._tokenized_batches(current.texts)
        self.total_batches = len(batches)
        outputs = self._forward(batches)
        self.stage = "writing predictions"  # the timer's synchronisation comes after it
        labels = self._write(batches, outputs, current.ids)
        elapsed, memory = self.span.end()
        if current.revision != corpus.revision:
            raise CorpusError(
                f"{corpus.path} changed during the run (revision {corpus.revision[:12]} "
                f"at start, {current.revision[:12]} when re-read); freeze the corpus",
                rule="R1.1",
            )
        return current.ids, labels, elapsed, memory

    def _prepared_batches(self, corpus: Any, prepared: dict[str, Any] | None) -> Sequence[Any]:
        """Tokens and batches built once per process and reused, outside the timer."""
        s = self.settings
        key = (id(self.backend), corpus.revision, s.context, s.batch, s.batching)
        if prepared is not None and prepared.get("key") == key:
            self.tokenized = prepared["tokenized"]
            return prepared["batches"]
        batches = self._tokenized_batches(corpus.texts)
        if prepared is not None:
            prepared.update(key=key, tokenized=self.tokenized, batches=batches)
        return batches

    def _tokenized_batches(self, texts: Sequence[str]) -> Sequence[Any]:
        self.stage = "tokenisation"
        self.tokenized = self.backend.tokenize(texts, self.settings.context)
        self.stage = "batch building"
        return self.backend.batches(self.tokenized, self.settings.batch, self.settings.batching)

    def _forward(self, batches: Sequence[Any]) -> list[Any]:
        """The forward passes, batch by batch; an injected fault fires before its batch."""
        import torch

        self.stage = "forward"
        outputs = []
        with torch.inference_mode():
            for number, batch in enumerate(batches, 1):
                self.number = self.track.batch = number
                if self.batch_faults and number in self.batch_faults:
                    trigger(self.batch_faults[number], f"batch {number} of {self.total_batches}")
                outputs.append(self.backend.predict(batch))
        return outputs

    def _write(self, batches: Sequence[Any], outputs: list[Any], ids: Sequence[str]) -> list[str]:
        """The labels in corpus order, written to the predictions file if one is asked for."""
        labels = _labels(self.backend, batches, outputs, len(ids))
        if self.path is not None:
            lines = prediction_lines(ids, labels)
            write_text_atomic(self.path, lines)
        return labels


class SyncTracker:
    """The stopwatch's synchronise, remembering after which batch it ran: a CUDA error surfaces at
    the first synchronisation after the failing kernel."""

    def __init__(self, sync: Callable[[], None]) -> None:
        self._sync = sync
        self.batch = 0  # the batch being launched (0: none yet)
        self.synced_after = 0  # the last batch completed by a successful synchronise

    def __call__(self) -> None:
        self._sync()
        surface_pending()  # an injected asynchronous error surfaces here, as a real one would
        self.synced_after = self.batch


def _quietly(sampler: Any, method: str, *args: Any) -> None:
    try:
        if sampler is not None:
            getattr(sampler, method)(*args)
    except Exception as exc:  # never a failed pass: recorded as the sampler's failure (R3.6)
        sampler.failure = f"sampler {method}() raised {type(exc).__name__}: {exc}"[:200]


def _telemetry(sampler: Any) -> dict | None:
    """The sampler's record; None on CPU (no sampler, or one with nothing to say)."""
    if sampler is None or not (sampler.observable or getattr(sampler, "reason", None)):
        return None
    try:
        return sampler.summary()
    except Exception as exc:
        return {"observable": False, "reason": f"summary failed: {exc!r:.120}", "flags": []}


def _where(exc: Exception, stage: str, number: int, total: int | str, track: SyncTracker) -> str:
    """Where the failure showed; an asynchronous device error names where it surfaced and the
    batches launched since the last good synchronisation, never "batch N"."""
    synchronised = stage in ("synchronisation", "writing predictions") and number > 0
    if stage == "timer start" and failure_kind(exc) == "device":  # a sticky error from before
        return (
            "the synchronisation at the timer's start, before batch 1 (a CUDA error surfaced "
            "there; CUDA reports errors asynchronously, so the failing kernel was launched "
            "before this pass, in earlier work of this process: the load or a warm-up pass; a "
            "rerun with CUDA_LAUNCH_BLOCKING=1 outside the schedule locates it)"
        )
    if failure_kind(exc) != "device" or not (stage == "forward" or synchronised):
        return f"batch {number} of {total}" if stage == "forward" else stage
    if os.environ.get("CUDA_LAUNCH_BLOCKING") == "1":  # every launch synchronous
        return (
            f"batch {number} of {total} (a CUDA error; CUDA_LAUNCH_BLOCKING=1 makes every "
            "launch synchronous, so the failing kernel is in this batch)"
        )
    first = track.synced_after + 1
    launched = f"batch {first}" if first >= number else f"batches {first}-{number}"
    if synchronised:
        where = f"the synchronisation after batch {number} of {total}"
    else:
        where = f"the launch of batch {number} of {total}"
    return (
        f"{where} (a CUDA error surfaced there; CUDA reports errors asynchronously, so the "
        f"failing kernel was launched in {launched}, since the last synchronisation; a rerun "
        "with CUDA_LAUNCH_BLOCKING=1 outside the schedule locates it)"
    )


def _failed(
    exc: Exception, probe: Any, run: _Pass, where: str, telemetry: dict | None
) -> PassResult:
    """The failed observation: elapsed empty, the memory readings taken so far (R5.8)."""
    tokenized = run.tokenized
    memory = readings_so_far(probe)
    if is_out_of_memory(exc):
        event = (
            f"R5.8 out of memory during {where}: failed observation, elapsed not recorded "
            "(never 0); memory readings taken so far kept"
        )
    else:
        event = (
            f"R3.6 {type(exc).__name__} during {where}: failed observation, elapsed not recorded"
        )
        kind = failure_kind(exc)
        if kind == "precision":  # no probe forward at load any more: this is where it shows
            event += "; an operator has no kernel for the declared precision on this device (R2.2)"
        elif kind == "architecture":
            event += "; the installed torch has no kernels for this GPU's architecture (R2.4)"
    return PassResult(
        elapsed_seconds=None,
        memory=memory,
        truncated_texts=None if tokenized is None else tokenized.truncated_texts,
        dropped_tokens=None if tokenized is None else tokenized.dropped_tokens,
        error=failure_text(exc),
        notes=(event,),
        out_of_memory=is_out_of_memory(exc),
        gpu_telemetry=telemetry,
        corpus_reread=run.reread,
    )

"""One scheduled run (load, then a cold or warm measured pass) in this fresh process -> run.json."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gpubench_nb.engine.environment import capture_environment, finish_environment
from gpubench_nb.engine.faults import FaultPlan
from gpubench_nb.engine.optimise import (
    finish_optimised,
    graphs_compiled,
    optimise_phase,
    thread_variables,
)
from gpubench_nb.engine.phases import LoadSpec, load_phase, run_notes, warmed_pass
from gpubench_nb.errors import ProtocolError
from gpubench_nb.kernel import MEASURE_STEP
from gpubench_nb.protocol.bundle import PREDICTIONS_NAME, run_dir
from gpubench_nb.protocol.clock import utc_now
from gpubench_nb.protocol.lock import require_frozen
from gpubench_nb.protocol.records import (
    MEASURED_PHASES,
    EnvironmentRecord,
    Phase,
    RunRecord,
    running_record,
    write_run,
)
from gpubench_nb.protocol.writer import bundle_writer


def _check_run(phase: str, run_index: int) -> None:
    """A schedulable phase and run index, or a ProtocolError (a declaration error: never a row)."""
    if phase not in MEASURED_PHASES:
        raise ProtocolError(
            f"phase {phase!r} is not one of {list(map(str, MEASURED_PHASES))}; load is timed "
            "inside every run and written as its own row",
            rule="R3.2",
        )
    if isinstance(run_index, bool) or not isinstance(run_index, int) or run_index < 1:
        raise ProtocolError(f"run_index must be an integer >= 1, got {run_index!r}", rule="R3.4")


def execute_run(
    experiment_path: Path | str,
    variant_id: str,
    phase: str,
    run_index: int,
    bundle_dir: Path | str,
) -> RunRecord:
    """Run one scheduled (variant, phase, run_index) here: load, the declared warm-up passes
    (``warm`` only), one measured pass (R3.2, R3.4); write its run.json. A failure (OOM, any
    exception) is observed: ``error`` set, elapsed empty, no predictions.jsonl (R3.6, R5.8).
    Only declaration errors raise: ``ProtocolError`` (the YAML, ids, GPUBENCH_FAULT, or a file
    unlike the lock, R1.3), ``CorpusError``, ``BundleError`` (another writer)."""
    with bundle_writer(bundle_dir, f"{MEASURE_STEP} {variant_id} {phase} {run_index}", step=True):
        return _execute_run(experiment_path, variant_id, phase, run_index, bundle_dir)


def _execute_run(
    experiment_path: Path | str, variant_id: str, phase: str, run_index: int, bundle_dir: Path | str
) -> RunRecord:
    from gpubench_nb.protocol.corpus import load_experiment_corpus
    from gpubench_nb.protocol.experiment import load_experiment

    started = utc_now()
    _check_run(phase, run_index)
    exp = load_experiment(experiment_path)
    settings = exp.variant(variant_id).settings
    thread_variables(settings.threads)  # before torch starts its thread pools (R2.1)
    plan = FaultPlan.from_env(variant=variant_id, phase=phase, run=run_index)
    corpus = load_experiment_corpus(exp, "eval")
    # R1.3: the declaration and the corpus read are the frozen ones, or nothing runs
    require_frozen(bundle_dir, exp, {"corpus_revision": corpus.revision}, step=MEASURE_STEP)
    warmups = exp.timing.warmup_iterations if phase == Phase.WARM else 0
    out = run_dir(bundle_dir, variant_id, phase, run_index)
    out.mkdir(parents=True, exist_ok=True)
    predictions = out / PREDICTIONS_NAME
    predictions.unlink(missing_ok=True)
    record = write_run(
        out,
        running_record(
            (variant_id, phase, run_index),
            settings,
            experiment_id=exp.experiment_id,
            scope=exp.timing.scope,
            warmups=warmups,
            corpus_revision=corpus.revision,
            started=started,
        ),
    )

    def refuse(fingerprints: dict[str, str]) -> None:
        """The files read must still be the frozen ones (R1.1, R1.3); otherwise run.json says
        the run was refused, its predictions are dropped, and it raises."""
        try:
            require_frozen(bundle_dir, exp, fingerprints, step=MEASURE_STEP)
        except ProtocolError as exc:
            predictions.unlink(missing_ok=True)
            refused = {"status": "refused", "error": str(exc), "notes": str(exc)}
            write_run(out, replace(record, **refused, finished_utc=utc_now()))
            raise

    loaded = load_phase(
        LoadSpec(exp.model, exp.tokenizer, exp.classes, settings),
        plan,
        lambda found: refuse({"model_revision": found[0], "tokenizer_revision": found[1]}),
    )
    # threads, attention, quantisation, compile: after the timed load, timed apart (R3.2)
    tuned = optimise_phase(loaded.backend, loaded.device, settings, corpus.texts)
    env = capture_environment(loaded.device, used=tuned.backend)
    result, scope, prompt = None, exp.timing.scope, exp.model.prompt
    compiled = graphs_compiled()  # graphs compiled in the warm-up and the pass are counted
    if tuned.backend is not None:
        result = warmed_pass(tuned.backend, corpus, settings, scope, predictions, plan, warmups)
    finished = finish_optimised(tuned.record, settings, phase, compiled, result)
    env = finish_environment(env)
    told = replace(  # the optimisations' sentences join the load's (R3.2: figures of their own)
        loaded,
        facts=(*loaded.facts, *tuned.facts, *finished.facts),
        events=(*loaded.events, *tuned.events),
    )
    notes = run_notes(scope, prompt, phase, warmups, told, result, plan.describe(), env)
    if result is not None and result.corpus_reread is not None:  # end_to_end read it again
        refuse({"corpus_revision": result.corpus_reread})
    passed = result.record() if result is not None else None
    return write_run(
        out,
        record.composed(
            loaded.record,
            tuned.record,
            finished.record,
            passed,
            generation=prompt.options() if prompt is not None else None,
            finished_utc=utc_now(),
            notes=notes,
            environment=EnvironmentRecord.from_dict(env),
        ),
    )

"""Locate an asynchronous CUDA error (it surfaces at a later synchronisation) in a diagnosis
rerun outside the schedule (R3.6): once, untimed, in a fresh process with CUDA_LAUNCH_BLOCKING=1,
no predictions, no row: ``diagnosis.json`` beside run.json. The process is
``python -m gpubench_nb.pipeline.diagnose EXPERIMENT VARIANT PHASE RUN_INDEX BUNDLE_DIR``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gpubench_nb.atomic import write_json_atomic
from gpubench_nb.engine.backends.device_errors import failure_kind
from gpubench_nb.engine.environment import utc_now
from gpubench_nb.protocol.bundle import DIAGNOSIS_NAME, run_dir

DIAGNOSIS_ENV = {"CUDA_LAUNCH_BLOCKING": "1"}
KIND = "diagnosis rerun: outside the schedule, untimed, not a row"
_TAG = "GPUBENCH_DIAGNOSIS "


def needs_diagnosis(error: str | None) -> bool:
    """A run's recorded error is a device (CUDA) error: asynchronous, so not located."""
    return bool(error) and failure_kind(RuntimeError(str(error))) == "device"


def diagnose_run(
    experiment_path: Path | str,
    variant_id: str,
    phase: str,
    run_index: int,
    bundle_dir: Path | str,
    *,
    timeout_seconds: int = 600,
) -> dict[str, Any]:
    """Rerun one failed run in a fresh process with CUDA_LAUNCH_BLOCKING=1, write and return
    its ``diagnosis.json``. A diagnosis that cannot run is recorded as such, never raised."""
    env = {**os.environ, **DIAGNOSIS_ENV}
    args = [str(experiment_path), variant_id, phase, str(run_index), str(bundle_dir)]
    command = [sys.executable, "-m", "gpubench_nb.pipeline.diagnose", *args]
    fields: dict[str, Any] = {"environment": dict(DIAGNOSIS_ENV), "started_utc": utc_now()}
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_seconds, env=env
        )
        found = [line for line in done.stdout.splitlines() if line.startswith(_TAG)]
        if found:
            fields.update(json.loads(found[-1][len(_TAG) :]))
        else:
            tail = " ".join(done.stderr.split())[-500:]
            fields.update(reproduced=None, error=f"diagnosis exited {done.returncode}: {tail}")
    except subprocess.TimeoutExpired:
        fields.update(reproduced=None, error=f"diagnosis timed out after {timeout_seconds} s")
    return _write(bundle_dir, variant_id, phase, run_index, **fields, finished_utc=utc_now())


def _write(
    bundle_dir: Path | str, variant_id: str, phase: str, run_index: int, **fields: Any
) -> dict[str, Any]:
    """Write and return a run's diagnosis.json: what it is, of which run, then ``fields``."""
    of_run = {"variant_id": variant_id, "phase": phase, "run_index": run_index}
    record = {"kind": KIND, "of_run": of_run, **fields}
    write_json_atomic(run_dir(bundle_dir, variant_id, phase, run_index) / DIAGNOSIS_NAME, record)
    return record


def diagnose_runs(
    experiment_path: Path | str,
    bundle_dir: Path | str,
    failed: Iterable[tuple[str, str, int, str]],
    budget_seconds: int,
    *,
    clock: Callable[[], float] = time.monotonic,
    diagnose: Callable[..., dict[str, Any]] = diagnose_run,
) -> list[dict[str, Any]]:
    """Diagnose the ``(variant, phase, run_index, error)`` runs with a device error within ONE
    budget (the run timeout): one rerun per (variant, phase, error), the repeats pointing to it;
    a run past the budget is recorded as not diagnosed, with the reason."""
    deadline, done, out = clock() + budget_seconds, {}, []
    for variant_id, phase, run_index, error in failed:
        if not needs_diagnosis(error):
            continue
        key, left = (variant_id, phase, error), int(deadline - clock())
        if key in done or left < 1:
            first = done.get(key) or {}
            spent = f"not diagnosed: the diagnosis budget of {budget_seconds} s was spent"
            record = _write(
                bundle_dir,
                variant_id,
                phase,
                run_index,
                reproduced=first.get("reproduced"),
                located=first.get("located"),
                same_as=first.get("of_run"),
                error=None if first else f"{spent} (one run timeout for all failed runs)",
            )
        else:
            record = done[key] = diagnose(
                experiment_path, variant_id, phase, run_index, bundle_dir, timeout_seconds=left
            )
        out.append(record)
    return out


def _rerun(experiment_path: str, variant_id: str, phase: str, run_index: int, bundle: str) -> dict:
    """In the diagnosis process: the frozen declaration and files, the run's passes, untimed."""
    from gpubench_nb.engine.backends import fingerprints_for, load_backend
    from gpubench_nb.engine.clocks import ClockSampler  # none: nothing of it is kept
    from gpubench_nb.engine.faults import FaultPlan
    from gpubench_nb.engine.measure import measure_pass
    from gpubench_nb.protocol.corpus import load_experiment_corpus
    from gpubench_nb.protocol.experiment import load_experiment
    from gpubench_nb.protocol.lock import require_frozen

    exp = load_experiment(experiment_path)
    settings = exp.variant(variant_id).settings
    corpus = load_experiment_corpus(exp, "eval")
    revisions = fingerprints_for(exp.model, exp.tokenizer)
    fingerprints = dict(zip(("model_revision", "tokenizer_revision"), revisions, strict=True))
    fingerprints["corpus_revision"] = corpus.revision
    require_frozen(bundle, exp, fingerprints, step="diagnosis")  # R1.3: what the run ran
    plan = FaultPlan.from_env(variant=variant_id, phase=phase, run=run_index)
    backend = load_backend(
        exp.model,
        exp.tokenizer,
        classes=exp.classes,
        device=settings.device,
        precision=settings.precision,
        revisions=revisions,
    )
    passes = ["warmup"] * (exp.timing.warmup_iterations if phase == "warm" else 0) + ["measured"]
    for number, kind in enumerate(passes, 1):
        result = measure_pass(
            backend,
            corpus,
            settings,
            exp.timing.scope,
            None,
            faults=plan,
            pass_kind=kind,
            sampler=ClockSampler(None, None),
        )
        if not result.ok:
            return {
                "reproduced": True,
                "pass": f"{kind} pass {number} of {len(passes)}",
                "error": result.error,
                "located": result.notes[0] if result.notes else None,
            }
    return {"reproduced": False, "pass": None, "error": None, "located": None}


def main(argv: list[str] | None = None) -> int:
    experiment_path, variant_id, phase, run_index, bundle = sys.argv[1:] if argv is None else argv
    out = _rerun(experiment_path, variant_id, phase, int(run_index), bundle)
    print(_TAG + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

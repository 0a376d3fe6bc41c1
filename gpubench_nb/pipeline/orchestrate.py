"""papermill orchestration: an experiment YAML to an accepted, audited bundle (R3.2, R3.4, R3.7).

Each scheduled run gets a fresh kernel (a cold run is a real first pass, isolated from the others);
the CSV is the ledger of what is done: a rerun skips every run that already has its rows."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpubench_nb import errors
from gpubench_nb.engine.faults import check_fault_spec
from gpubench_nb.errors import BundleError, GpubenchError, ResultsError
from gpubench_nb.kernel import (
    ECONOMICS_STEP,
    ENVIRONMENT_STEP,
    MEASURE_STEP,
    QUALITY_STEP,
    notebook_path,
    papermill_module,
    papermill_options,
)
from gpubench_nb.pipeline import guard
from gpubench_nb.pipeline.diagnose import diagnose_runs
from gpubench_nb.pipeline.interrupt import (
    Interrupted,
    interruption_note,
    read_interruptions,
    record_interruption,
)
from gpubench_nb.pipeline.observations import rows_for_run
from gpubench_nb.pipeline.schedule import ScheduledRun, draw_schedule
from gpubench_nb.protocol import bundle as layout
from gpubench_nb.protocol.corpus import Corpus, load_declared_corpora, write_expected_ids
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.experiment_spec import Experiment
from gpubench_nb.protocol.lock import freeze, read_given_lock
from gpubench_nb.protocol.records import (
    MEASURED_PHASES,
    RunRecord,
    ScheduledEntry,
    ScheduleRecord,
    read_run,
)
from gpubench_nb.protocol.results import append_rows, read_rows, repair_torn_tail
from gpubench_nb.protocol.status import RunStatus, ScheduleStatus

DEFAULT_RUN_TIMEOUT_SECONDS = 1800
KERNEL_LOG = "logs/kernels.stderr.log"


@dataclass(frozen=True)
class PipelineResult:
    bundle_dir: Path
    rows: list[dict[str, Any]]
    report_path: Path | None


@contextmanager
def kernel_stderr_into(log_path: Path) -> Iterator[None]:
    """Send what kernels print on stderr (fd 2, which they inherit) to the bundle's log (R3.6)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    with open(log_path, "ab") as log:
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def execute_notebook(name: str, output: Path, parameters: dict[str, Any], timeout: int) -> None:
    """Run one notebook in a fresh kernel with papermill; the executed copy is kept (R5.6)."""
    papermill = papermill_module()
    output.parent.mkdir(parents=True, exist_ok=True)
    with kernel_stderr_into(Path(parameters["bundle_dir"]) / KERNEL_LOG):
        try:
            papermill.execute_notebook(
                str(notebook_path(name)),
                str(output),
                parameters=parameters,
                kernel_name="python3",
                execution_timeout=timeout,
                progress_bar=False,
                cwd=str(Path.cwd()),  # never the installed package's folder
                **papermill_options(),  # IPC transport: no TCP warning from ipykernel
            )
        except papermill.PapermillExecutionError as exc:
            raise refusal_from_kernel(exc) or exc from None


def refusal_from_kernel(exc: Exception) -> GpubenchError | None:
    """The GpubenchError a kernel raised (R1.3, R5.6), or a full disk, as the same error here
    (exit 2, no notebook traceback); None for any other failure (an observation, R3.6)."""
    refused = getattr(errors, str(getattr(exc, "ename", "")), None)
    if isinstance(refused, type) and issubclass(refused, GpubenchError):
        return refused(str(getattr(exc, "evalue", exc)))
    full = _DISK_FULL_IN_KERNEL.match(str(getattr(exc, "evalue", "")))
    if getattr(exc, "ename", None) in _OS_ERRORS and full:  # no row: the rerun redoes it
        where = full.group("path") or "a file of the run"
        return errors.storage_error(OSError(int(full.group("errno")), full.group("why")), where)
    return None


_OS_ERRORS = ("OSError", "IOError", "StorageError")
_DISK_FULL_IN_KERNEL = re.compile(
    r"^\[Errno (?P<errno>28|27|122)\] (?P<why>[^:]+)(?::\s*'(?P<path>[^']*)')?"
)


def prepare_bundle(
    experiment: Experiment, bundle_dir: Path, given_lock: dict[str, Any] | None = None
) -> tuple[Corpus, dict[str, str]]:
    """Validate the corpora (R1.4), build the preset model, freeze the protocol (R1.3), with
    ``given_lock`` verbatim (``run --protocol``) when this machine matches it."""
    from gpubench_nb.engine.backends import backend_entry, build_model, fingerprints_for
    from gpubench_nb.engine.backends.model_check import check_declared_model
    from gpubench_nb.engine.backends.onnx_runtime import export_for
    from gpubench_nb.engine.optimise import refuse_unrunnable

    refuse_unrunnable(experiment)  # nothing frozen for settings this machine cannot run (R2.1)
    corpus, others = load_declared_corpora(experiment)
    check_fault_spec(experiment, len(corpus.ids))  # a fault that can never fire: refused (R3.6)
    if backend_entry(experiment.model.backend).preset:  # the user brings the others' folders
        build_model(experiment)
    else:  # validate's checks of a brought folder (pad id, prompt tokens), at the terminal
        check_declared_model(experiment)
    fingerprints = {"corpus_revision": corpus.revision}
    found = fingerprints_for(experiment.model, experiment.tokenizer)
    fingerprints.update(zip(("model_revision", "tokenizer_revision"), found, strict=True))
    fingerprints.update((f"{split}_revision", other.revision) for split, other in others.items())
    bundle_dir.mkdir(parents=True, exist_ok=True)
    fingerprints.update(export_for(experiment, bundle_dir, corpus.texts))  # onnxruntime's graphs
    freeze(bundle_dir, experiment, fingerprints, given=given_lock, corpus_identity=corpus.identity)
    kept = bundle_dir / "protocol"
    if not kept.exists():  # the filled-in protocol and the gold corpus travel with the bundle
        kept.mkdir()
        # the content only: a copy gets a new file's mode (0666 & ~umask), as every bundle file
        shutil.copyfile(experiment.source, kept / "experiment.yaml")
        shutil.copyfile(experiment.corpus.path, kept / f"corpus{experiment.corpus.path.suffix}")
    expected = bundle_dir / layout.EXPECTED_IDS_NAME
    if not expected.exists():
        write_expected_ids(corpus, expected)
    return corpus, fingerprints


def _done_keys(bundle_dir: Path) -> set[str]:
    """The keys of the runs that have their rows in the CSV (the ledger of what is done)."""
    csv_path = bundle_dir / layout.CSV_NAME
    rows = read_rows(csv_path) if csv_path.exists() else []
    return {
        f"{r['variant_id']}/{r['phase']}-{r['run_index']}"
        for r in rows
        if r["phase"] in MEASURED_PHASES
    }


def _read_record(bundle_dir: Path, run: ScheduledRun) -> RunRecord:
    """The run's run.json, else (none, unreadable) an empty record: the row says so (R3.6)."""
    folder = layout.run_dir(bundle_dir, run.variant_id, run.phase, run.run_index)
    try:
        return read_run(folder) or RunRecord()
    except BundleError:
        return RunRecord()


def kernel_failure(exc: Exception, timeout: int, where: Path) -> str:
    """A kernel's failure (a timeout, a dead or silent kernel) said; a full disk is refused."""
    if errors.disk_full(exc):
        raise errors.storage_error(exc, exc.filename2 or exc.filename or where) from None
    if isinstance(exc, TimeoutError):  # nbclient's CellTimeoutError
        return f"the kernel did not finish within --run-timeout {timeout} s"
    last_line = (str(exc).strip().splitlines() or [""])[-1]
    return f"kernel run failed: {type(exc).__name__}: {last_line}"


def write_schedule(bundle_dir: Path, experiment: Experiment, runs: list[ScheduledRun]) -> None:
    """``schedule.json``: the drawn order, each run's status and the PID it ran in (R3.7)."""
    done = _done_keys(bundle_dir)
    interrupted = Counter(str(event.get("run")) for event in read_interruptions(bundle_dir))
    entries = []
    for run in runs:
        record = _read_record(bundle_dir, run) if run.key in done else RunRecord()
        entries.append(
            ScheduledEntry(
                **asdict(run),
                status=ScheduleStatus.DONE if run.key in done else ScheduleStatus.PENDING,
                pid=record.pid,
                error=record.error,
                interrupted=interrupted.get(run.key),
            )
        )
    timing = {key: getattr(experiment.timing, key) for key in ("order", "order_seed", "repeats")}
    schedule = ScheduleRecord(experiment_id=experiment.experiment_id, **timing, runs=tuple(entries))
    ScheduleRecord.write(bundle_dir, schedule)  # a new record each time, never edited in place


def run_one(
    experiment: Experiment,
    bundle_dir: Path,
    fingerprints: dict[str, str],
    run: ScheduledRun,
    timeout: int,
) -> list[dict[str, Any]]:
    """Execute one scheduled run in a fresh kernel and append its rows at once (R3.6)."""
    folder = layout.run_dir(bundle_dir, run.variant_id, run.phase, run.run_index)
    shutil.rmtree(folder, ignore_errors=True)  # leftovers of an interrupted attempt
    output = bundle_dir / "notebooks" / MEASURE_STEP / f"{run.key.replace('/', '-')}.ipynb"
    params = {"experiment": str(experiment.source), "bundle_dir": str(bundle_dir)}
    params |= {key: getattr(run, key) for key in ("variant_id", "phase", "run_index")}
    failure = None
    try:
        execute_notebook(f"{MEASURE_STEP}.ipynb", output, params, timeout)
    except GpubenchError:  # a refusal (R1.3, R5.6) stops the schedule; it is not a row
        raise
    except Exception as exc:  # a dead kernel, a timeout or a cell error is an observation
        failure = kernel_failure(exc, timeout, folder)  # ... but a full disk is not
    record = _read_record(bundle_dir, run)
    if failure and record.error and record.status != RunStatus.RUNNING:
        failure = None  # the run recorded its own failure; don't say it twice
    rows = rows_for_run(experiment, fingerprints, run, record, failure)
    # R3.6: earlier attempts stopped by a signal were discarded; this row says so
    note = interruption_note([e for e in read_interruptions(bundle_dir) if e.get("run") == run.key])
    for row in rows if note else ():
        row["notes"] = f"{row['notes']} | {note}" if row["notes"] else note
    append_rows(bundle_dir / layout.CSV_NAME, rows)
    return rows


def run_experiment(
    experiment_path: str | Path,
    *,
    output_dir: str | Path = "outputs",
    variants: list[str] | None = None,
    fresh: bool = False,
    run_timeout_seconds: int = DEFAULT_RUN_TIMEOUT_SECONDS,
    on_progress: Callable[[ScheduledRun, int, int], None] = lambda run, number, total: None,
    protocol: str | Path | None = None,
    bundle_dir: str | Path | None = None,
    pricing: dict[str, Any] | None = None,
) -> PipelineResult:
    """The whole chain, resumable: freeze, environment, schedule, quality, economics, report;
    refusals raise a ``GpubenchError``. ``on_progress(run, number, total)``: before each run and
    after it with ``number + 1``. ``protocol``: a frozen lock this machine must match (R1.3);
    ``bundle_dir`` replaces ``<output_dir>/<experiment_id>``; ``pricing`` the unfrozen section."""
    check_fault_spec()  # before the first kernel (each kernel would refuse it: a failed row)
    experiment = load_experiment(experiment_path)
    for variant_id in variants or []:
        experiment.variant(variant_id)  # unknown ids fail before anything runs
    given_lock = read_given_lock(protocol) if protocol is not None else None
    if bundle_dir is not None:
        bundle_dir = Path(bundle_dir).resolve()
    else:
        bundle_dir = Path(output_dir).resolve() / experiment.experiment_id
    # R5.6: one writer, no bundle inside a bundle, no re-seal over changed files, pricing valid
    with guard.writing(experiment, bundle_dir, fresh=fresh):
        _, fingerprints = prepare_bundle(experiment, bundle_dir, given_lock)
        params = {"experiment": str(experiment.source), "bundle_dir": str(bundle_dir)}

        def step(name: str, **extra: Any) -> None:
            output = bundle_dir / "notebooks" / f"{name}.ipynb"
            try:
                execute_notebook(f"{name}.ipynb", output, {**params, **extra}, run_timeout_seconds)
            except GpubenchError:
                raise
            except Exception as exc:  # a timeout, a dead kernel: a sentence, not a traceback
                raise BundleError(
                    f"{name}: {kernel_failure(exc, run_timeout_seconds, output)}; see {output} "
                    f"and {KERNEL_LOG}. Fix: rerun the same command (finished runs are kept), "
                    "with a larger --run-timeout if it timed out",
                    rule="R3.6",
                ) from None

        if not (bundle_dir / layout.ENVIRONMENT_NAME).exists():
            step(ENVIRONMENT_STEP)
        csv_path = bundle_dir / layout.CSV_NAME
        if csv_path.exists():
            repair_torn_tail(csv_path)  # a kill -9 mid-append leaves at most one torn line
        schedule = draw_schedule(experiment)
        done = _done_keys(bundle_dir)
        wanted = set(variants or (variant.id for variant in experiment.variants))
        todo = [run for run in schedule if run.key not in done and run.variant_id in wanted]
        with guard.resealing(bundle_dir, adds_runs=bool(todo)):
            _run_schedule(
                experiment, bundle_dir, fingerprints, schedule, todo, run_timeout_seconds,
                on_progress,
            )  # fmt: skip
            failed = [
                (run.variant_id, run.phase, run.run_index, _read_record(bundle_dir, run).error)
                for run in todo
            ]  # those with a device error are rerun to locate it (pipeline.diagnose)
            diagnose_runs(experiment.source, bundle_dir, failed, run_timeout_seconds)
            step(QUALITY_STEP)
            step(ECONOMICS_STEP, **({"pricing": pricing} if pricing is not None else {}))
            report_path = _render_report(bundle_dir)
            layout.write_manifest(bundle_dir)
        return PipelineResult(bundle_dir, read_rows(csv_path), report_path)


def _run_schedule(
    experiment: Experiment,
    bundle_dir: Path,
    fingerprints: dict[str, str],
    schedule: list[ScheduledRun],
    todo: list[ScheduledRun],
    run_timeout_seconds: int,
    on_progress: Callable[[ScheduledRun, int, int], None],
) -> None:
    """Each run still to do, in the drawn order, each in its own kernel (R3.4, R3.7); the
    schedule file rewritten after each. A signal leaves no row and is recorded (R3.6)."""
    write_schedule(bundle_dir, experiment, schedule)
    for number, run in enumerate(todo, start=1):
        on_progress(run, number, len(todo))
        try:
            run_one(experiment, bundle_dir, fingerprints, run, run_timeout_seconds)
        except KeyboardInterrupt as caught:  # a signal or Ctrl-C: no row, recorded, redone (R3.6)
            done: set[str] = set()
            with suppress(ResultsError):  # a torn tail the resume repairs
                done = _done_keys(bundle_dir)
            stop = caught if isinstance(caught, Interrupted) else Interrupted(signal.SIGINT.name)
            keys = [r.key for r in schedule]
            record_interruption(bundle_dir, run.key, stop, schedule=keys, done=done)
            with suppress(ResultsError):
                write_schedule(bundle_dir, experiment, schedule)
            if stop is caught:
                raise
            raise stop from None
        write_schedule(bundle_dir, experiment, schedule)
        on_progress(run, number + 1, len(todo))  # `number` runs are finished


def _render_report(bundle_dir: Path) -> Path | None:
    from gpubench_nb.report.render import render_report

    with kernel_stderr_into(bundle_dir / KERNEL_LOG):
        return render_report([bundle_dir], bundle_dir / layout.REPORT_NAME)

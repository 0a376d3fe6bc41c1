"""`campaign run`: freeze once, one submitit job per target, each into its own bundle (R1.3);
Slurm targets all at once, local ones one after the other (one machine); a rerun resumes."""

from __future__ import annotations

import fcntl
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench_nb.engine.faults import check_fault_spec
from gpubench_nb.errors import GpubenchError, ProtocolError
from gpubench_nb.pipeline.campaign.file import Campaign, Target, load_campaign
from gpubench_nb.pipeline.campaign.slurm import (
    ENDED,
    JobState,
    ended_without_result,
    job_state,
    node_reason,
)
from gpubench_nb.pipeline.campaign.state import (
    JOBS_DIR,
    bundle_progress,
    campaign_dir_for,
    frozen_dir_for,
    read_state,
    record_attempt,
    write_state,
)
from gpubench_nb.pipeline.interrupt import read_interruptions
from gpubench_nb.pipeline.orchestrate import DEFAULT_RUN_TIMEOUT_SECONDS, prepare_bundle
from gpubench_nb.protocol.clock import utc_now
from gpubench_nb.protocol.lock import LOCK_NAME, read_lock
from gpubench_nb.protocol.outputs import check_output_folder

GUARD_NAME = ".campaign-run.lock"


@dataclass(frozen=True)
class CampaignResult:
    campaign_dir: Path
    states: dict[str, str]  # target id -> state
    report_path: Path | None

    @property
    def failed(self) -> bool:
        """Whether any target failed (a later `campaign run` resumes it)."""
        return any(state == "failed" for state in self.states.values())

    def states_text(self) -> str:
        """One ``target: state`` line per target, with its bundle's absolute path."""
        return "".join(
            f"{target}: {state}  bundle {self.campaign_dir / target}\n"
            for target, state in self.states.items()
        )


@contextmanager
def _one_runner(campaign_dir: Path) -> Iterator[None]:
    """One `campaign run` at a time per campaign: a second would submit every job twice."""
    path = campaign_dir / GUARD_NAME
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise GpubenchError(
                f"{path}: another `campaign run` of this campaign is in progress; wait for it "
                "(`gpubench-nb campaign status` shows it) or stop it first"
            ) from None
        yield


def run_campaign(
    path: str | Path,
    *,
    output_dir: str | Path = "outputs",
    targets: list[str] | None = None,
    resubmit: list[str] | None = None,
    local_executor: str = "local",
    wait: bool = True,
    run_timeout_seconds: int = DEFAULT_RUN_TIMEOUT_SECONDS,
    poll_seconds: float = 2.0,
    echo: Callable[[str], None] = print,
) -> CampaignResult:
    """Submit what is missing, wait for it (unless ``wait`` is false), record every outcome;
    ``resubmit``: targets whose recorded job is gone though the job engine cannot say so."""
    check_fault_spec()  # the jobs inherit it: refused here, not in every job
    campaign = load_campaign(path)
    chosen = [campaign.target(t) for t in targets] if targets else list(campaign.targets)
    forced = {campaign.target(t).id for t in resubmit or []}
    try:
        from gpubench_nb.pipeline.campaign import jobs
    except ImportError as exc:
        raise GpubenchError(
            f"campaigns submit their jobs with submitit, which is not installed ({exc}). Fix: "
            "pip install 'gpubench-nb[slurm]' (or pip install 'submitit>=1.5')"
        ) from None
    campaign_dir = campaign_dir_for(Path(output_dir), campaign.campaign_id)
    # The one output guard (R5.6), for --output-dir and the campaign's own folder
    check_output_folder(Path(output_dir), option="--output-dir")
    check_output_folder(
        campaign_dir,
        option=f"the folder of campaign_id {campaign.campaign_id!r},",
        inputs=[campaign.source, campaign.experiment_path],
        instead=f"declare a campaign_id that names no bundle in {campaign_dir.parent}, or pass "
        "another --output-dir",
    )
    campaign_dir.mkdir(parents=True, exist_ok=True)
    frozen = frozen_dir_for(campaign_dir)
    with _one_runner(campaign_dir):
        try:  # the protocol frozen once for every target, or the frozen one checked (R1.1, R1.3)
            prepare_bundle(campaign.experiment, frozen)
        except ProtocolError as exc:
            raise ProtocolError(
                f"{exc}\nThis campaign froze its protocol in {frozen / LOCK_NAME}; every "
                "target must run it. Restore the experiment, or declare a new campaign_id"
            ) from None
        lock = read_lock(frozen)
        runner = _Runner(campaign, campaign_dir, lock.sha256 or "", jobs, local_executor, echo)
        runner.state.update(
            campaign_id=campaign.campaign_id,
            campaign_file=str(campaign.source),
            experiment=str(campaign.experiment_path),
            lock=str(frozen / LOCK_NAME),
            lock_sha256=lock.sha256 or "",
        )
        todo = [t for t in chosen if runner.needs_job(t, force=t.id in forced)]
        runner.save()
        for target in (t for t in todo if t.reach == "slurm"):
            runner.submit(target, run_timeout_seconds)
        for target in (t for t in chosen if t.reach == "local"):
            runner.wait_local_leftover(target, poll_seconds)
        for target in (t for t in todo if t.reach == "local"):
            runner.submit(target, run_timeout_seconds)
            runner.wait(target, poll_seconds)
        if wait:
            for target in (t for t in chosen if t.reach == "slurm"):
                runner.wait(target, poll_seconds)
        states = {t.id: runner.entry(t)["state"] for t in campaign.targets}
    report = None
    if all(state == "completed" for state in states.values()):
        from gpubench_nb.pipeline.campaign.view import campaign_report

        report = campaign_report(path, output_dir=output_dir)
        echo(f"every target completed; merged report: {report}")
    return CampaignResult(campaign_dir, states, report)


@dataclass
class _Runner:
    """The state of one `campaign run`: submits, waits, and records into campaign.json."""

    campaign: Campaign
    dir: Path
    lock_sha256: str
    jobs: Any
    local_executor: str
    echo: Callable[[str], None]
    live: dict[str, Any] = field(default_factory=dict)  # target id -> this process's job

    def __post_init__(self) -> None:
        self.state = read_state(self.dir)
        self.state.setdefault("targets", {})

    def save(self) -> None:
        write_state(self.dir, self.state)

    def entry(self, target: Target) -> dict[str, Any]:
        entry = self.state["targets"].setdefault(target.id, {"state": "pending"})
        entry["reach"] = target.reach
        entry["bundle"] = str(self.dir / target.id)
        return entry

    def folder(self, target: Target) -> Path:
        return self.dir / JOBS_DIR / target.id

    def needs_job(self, target: Target, force: bool = False) -> bool:
        """Reconcile the recorded state with the bundle and the job engine; True: submit."""
        entry = self.entry(target)
        progress = bundle_progress(self.dir / target.id)
        if progress.complete(self.lock_sha256) and (
            # a new offer re-prices the bundle (no run is redone); how it is reached is moot now
            target.reach == "manual" or entry.get("priced_with") == target.offer.pricing()
        ):
            if entry["state"] != "completed":
                entry.update(state="completed", error=None, finished_utc=utc_now())
                entry["priced_with"] = target.offer.pricing()
            return False
        if target.reach == "manual":
            entry["state"] = "manual"
            self.echo(_manual_instructions(self.campaign, target, self.dir))
            return False
        if entry["state"] in ("submitted", "running") and entry.get("job_id") and not force:
            return not self._still_live(target, entry)
        return True

    def _still_live(self, target: Target, entry: dict[str, Any]) -> bool:
        outcome, slurm, alive = self.jobs.job_now(self.folder(target), entry)
        if outcome is not None:
            self._finish(target, outcome)
            return entry["state"] == "completed"
        if slurm is not None:
            entry["slurm_state"] = slurm.describe()
        if alive:  # left running by a killed `campaign run`, or UNKNOWN: never submit twice
            self.echo(f"{target.id}: job {entry['job_id']}: {entry.get('slurm_state', 'running')}")
            return True
        self._settle(target, entry["job_id"], slurm)
        return False

    def _settle(self, target: Target, job_id: str, slurm: JobState | None = None) -> None:
        """Record the job's result file, or (gone without one) Slurm's state and .err tail."""
        outcome = self.jobs.read_outcome(self.folder(target), job_id)
        if outcome is not None:
            return self._finish(target, outcome)
        self._fail(target, ended_without_result(self.entry(target), slurm))

    def submit(self, target: Target, run_timeout_seconds: int) -> None:
        entry = self.entry(target)
        record_attempt(entry)
        executor_kind = "slurm" if target.reach == "slurm" else self.local_executor
        job = self.jobs.TargetJob(
            str(self.campaign.experiment_path),
            str(frozen_dir_for(self.dir) / LOCK_NAME),
            str(self.dir / target.id),
            target.offer.pricing(),
            run_timeout_seconds,
            target.gpus,
        )
        entry.update(
            target=target.describe(),
            executor=executor_kind,
            submitted_utc=utc_now(),
            finished_utc=None,
            error=None,
            attempts=int(entry.get("attempts") or 0) + 1,
        )
        try:
            executor = self.jobs.executor_for(target, self.folder(target), self.local_executor)
            submitted = executor.submit(job)
        except Exception as exc:  # sbatch refused it, no srun here, a bad partition ...
            entry.update(job_id=None, logs=None)
            return self._fail(target, f"submission failed: {type(exc).__name__}: {exc}".strip())
        entry.update(job_id=str(submitted.job_id), state="submitted")
        paths = self.jobs.job_paths(self.folder(target), submitted.job_id)
        if executor_kind != "debug":
            entry["logs"] = {"stdout": str(paths.stdout), "stderr": str(paths.stderr)}
        if executor_kind == "slurm":
            entry["sbatch_script"] = str(paths.submission_file)
        self.live[target.id] = submitted
        self.echo(f"{target.id}: submitted job {submitted.job_id} ({executor_kind})")
        self.save()

    def wait_local_leftover(self, target: Target, poll_seconds: float) -> None:
        """Wait for a local job left running by a killed `campaign run` before starting more."""
        entry = self.entry(target)
        if entry["state"] not in ("submitted", "running") or target.id in self.live:
            return
        self.echo(f"{target.id}: waiting for job {entry['job_id']} left by an earlier run")
        while self.jobs.process_alive(int(entry["job_id"])):
            time.sleep(poll_seconds)
        self._settle(target, entry["job_id"])

    def wait(self, target: Target, poll_seconds: float) -> None:
        """Wait for this target's job of this run, then record how it ended."""
        entry = self.entry(target)
        job = self.live.get(target.id)
        if entry["state"] not in ("submitted", "running"):
            return
        if job is None and entry.get("executor") == "slurm":  # submitted by an earlier run
            job = self.jobs.submitit.SlurmJob(folder=self.folder(target), job_id=entry["job_id"])
        if job is None:
            return
        if entry["executor"] == "debug":
            return self._finish(target, self._run_debug(job))
        entry["state"] = "running" if entry["executor"] == "local" else entry["state"]
        self.save()
        slurm = None
        try:
            if entry["executor"] == "slurm":
                slurm = self._wait_slurm(target, str(job.job_id), poll_seconds)
            else:
                while not job.done():
                    time.sleep(poll_seconds)
        except KeyboardInterrupt:
            if entry["executor"] == "slurm":  # stop waiting only: the cluster job goes on
                self.save()
                raise
            job.cancel(check=False)
            self._fail(target, "interrupted (Ctrl-C); run `campaign run` again to resume")
            raise
        self._settle(target, job.job_id, slurm)

    def _wait_slurm(self, target: Target, job_id: str, poll_seconds: float) -> JobState | None:
        """Poll (one job_state query each) until the result file appears (None) or Slurm says
        the job is over, even without accounting."""
        entry = self.entry(target)
        while self.jobs.read_outcome(self.folder(target), job_id) is None:
            slurm = job_state(job_id)
            if slurm.restarts > int(entry.get("restarts") or 0):  # requeued: say where it was
                where = node_reason(entry.get("node"))
                entry.update(restarts=slurm.restarts, requeued=f"requeued by Slurm after {where}")
                self.echo(f"{target.id}: job {job_id} {entry['requeued']}")
            entry["node"] = slurm.node or entry.get("node")
            if entry.get("slurm_state") != slurm.describe():  # said once per change, not per poll
                entry["slurm_state"] = slurm.describe()
                self.echo(f"{target.id}: job {job_id}: {entry['slurm_state']}")
                self.save()
            if not slurm.live:
                # a job that ended well may show its result file a moment later (shared disk)
                for _ in range(3 if slurm.state in ("COMPLETED", ENDED) else 0):
                    if self.jobs.read_outcome(self.folder(target), job_id) is not None:
                        return None
                    time.sleep(min(poll_seconds, 1.0))
                return slurm
            time.sleep(poll_seconds)
        return None

    def _run_debug(self, job: Any) -> Any:
        """submitit's debug executor runs the job here, now; exception() avoids its pdb."""
        error = job.exception()
        if error is None:
            return self.jobs.Outcome(ok=True, result=job.result())
        trace = "".join(traceback.format_exception(error))
        return self.jobs.Outcome(ok=False, error=str(error), trace=trace)

    def _finish(self, target: Target, outcome: Any) -> None:
        if not outcome.ok:
            return self._fail(target, outcome.error or "the job failed")
        progress = bundle_progress(self.dir / target.id)
        if not progress.complete(self.lock_sha256):
            return self._fail(target, f"the job returned but its bundle is incomplete: {progress}")
        entry = self.entry(target)
        entry.update(state="completed", error=None, finished_utc=utc_now())
        entry["priced_with"] = target.offer.pricing()
        entry.pop("slurm_state", None)  # a last "RUNNING" seen while waiting says nothing now
        self._note_interruptions(target)
        self.echo(f"{target.id}: completed ({progress.runs_done} runs), bundle {entry['bundle']}")
        self.save()

    def _note_interruptions(self, target: Target) -> list[dict[str, Any]]:
        """The bundle's interruptions during this job (R3.6), copied into campaign.json."""
        entry = self.entry(target)
        since = entry.get("submitted_utc") or ""
        found = [
            event
            for event in read_interruptions(self.dir / target.id)
            if str(event.get("utc") or "") >= since
            and (entry.get("executor") != "slurm" or event.get("slurm_job_id") == entry["job_id"])
        ]
        entry.pop("interruptions", None)
        if found:
            entry["interruptions"] = found
        return found

    def _fail(self, target: Target, error: str) -> None:
        entry = self.entry(target)
        if entry.get("job_id") and (events := self._note_interruptions(target)):
            what = "; ".join(
                f"{e.get('signal')} during {e.get('run') or 'a notebook step'}" for e in events
            )
            error = (
                f"interrupted ({what}): an interrupted run is discarded (not an "
                f"observation, R3.6) and redone on resume; {error}"
            )
        entry.update(state="failed", error=error, finished_utc=utc_now())
        logs = entry.get("logs") or {}
        where = f"; log: {logs.get('stderr')}" if logs else ""
        self.echo(f"{target.id}: FAILED: {error.splitlines()[0] if error else ''}{where}")
        self.save()


def _manual_instructions(campaign: Campaign, target: Target, campaign_dir: Path) -> str:
    host = target.host or "the rented machine"
    return (
        f"{target.id}: manual target; on {host}, with the same experiment files and "
        f"{frozen_dir_for(campaign_dir) / LOCK_NAME} copied there, run\n"
        f"    gpubench-nb run {campaign.experiment_path.name} --protocol protocol.lock.json\n"
        f"  (its pricing section is not frozen: set it to this target's offer, "
        f"{target.offer.offer}, {target.offer.days} days x {target.offer.lots} lot(s))\n"
        f"  then copy the bundle back: rsync -a <box>:outputs/"
        f"{campaign.experiment.experiment_id}/ {campaign_dir / target.id}/"
    )

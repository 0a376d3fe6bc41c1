"""campaign.json (per target: the current job and the earlier attempts, kept with their logs,
R3.6) and how far each target's bundle is, read from the bundle itself, never from the job."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench_nb.errors import GpubenchError
from gpubench_nb.protocol import bundle as layout
from gpubench_nb.protocol.clock import utc_now
from gpubench_nb.protocol.lock import LockRecord
from gpubench_nb.protocol.records import R, Record, ScheduleRecord

STATE_NAME = "campaign.json"
JOBS_DIR = "jobs"


def campaign_dir_for(output_dir: Path, campaign_id: str) -> Path:
    """``<output_dir>/<campaign_id>``: the lock, campaign.json, jobs/ and one bundle per target."""
    return Path(output_dir).resolve() / campaign_id


def frozen_dir_for(campaign_dir: Path) -> Path:
    """``<campaign>/frozen``: the campaign's protocol.lock.json, kept experiment and corpus."""
    return Path(campaign_dir) / layout.CAMPAIGN_FROZEN_DIR


@dataclass(frozen=True, kw_only=True)
class CampaignState(Record):
    """``campaign.json``: per target, the current job and the earlier attempts (R3.6)."""

    NAME = STATE_NAME
    RULE = "R3.6"
    FIX = "restore it, or move it aside: `campaign run` rebuilds it from the bundles"
    targets: Mapping[str, Any] = field(default_factory=dict)
    updated_utc: str | None = None


def read_state(campaign_dir: Path) -> dict[str, Any]:
    """campaign.json's data as the runner works on it ({"targets": {}} before the first)."""
    state = CampaignState.read(campaign_dir) or CampaignState()
    return {**state.to_dict(), "targets": dict(state.targets)}


def write_state(campaign_dir: Path, state: dict[str, Any]) -> None:
    """A new campaign.json, validated and written whole (atomic), stamped with the time."""
    CampaignState.write(campaign_dir, {**state, "updated_utc": utc_now()})


@dataclass(frozen=True)
class Progress:
    """How far one target's bundle is: runs done of the schedule, sealed, same lock."""

    runs_done: int
    runs_total: int | None  # None: no schedule yet
    sealed: bool  # MANIFEST.sha256 written (the pipeline finished once)
    lock_sha256: str | None

    def complete(self, campaign_sha256: str) -> bool:
        done = self.runs_done == self.runs_total  # never with no schedule (None)
        return self.sealed and done and self.lock_sha256 == campaign_sha256


def bundle_progress(bundle_dir: Path) -> Progress:
    """An unreadable schedule or lock reads as absent: check-bundle names what is wrong."""
    schedule, lock = (_quietly(kind, bundle_dir) for kind in (ScheduleRecord, LockRecord))
    return Progress(
        runs_done=schedule.runs_done if schedule else 0,
        runs_total=len(schedule.runs) if schedule else None,
        sealed=(Path(bundle_dir) / layout.MANIFEST_NAME).is_file(),
        lock_sha256=lock.sha256 if lock else None,
    )


def _quietly(kind: type[R], bundle_dir: Path) -> R | None:
    try:
        return kind.read(bundle_dir)
    except GpubenchError:
        return None


def verification(bundle_dir: Path, campaign_sha256: str) -> str:
    """``verified`` when check-bundle re-derives every check, else what stands in the way."""
    from gpubench_nb.economics.reprice import verify_bundle

    bundle_dir = Path(bundle_dir)
    if not bundle_dir.is_dir():
        return "no bundle yet"
    progress = bundle_progress(bundle_dir)
    if progress.lock_sha256 is not None and progress.lock_sha256 != campaign_sha256:
        return "NOT this campaign's protocol (lock differs, R1.3)"
    if not progress.sealed:
        return "not finished (no manifest)"
    try:
        problems = verify_bundle(bundle_dir)
    except Exception as exc:  # an unreadable bundle is a finding, not a crash of `status`
        return f"NOT verified: {exc}"
    if problems:
        return f"NOT verified: {len(problems)} problem(s), first: {problems[0]}"
    return "verified"


def record_attempt(entry: dict[str, Any]) -> None:
    """Move the current job of a target into its history before a new one is submitted."""
    if entry.get("job_id") is None and not entry.get("error"):
        return  # nothing was tried yet
    kept = {k: entry.get(k) for k in ("job_id", "executor", "state", "submitted_utc")}
    kept |= {k: entry.get(k) for k in ("finished_utc", "error", "logs", "target")}
    if interruptions := entry.pop("interruptions", None):  # R3.6: discarded runs stay on record
        kept["interruptions"] = interruptions
    kept |= {k: entry.pop(k, None) for k in ("node", "requeued", "restarts")}  # of that job
    entry.pop("slurm_state", None)
    entry.setdefault("history", []).append(kept)

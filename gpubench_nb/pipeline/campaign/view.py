"""`campaign status` (reads campaign.json, the job engine and each bundle; writes nothing) and
`campaign report` (merges the targets' verified bundles of one frozen lock, R2.1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpubench_nb.errors import BundleError
from gpubench_nb.pipeline.campaign.file import Campaign, load_campaign
from gpubench_nb.pipeline.campaign.slurm import UNKNOWN, ended_without_result
from gpubench_nb.pipeline.campaign.state import (
    JOBS_DIR,
    bundle_progress,
    campaign_dir_for,
    frozen_dir_for,
    read_state,
    verification,
)
from gpubench_nb.protocol.bundle import REPORT_NAME
from gpubench_nb.protocol.lock import LOCK_NAME, read_lock
from gpubench_nb.protocol.outputs import check_output
from gpubench_nb.protocol.writer import refuse_if_written


def campaign_status(
    path: str | Path, *, output_dir: str | Path = "outputs"
) -> list[dict[str, Any]]:
    """One row per target: reach, offer, job id, state, runs done/total, bundle verified."""
    campaign, campaign_dir, lock_sha256 = _opened(path, output_dir)
    state = read_state(campaign_dir) if campaign_dir.is_dir() else {"targets": {}}
    rows = []
    for target in campaign.targets:
        entry = state["targets"].get(target.id) or {}
        bundle = campaign_dir / target.id
        progress = bundle_progress(bundle)
        total = "?" if progress.runs_total is None else str(progress.runs_total)
        live, why = _live_state(campaign_dir / JOBS_DIR / target.id, entry, target.reach)
        rows.append(
            {
                "target": target.id,
                "reach": target.reach,
                "offer": f"{target.offer.offer} {target.offer.days}d x{target.offer.lots}",
                "job": entry.get("job_id") or "-",
                "node": entry.get("node") or "-",
                "state": live,
                "runs": f"{progress.runs_done}/{total}",
                "bundle": verification(bundle, lock_sha256) if lock_sha256 else "not frozen yet",
                "error": why or entry.get("error"),
                "note": entry.get("requeued"),
                "log": (entry.get("logs") or {}).get("stderr"),
            }
        )
    return rows


def _opened(path: str | Path, output_dir: str | Path) -> tuple[Campaign, Path, str]:
    """The campaign, its folder, and its frozen lock's sha256 ("" before it is frozen)."""
    campaign = load_campaign(path)
    campaign_dir = campaign_dir_for(Path(output_dir), campaign.campaign_id)
    frozen = frozen_dir_for(campaign_dir)
    sha256 = read_lock(frozen).sha256 or "" if (frozen / LOCK_NAME).is_file() else ""
    return campaign, campaign_dir, sha256


def _live_state(folder: Path, entry: dict[str, Any], reach: str) -> tuple[str, str | None]:
    """The state now (job engine asked, nothing written) and, for a job that ended without a
    result since `campaign run` last looked, why (Slurm's state, exit code, .err tail)."""
    recorded = entry.get("state") or ("manual" if reach == "manual" else "pending")
    if recorded not in ("submitted", "running") or not entry.get("job_id"):
        return recorded, None
    try:
        from gpubench_nb.pipeline.campaign import jobs
    except ImportError:
        return f"{recorded} (submitit not installed: state not refreshed)", None
    outcome, slurm, alive = jobs.job_now(folder, entry)
    if outcome is not None:
        ok = "finished (ok; `campaign run` records it)"
        return (ok, None) if outcome.ok else ("failed", outcome.error)
    if alive and slurm is not None and slurm.state == UNKNOWN:  # why, and what to do, below
        return f"{recorded} (Slurm: {UNKNOWN})", slurm.detail
    if alive:
        return (f"{recorded} (Slurm: {slurm.describe()})" if slurm else "running"), None
    state = f"failed (Slurm: {slurm.describe()})" if slurm else "failed (ended without a result)"
    return state, ended_without_result(entry, slurm)


def status_table(rows: list[dict[str, Any]]) -> str:
    """The status rows as a fixed-width table, errors and logs below it."""
    columns = ("target", "reach", "offer", "job", "node", "state", "runs", "bundle")
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in columns) for r in rows]
    for row in rows:
        lines += [f"{row['target']}: {text}" for text in (row["note"], row["error"]) if text]
        if row["error"] and row["log"]:
            lines.append(f"{row['target']}: log {row['log']}")
    return "\n".join(lines)


def campaign_report(
    path: str | Path,
    *,
    output_dir: str | Path = "outputs",
    out: str | Path | None = None,
    partial: bool = False,
) -> Path:
    """Merge the targets' verified bundles into one report (never with --allow-mismatch)."""
    from gpubench_nb.report.render import render_report

    campaign, campaign_dir, lock_sha256 = _opened(path, output_dir)
    if not lock_sha256:
        raise BundleError(
            f"{campaign_dir}: campaign {campaign.campaign_id} has no frozen protocol yet; fix: "
            "`gpubench-nb campaign run` first (check --output-dir)",
            rule="R1.3",
        )
    verdicts = {t.id: verification(campaign_dir / t.id, lock_sha256) for t in campaign.targets}
    ready = [campaign_dir / target for target, v in verdicts.items() if v == "verified"]
    missing = [f"{target}: {v}" for target, v in verdicts.items() if v != "verified"]
    if missing and (not partial or not ready):
        raise BundleError(
            f"campaign {campaign.campaign_id}: not every target has a verified bundle of this "
            f"campaign's protocol: {'; '.join(missing)}. Fix: `gpubench-nb campaign run` (or, "
            "for a manual target, copy its bundle back), or pass --partial to report the "
            "verified ones",
            rule="R5.6",
        )
    report = Path(out) if out else campaign_dir / REPORT_NAME
    check_output(  # the one output guard (R5.6)
        report,
        option="--out" if out else "the campaign report",
        inputs=[Path(path), *ready],
        instead=f"use the default {campaign_dir / REPORT_NAME}",
    )
    for bundle in ready:  # a `run` still rewriting one (re-pricing): refused, not read half-made
        refuse_if_written(bundle)
    return render_report(ready, report)

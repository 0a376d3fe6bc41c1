"""The one-screen summary printed at the end of `gpubench-nb run` (R3.5: median and min–max)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from gpubench_nb.formats import NOT_RECORDED, seconds_range


class Verdict(Protocol):
    """What the summary shows of a variant's acceptance (protocol.quality.VariantAcceptance):
    the verdict is decided there, by the one rule, never here (R1.5, R5.7)."""

    verdict: bool | None
    accepted_runs: int
    measured_runs: int


_SHOWN = {True: "accepted", False: "NOT accepted", None: "acceptance not recorded"}


def summary_text(
    rows: Sequence[dict[str, Any]],
    bundle_dir: Path,
    report: Path | None,
    *,
    verdicts: Mapping[str, Verdict],
    phases: Sequence[str],
) -> str:
    """Per variant and phase (in ``phases`` order): n, failures, median and min–max elapsed
    (3 significant digits with units, as the report: formats.seconds_range); then each
    variant's verdict as ``verdicts`` (protocol.quality.variant_acceptance) gives it."""
    lines = [
        f"bundle: {bundle_dir}",
        f"{'variant':<10}{'phase':<7}{'n':>3}{'failed':>8}  time: median (min – max)",
    ]
    variants = list(dict.fromkeys(row["variant_id"] for row in rows))
    for variant in variants:
        mine = [row for row in rows if row["variant_id"] == variant]
        for phase in phases:
            phase_rows = [row for row in mine if row["phase"] == phase]
            if not phase_rows:
                continue
            times = [
                row["elapsed_seconds"] for row in phase_rows if row["elapsed_seconds"] is not None
            ]
            failed = len(phase_rows) - len(times)
            shown = (
                seconds_range(statistics.median(times), min(times), max(times))
                if times
                else NOT_RECORDED
            )
            lines.append(f"{variant:<10}{phase:<7}{len(phase_rows):>3}{failed:>8}  {shown}")
        verdict = verdicts[variant]
        lines.append(
            f"{variant:<10}{_SHOWN[verdict.verdict]} ({verdict.accepted_runs}"
            f"/{verdict.measured_runs} measured runs accepted, R1.5)"
        )
    lines.append(f"report: {report}" if report else "report: not rendered")
    return "\n".join(lines)

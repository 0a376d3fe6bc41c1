"""20_quality: accept or refuse every run's predictions (R1.5, R1.6, R5.7)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpubench_nb.kernel import QUALITY_STEP
from gpubench_nb.protocol.quality import accepted, fill_quality
from gpubench_nb.protocol.writer import frozen_step


def step(experiment: str | Path, bundle_dir: str | Path) -> pd.DataFrame:
    """Write every run's checks.json and the acceptance columns; one table row per run."""
    # acceptance reads IDs and labels: they and the declaration are the frozen ones (R1.3, R1.1)
    with frozen_step(experiment, bundle_dir, QUALITY_STEP, corpus=False) as (exp, corpus):
        outcome = fill_quality(Path(bundle_dir), corpus, exp.classes, exp.quality)
    return pd.DataFrame(
        {
            "run": key,
            "observed_ids": report and report.observed_count,
            "ids_match": report and report.ids_match,
            "format_valid": report and report.format_valid,
            exp.quality.metric: report and report.quality_value,
            "accepted": accepted(report, outcome.reference_value),
        }
        for key, report in outcome.reports.items()
    )

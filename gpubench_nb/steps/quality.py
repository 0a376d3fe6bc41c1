"""20_quality: accept or refuse every run's predictions (R1.5, R1.6, R5.7)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpubench_nb.pipeline.steps import quality_step


def step(experiment: str | Path, bundle_dir: str | Path) -> pd.DataFrame:
    """Write every run's checks.json and the acceptance columns; one table row per run."""
    return quality_step(experiment, bundle_dir)

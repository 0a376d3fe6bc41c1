"""10_measure: one scheduled run of one variant, in this fresh kernel (R3.1, R3.2, R3.4, R3.7)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpubench_nb.pipeline.run import execute_run


def step(
    experiment: str | Path, variant_id: str, phase: str, run_index: int, bundle_dir: str | Path
) -> dict[str, Any]:
    """Run (variant, phase, run_index) and write its run.json; return it as written."""
    return execute_run(experiment, variant_id, phase, int(run_index), bundle_dir).to_dict()

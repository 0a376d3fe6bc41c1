"""30_economics: whole packages and the cost per accepted corpus into economics.json (R5)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench_nb.economics.reprice import economics_notebook


def step(
    experiment: str | Path, bundle_dir: str | Path, pricing: Mapping[str, Any] | None = None
) -> dict[str, pd.DataFrame]:
    """Price every offer (``pricing``: a campaign target's offer, else the YAML's); one table
    per offer."""
    return economics_notebook(experiment, bundle_dir, pricing)

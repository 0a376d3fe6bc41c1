"""00_environment: capture the machine as observed into environment.json (R2.4, R2.5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpubench_nb.pipeline.steps import environment_step


def step(experiment: str | Path, bundle_dir: str | Path) -> dict[str, Any]:
    """Write ``environment.json`` into ``bundle_dir``; return what was observed."""
    return environment_step(experiment, bundle_dir)

"""90_report: the bundles to report on, read once; the notebook's cells display them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpubench_nb.report import render
from gpubench_nb.report.bundles import Bundle
from gpubench_nb.report.stats import Summary


def step(
    bundle_dirs: str | Sequence[Any], allow_mismatch: bool = False
) -> tuple[list[Bundle], Summary]:
    """Set up the display, load ``bundle_dirs`` (unlike bundles refused unless
    ``allow_mismatch``, R2.1); return (bundles, their one summary)."""
    render.display_setup()
    bundles = render.load_bundles(bundle_dirs, allow_mismatch=allow_mismatch)
    return bundles, render.summary_of(bundles)

"""economics.json written for a bundle as 30_economics writes it, from the tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpubench_nb.economics.bundle_economics import economics_data, read_bundle_rows
from gpubench_nb.protocol.bundle import CSV_NAME
from gpubench_nb.protocol.experiment_spec import PricingSpec
from gpubench_nb.protocol.records import read_environment, write_economics


def write_bundle_economics(bundle_dir: Path, pricing: PricingSpec | None) -> dict[str, Any]:
    """Price every offer, write ``economics.json`` alone (not the CSV's columns), return it."""
    rows = read_bundle_rows(Path(bundle_dir) / CSV_NAME)
    data = economics_data(pricing, rows, read_environment(bundle_dir))
    write_economics(bundle_dir, data)
    return data

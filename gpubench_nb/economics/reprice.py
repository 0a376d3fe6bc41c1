"""30_economics' transaction: (re-)price a bundle, its CSV package columns and economics.json
together, after the frozen declaration is checked (R1.3, R5)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpubench_nb.economics.bundle_economics import economics_data, read_bundle_rows
from gpubench_nb.economics.offers import load_offers
from gpubench_nb.economics.package_columns import PricingLike, fill_package_columns
from gpubench_nb.economics.tables import economics_tables
from gpubench_nb.kernel import ECONOMICS_STEP
from gpubench_nb.protocol.bundle import CSV_NAME
from gpubench_nb.protocol.records import read_environment, write_economics
from gpubench_nb.protocol.results import write_rows_atomic

if TYPE_CHECKING:  # pandas is imported lazily: the CLI must start fast
    import pandas


def economics_notebook(
    experiment_path: str | Path,
    bundle_dir: str | Path,
    pricing_override: Mapping[str, Any] | None = None,
) -> dict[str, pandas.DataFrame]:
    """30_economics in one call: load the experiment's pricing, write economics.json, tabulate.

    ``pricing_override`` (a campaign target's offer: ``offers``, ``offer``, ``days``, ``lots``)
    replaces the experiment's pricing section, which is not part of the frozen protocol.
    """
    from gpubench_nb.protocol.experiment import load_experiment
    from gpubench_nb.protocol.lock import require_frozen
    from gpubench_nb.protocol.writer import bundle_writer

    with bundle_writer(bundle_dir, ECONOMICS_STEP, step=True):
        experiment = load_experiment(experiment_path)
        # R1.3: the frozen declaration (pricing is not part of it: re-pricing is allowed).
        require_frozen(bundle_dir, experiment, step=ECONOMICS_STEP)
        pricing = _pricing(experiment.pricing, pricing_override)
        return economics_tables(price_bundle(Path(bundle_dir), pricing))


def _pricing(
    declared: PricingLike | None, override: Mapping[str, Any] | None
) -> PricingLike | None:
    """The experiment's pricing section, or a campaign target's own offer in its place (one
    frozen protocol, several offers)."""
    from gpubench_nb.protocol.experiment_spec import PricingSpec

    if override is None:
        return declared
    return PricingSpec(
        offers=Path(override["offers"]),
        offer=str(override["offer"]),
        days=int(override["days"]),
        lots=override.get("lots"),
        gpus=override.get("gpus"),
    )


def price_bundle(bundle_dir: Path, pricing: PricingLike | None) -> dict[str, Any]:
    """Write the CSV's package columns and economics.json, both computed in full before the
    first write (transactional); return economics.json's data. The caller holds the writer."""
    csv_path = bundle_dir / CSV_NAME
    rows = read_bundle_rows(csv_path)
    table = None
    if pricing is not None:  # validated in full before the first write (transactional)
        table = load_offers(pricing.offers)
        rows = fill_package_columns(rows, pricing, table)
    environment = read_environment(bundle_dir).to_dict()
    data = economics_data(pricing, rows, environment=environment, offers=table)
    if pricing is not None:  # R4: the package columns of every row, one spend (R5.3)
        write_rows_atomic(csv_path, rows)
    write_economics(bundle_dir, data)
    return data

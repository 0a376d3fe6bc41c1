"""30_economics: (re-)price a bundle's CSV package columns and economics.json together, after the
frozen declaration is checked (R1.3, R5); check-bundle's re-derivation of economics.json (R5.6)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpubench_nb import formats
from gpubench_nb.economics.attribution import recorded_hardware
from gpubench_nb.economics.bundle_economics import (
    economics_data,
    fill_package_columns,
    read_bundle_rows,
)
from gpubench_nb.economics.offers import MACHINE_OFFER_ID, Offer, load_offers, machine_offer
from gpubench_nb.errors import EconomicsError
from gpubench_nb.kernel import ECONOMICS_STEP
from gpubench_nb.protocol.audit import grouped
from gpubench_nb.protocol.bundle import CSV_NAME, ECONOMICS_NAME
from gpubench_nb.protocol.experiment_spec import PricingSpec
from gpubench_nb.protocol.fingerprint import sha256_file
from gpubench_nb.protocol.lock import differences
from gpubench_nb.protocol.quality import run_key
from gpubench_nb.protocol.records import (
    EnvironmentRecord,
    read_economics,
    read_environment,
    write_economics,
)
from gpubench_nb.protocol.results import write_rows_atomic

if TYPE_CHECKING:  # pandas is imported lazily: the CLI must start fast
    import pandas


def economics_notebook(
    experiment_path: str | Path,
    bundle_dir: str | Path,
    pricing_override: Mapping[str, Any] | None = None,
) -> dict[str, pandas.DataFrame]:
    """30_economics: economics.json for the declared (or campaign override) offer; its tables."""
    from gpubench_nb.protocol.writer import frozen_step

    # R1.3: the frozen declaration; pricing is not frozen
    with frozen_step(experiment_path, bundle_dir, ECONOMICS_STEP) as (experiment, _):
        pricing = _pricing(experiment.pricing, pricing_override)
        return economics_tables(price_bundle(Path(bundle_dir), pricing))


def _pricing(declared: PricingSpec | None, target: Mapping[str, Any] | None) -> PricingSpec | None:
    """The experiment's pricing section, or a campaign target's own offer in its place."""
    if target is None:
        return declared
    return PricingSpec(
        offers=Path(target["offers"]),
        offer=str(target["offer"]),
        days=int(target["days"]),
        lots=target.get("lots"),
        gpus=target.get("gpus"),
    )


def _offers(
    pricing: PricingSpec, rows: Sequence[Mapping[str, Any]], environment: EnvironmentRecord
) -> dict[str, Offer]:
    """``pricing``'s offers table, with the demo's offer for this bundle's machine if named."""
    table = load_offers(pricing.offers)
    if pricing.offer == MACHINE_OFFER_ID:
        hardware = recorded_hardware(rows, environment)
        table[MACHINE_OFFER_ID] = machine_offer(
            hardware.gpu_models, hardware.gpu_count, hardware.cpu_model
        )
    return table


def price_bundle(bundle_dir: Path, pricing: PricingSpec | None) -> dict[str, Any]:
    """Write the CSV's package columns and economics.json, both computed in full before the
    first write (transactional); return economics.json's data. The caller holds the writer."""
    csv_path = bundle_dir / CSV_NAME
    rows = read_bundle_rows(csv_path)
    environment = read_environment(bundle_dir)
    table = None if pricing is None else _offers(pricing, rows, environment)
    rows = fill_package_columns(rows, pricing, table) if pricing is not None else rows
    data = economics_data(pricing, rows, environment, table)
    if pricing is not None:  # R4: the package columns of every row, one spend (R5.3)
        write_rows_atomic(csv_path, rows)
    write_economics(bundle_dir, data)
    return data


def verify_bundle(bundle_dir: str | Path) -> list[str]:
    """check-bundle: protocol.audit, then economics.json and the CSV's package columns re-derived
    from the rows and the offers table that priced them (R1.6, R5.6); that table gone or changed
    (an older bundle's too), from the package totals economics.json states, checked alike."""
    from gpubench_nb.protocol.audit import check_bundle

    bundle_dir = Path(bundle_dir)
    problems = check_bundle(bundle_dir)
    stored = None if problems else read_economics(bundle_dir)
    if stored is None:
        return problems
    kept = stored.to_dict()
    rows = read_bundle_rows(bundle_dir / CSV_NAME)
    environment = read_environment(bundle_dir)
    declared, pricing, table = kept.get("pricing"), None, None
    if isinstance(declared, dict):
        terms = {key: declared.get(key) for key in ("offer", "days", "lots", "gpus")}
        pricing = _pricing(None, {"offers": declared.get("offers_file") or "", **terms})
        with suppress(EconomicsError, OSError, TypeError, ValueError):  # the table priced
            if declared.get("offers_sha256") == sha256_file(pricing.offers):  # it, unchanged
                table = _offers(pricing, rows, environment)
        table = table or _stated_offers(stored.offers)
    try:
        data = economics_data(pricing, rows, environment, table)
        filled = fill_package_columns(rows, pricing, table)
    except EconomicsError as exc:
        return [f"{ECONOMICS_NAME}: its prices cannot be re-derived: {exc} (R5.6)"]
    kept.pop("format_version", None)  # stamped by the writer (records.Record), not derived
    derived = json.loads(json.dumps(data))
    said = " (as kept -> as re-derived from the CSV and the offers, R5.6)"
    problems = [
        f"{ECONOMICS_NAME}: {change}{said}"
        for change in differences(_figures(kept, kept), _figures(derived, kept))
    ]
    package = ("duration_days", "lots", "package_total_usd_minor", "accepted_unique_corpora")
    found = [
        (run_key(row), f"{CSV_NAME}: {run_key(row)}: {name}={row[name]!r}, re-derived "
         f"{again[name]!r} from the offers and the acceptance columns (R5.3)")
        for row, again in zip(rows, filled, strict=True)
        for name in package
        if row[name] != again[name]
    ]  # fmt: skip
    return problems + grouped("run", found)


def _stated_offers(offers: Sequence[Any]) -> dict[str, Offer]:
    """The offers as economics.json states them, priced by their package totals over their lots:
    what re-derivation needs when the table that priced them is gone (R5.1)."""
    return {
        o.offer_id: Offer(
            id=o.offer_id,
            provider="",
            gpu_model=o.gpu_model,
            cpu_model=(o.data or {}).get("cpu_model"),
            gpus_per_lot=o.gpus_per_lot,
            package_price_usd_minor={o.days: (o.package_total_usd_minor or 0) // max(o.lots, 1)},
            placeholder=o.placeholder,
        )
        for o in offers
    }


def _figures(value: Any, like: Any) -> Any:
    """``value`` reduced to the keys ``like`` (the kept file) has, less free text: its figures,
    flags and names, not its wording (versions reword it)."""
    if isinstance(value, dict) and isinstance(like, dict):
        names = ("variant_id", "offer_id", "status", "offer")
        kept = {k: v for k, v in like.items() if k in names or not isinstance(v, str)}
        return {k: _figures(value.get(k), v) for k, v in kept.items()}
    if isinstance(value, list) and isinstance(like, list) and len(value) == len(like):
        return [_figures(v, kept) for v, kept in zip(value, like, strict=True)]
    return value


def economics_tables(data: Mapping[str, Any]) -> dict[str, pandas.DataFrame]:
    """30_economics' tables from ``economics.json`` data: one per offer, variants as rows."""
    import pandas as pd

    facts = {fact["variant_id"]: fact for fact in data["variants"]}
    declared = (data.get("pricing") or {}).get("offer")
    thresholds = {
        pair["challenger"]: pair["accepted_corpora_needed"]
        for pair in data["break_even"]["pairs"]
        if pair["reference"] == declared
    }
    tables = {}
    for offer in data["offers"]:
        total, mark = offer["package_total_usd_minor"], bool(offer.get("placeholder"))
        records = []
        for cell in offer["variants"]:
            fact = facts[cell["variant_id"]]
            median = fact["median_seconds_per_accepted_corpus"]
            threshold = thresholds.get(offer["offer_id"]) if fact["accepted"] else None
            records.append(
                {
                    "offer_id": offer["offer_id"],
                    "variant_id": cell["variant_id"],
                    "status": fact["status"],
                    "median_seconds_per_accepted_corpus (measured)": median,
                    "days": offer["days"],
                    "lots": offer["lots"],
                    "package_total_usd_minor": total,
                    "price": formats.price(total, placeholder=mark),  # marked if an example
                    "on this hardware": (offer.get("attribution") or {}).get("reason"),
                    "accepted_results": cell["accepted_results"],
                    "cost_per_accepted_usd_minor": cell["cost_per_accepted_usd_minor"],
                    f"break_even_vs_{declared} (threshold, not a forecast)": threshold,
                    "reason": cell["reason"],
                }
            )
        tables[offer["offer_id"]] = pd.DataFrame(records, dtype=object)  # None stays None
    return tables

"""economics.json as tables for the 30_economics notebook: one per offer, variants as rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpubench_nb import formats

if TYPE_CHECKING:  # pandas is imported lazily: the CLI must start fast
    import pandas


def economics_tables(data: Mapping[str, Any]) -> dict[str, pandas.DataFrame]:
    """One table per offer (variants as rows) from ``economics.json`` data; {} if none priced."""
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
        total = offer["package_total_usd_minor"]
        records = []
        for cell in offer["variants"]:
            fact = facts[cell["variant_id"]]
            threshold = thresholds.get(offer["offer_id"]) if fact["accepted"] else None
            records.append(
                {
                    "offer_id": offer["offer_id"],
                    "variant_id": cell["variant_id"],
                    "status": fact["status"],
                    "median_seconds_per_accepted_corpus (measured)": fact[
                        "median_seconds_per_accepted_corpus"
                    ],
                    "days": offer["days"],
                    "lots": offer["lots"],
                    "package_total_usd_minor": total,
                    # marked when the offer is an example
                    "price": formats.price(total, placeholder=bool(offer.get("placeholder"))),
                    "on this hardware": (offer.get("attribution") or {}).get("reason"),
                    "accepted_results": cell["accepted_results"],
                    "cost_per_accepted_usd_minor": cell["cost_per_accepted_usd_minor"],
                    f"break_even_vs_{declared} (threshold, not a forecast)": threshold,
                    "reason": cell["reason"],
                }
            )
        tables[offer["offer_id"]] = pd.DataFrame(records, dtype=object)  # None stays None
    return tables

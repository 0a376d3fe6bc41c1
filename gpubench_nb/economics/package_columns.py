"""A bundle's package columns: one whole-package spend on every CSV row (R4, R5.1-R5.3)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from gpubench_nb import formats
from gpubench_nb.economics.offers import (
    Offer,
    PackageQuote,
    load_offers,
    package_quote,
    resolve_offer,
)
from gpubench_nb.protocol.quality import variant_acceptance


class PricingLike(Protocol):
    """What is read from an experiment's ``pricing`` section (experiment_spec.PricingSpec)."""

    offers: Path
    offer: str
    days: int
    lots: int | None
    gpus: int | None


def quote_for(offer: Offer, pricing: PricingLike) -> PackageQuote:
    """``offer``'s whole package for the declared days, lots and GPUs (R5.1, R5.2)."""
    return package_quote(offer, pricing.days, lots=pricing.lots, gpus=pricing.gpus)


def fill_package_columns(
    rows: Sequence[Mapping[str, Any]],
    pricing: PricingLike | None,
    offers: Mapping[str, Offer] | None = None,
) -> list[dict[str, Any]]:
    """New rows with duration_days, lots, package_total_usd_minor, accepted_unique_corpora:
    one spend for the whole experiment on every row, not one per run (R4, R5.3); empty without
    ``pricing`` (R4.3). ``offers`` defaults to the table at ``pricing.offers``."""
    package = ("duration_days", "lots", "package_total_usd_minor", "accepted_unique_corpora")
    if pricing is None:
        return [{**row, **dict.fromkeys(package)} for row in rows]
    table = load_offers(pricing.offers) if offers is None else offers
    quote = quote_for(resolve_offer(table, pricing.offer), pricing)
    statement = (
        f"package: one spend of {quote.package_total_usd_minor} cents ({quote.offer_id}, "
        f"{quote.days} days x {quote.lots} lot(s)) for the whole experiment, not per run (R5.3)"
        + (f" [{formats.PLACEHOLDER_MARK}: example price]" if quote.placeholder else "")
    )
    acceptance = variant_acceptance(rows)
    filled = []
    for row in rows:
        notes = row.get("notes") or ""
        if statement not in notes:  # idempotent: a second fill does not repeat it
            notes = f"{notes}; {statement}" if notes else statement
        filled.append(
            {
                **row,
                "duration_days": quote.days,
                "lots": quote.lots,
                "package_total_usd_minor": quote.package_total_usd_minor,
                "accepted_unique_corpora": acceptance[row["variant_id"]].accepted_unique_corpora,
                "notes": notes,
            }
        )
    return filled

"""A bundle's prices in cents, never extrapolated: CSV package columns and economics.json (R5)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpubench_nb import formats
from gpubench_nb.economics.attribution import (
    ATTRIBUTION_RULE,
    Attribution,
    Hardware,
    attribute,
    recorded_hardware,
)
from gpubench_nb.economics.offers import (
    MACHINE_OFFER_ID,
    ROUNDING_RULE,
    Offer,
    PackageQuote,
    break_even_accepted,
    cost_per_accepted_usd_minor,
    load_offers,
    package_quote,
    package_terms,
    resolve_offer,
)
from gpubench_nb.errors import EconomicsError
from gpubench_nb.protocol.experiment_spec import PricingSpec
from gpubench_nb.protocol.fingerprint import sha256_file
from gpubench_nb.protocol.quality import variant_acceptance
from gpubench_nb.protocol.records import EnvironmentRecord, Phase
from gpubench_nb.protocol.results import read_rows

# R5.4: one unit of useful work, declared once, the same for every variant and offer.
UNIT_OF_WORK = (
    "one complete, accepted corpus: every expected ID exactly once, no extra answer, valid "
    "format and the declared quality rules met (R1.5); repeats of one corpus count once (R5.3)"
)
THRESHOLD = "threshold, not a forecast"
WARM = Phase.WARM


def quote_for(offer: Offer, pricing: PricingSpec) -> PackageQuote:
    """``offer``'s whole package for the declared days, lots and GPUs (R5.1, R5.2)."""
    return package_quote(offer, pricing.days, lots=pricing.lots, gpus=pricing.gpus)


def read_bundle_rows(csv_path: Path) -> list[dict[str, Any]]:
    """The bundle's typed rows, validated by the fixed schema (R4); a missing file is named."""
    if not csv_path.is_file():
        raise EconomicsError(
            f"{csv_path}: cannot read (no such file); fix: run the measurement (10_measure) first",
            rule="R5.6",
        )
    return read_rows(csv_path)


def fill_package_columns(
    rows: Sequence[Mapping[str, Any]],
    pricing: PricingSpec | None,
    offers: Mapping[str, Offer] | None = None,
) -> list[dict[str, Any]]:
    """Rows with the package columns: one spend for the whole experiment (R4, R5.3), or empty."""
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
        counted = acceptance[row["variant_id"]].accepted_unique_corpora
        values = (quote.days, quote.lots, quote.package_total_usd_minor, counted)
        filled.append({**row, **dict(zip(package, values, strict=True)), "notes": notes})
    return filled


def _variant_facts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """economics.json ``variants``: protocol.quality's verdict (R1.5, R5.7) and, if accepted,
    the median and range of its measured warm times, never a rate (R3.5, R3.6)."""
    facts = []
    for v, verdict in variant_acceptance(rows).items():
        warm = [r["elapsed_seconds"] for r in rows if (r["variant_id"], r["phase"]) == (v, WARM)]
        timed = [t for t in warm if t is not None] if verdict.accepted else []
        facts.append(
            {
                "variant_id": v,
                "status": verdict.status,
                "accepted": verdict.accepted,
                "accepted_unique_corpora": verdict.accepted_unique_corpora,
                "measured_runs": verdict.measured_runs,
                "accepted_runs": verdict.accepted_runs,
                "median_seconds_per_accepted_corpus": statistics.median(timed) if timed else None,
                "min_seconds": min(timed, default=None),
                "max_seconds": max(timed, default=None),
                "timed_warm_runs": len(timed) if verdict.accepted else None,
                "reason": verdict.reason,
            }
        )
    return facts


def economics_data(
    pricing: PricingSpec | None,
    rows: list[dict[str, Any]],
    environment: EnvironmentRecord | None = None,
    offers: Mapping[str, Offer] | None = None,
) -> dict[str, Any]:
    """``economics.json``'s data, computed in full before anything is written (R5.6)."""
    hardware = recorded_hardware(rows, environment)
    data: dict[str, Any] = {
        "unit_of_work": UNIT_OF_WORK,
        "rounding_rule": ROUNDING_RULE,
        "note": (
            "Package totals are whole packages x billed lots, one spend for the whole "
            "experiment (R5.1, R5.3). A cost per accepted corpus is given only for a variant "
            "whose measured runs were all accepted, counting its one distinct corpus (five "
            "repeats are not five results, R5.3); no rate is extrapolated to 3, 7 or 30 days "
            f"(R5.5). The corpus was accepted on {hardware.describe()}; only an offer of that "
            "hardware carries a cost per accepted corpus (R2.4, R5.7)."
        ),
        "pricing": None,
        "measured_on": {
            "gpu_model": sorted({row.get("gpu_model") or "" for row in rows} - {""}),
            "gpu_count": hardware.gpu_count,
            "hardware": hardware.describe(),
        },
        "attribution_rule": ATTRIBUTION_RULE,
        "variants": _variant_facts(rows),
        "offers": [],
        "break_even": {
            "label": THRESHOLD,
            "reference_accepted_results": None,
            "reason": "no pricing section declared: no package is priced (R5.5)",
            "pairs": [],
        },
    }
    if pricing is not None:
        table = dict(offers) if offers is not None else load_offers(pricing.offers)
        _price_offers(data, pricing, table, hardware)
    return data


def _price_offers(
    data: dict[str, Any], pricing: PricingSpec, table: Mapping[str, Offer], hardware: Hardware
) -> None:
    """Fill ``data``'s ``pricing``, ``offers`` (each attributed, R5.7) and ``break_even``."""
    declared = resolve_offer(table, pricing.offer)
    if declared.id == MACHINE_OFFER_ID:  # the demo's own offer, said so (R5.6)
        data["note"] += (
            f" The declared offer {MACHINE_OFFER_ID} was written by gpubench-nb for the machine "
            f"this bundle ran on ({declared.hardware}), with invented placeholder prices, so that "
            "a cost per accepted corpus shows on any machine; it is attributed by the same rule "
            "as every offer."
        )
    data["pricing"] = {
        "offers_file": str(Path(pricing.offers)),
        # check-bundle re-prices with this table (none: re-derived without it)
        "offers_sha256": sha256_file(pricing.offers) if Path(pricing.offers).is_file() else None,
        "offer": declared.id,
        "days": pricing.days,
        "lots": pricing.lots,
        "gpus": pricing.gpus,
    }
    quotes = {offer_id: quote_for(offer, pricing) for offer_id, offer in table.items()}
    measured = []
    for offer, quote in zip(table.values(), quotes.values(), strict=True):
        owner = attribute(offer, quote.lots, hardware, declared.id)
        measured += [offer.id] if owner.attributable else []
        data["offers"].append(
            {
                "offer_id": offer.id,
                "provider": offer.provider,
                "gpu_model": offer.gpu_model,
                "cpu_model": offer.cpu_model,  # a CPU-only offer's hardware (gpus_per_lot 0)
                "gpus_per_lot": offer.gpus_per_lot,
                "days": quote.days,
                "lots": quote.lots,
                "package_total_usd_minor": quote.package_total_usd_minor,
                "placeholder": offer.placeholder,  # invented example prices, not a quote
                "declared": offer.id == declared.id,
                "note": " ".join(package_terms(offer, quote.days, quote.lots, None)[2]),
                "attribution": owner.to_dict(),
                "variants": [_cell(fact, quote, owner) for fact in data["variants"]],
            }
        )
    even = data["break_even"]
    if not any(fact["accepted"] for fact in data["variants"]):
        even["reason"] = (
            "no variant was accepted: there is no measured cost per result to beat (R5.5, R5.7)"
        )
    elif not measured:
        even["reason"] = (
            f"no offer's hardware accepted the corpus (it was accepted on "
            f"{hardware.describe()}): there is no measured cost per result to beat (R5.7)"
        )
    else:
        even.update(reference_accepted_results=1, reason=None, pairs=_pairs(quotes, measured))


def _cell(fact: Mapping[str, Any], quote: PackageQuote, owner: Attribution) -> dict[str, Any]:
    """One variant on one offer: a measured count (1 corpus) only if accepted there (R5.7)."""
    counted = 1 if fact["accepted"] and owner.attributable else None
    cost = cost_per_accepted_usd_minor(quote.package_total_usd_minor, counted)
    return {
        "variant_id": fact["variant_id"],
        "accepted_results": counted,
        "cost_per_accepted_usd_minor": cost,
        "reason": owner.reason if fact["accepted"] and not owner.attributable else fact["reason"],
    }


def _pairs(quotes: Mapping[str, PackageQuote], measured: Sequence[str]) -> list[dict[str, Any]]:
    """Break-even thresholds of every other offer against each offer that measured (R5.5, R5.7)."""
    keys = ("challenger", "reference", "accepted_corpora_needed", "statement")
    pairs = []
    for ref_id in measured:
        reference = replace(quotes[ref_id], accepted_results=1)  # its one measured corpus
        for ch_id in (ch for ch in quotes if ch != ref_id):
            needed = break_even_accepted(quotes[ch_id], reference)  # prices are >= 1 cent (R5.1)
            corpora = "accepted corpus" if needed == 1 else "accepted corpora"
            statement = (
                f"{ch_id}'s package costs less per accepted corpus than {ref_id}'s single "
                f"measured corpus ({reference.package_total_usd_minor} cents) once {ch_id} "
                f"delivers {needed} {corpora}; a {THRESHOLD}"
            )
            pairs.append(dict(zip(keys, (ch_id, ref_id, needed, statement), strict=True)))
    return pairs

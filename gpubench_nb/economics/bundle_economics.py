"""A bundle's economics.json: package totals and cost per accepted corpus, never extrapolated (R5).

Money is integer US cents end to end (``*_usd_minor``). A package total is the whole 3-, 7- or
30-day package price times the billed lots (R5.1, R5.2). A cost per accepted corpus exists only
for a measured count of distinct accepted corpora (R5.3); without one, only the total is
computed (R5.5). Nothing here multiplies a measured rate out to a package length.

``economics.json`` (written by :func:`write_bundle_economics`) has this shape::

    {
      "unit_of_work": str,          # declared once for the whole comparison (R5.4)
      "rounding_rule": str,         # how cost per accepted corpus is rounded to the cent
      "note": str,                  # what is and is not computed (R5.3, R5.5)
      "pricing": null | {"offers_file": str, "offers_sha256": str, "offer": str, "days": int,
                         "lots": int | null, "gpus": int | null},
      "measured_on": {"gpu_model": [str, ...],    # GPUs recorded in resultats-bruts.csv
                      "gpu_count": int | null, "hardware": str},
      "attribution_rule": str,      # when an offer may carry a cost per corpus (R2.4, R5.7)
      "variants": [{
          "variant_id": str,
          "status": "accepted" | "not accepted" | "acceptance not recorded",
          "accepted": bool,                     # every measured (cold, warm) run accepted
          "accepted_unique_corpora": 1 | 0 | null,  # distinct corpora, never summed (R5.3)
          "measured_runs": int, "accepted_runs": int,
          "median_seconds_per_accepted_corpus": float | null,  # warm runs, a measured fact
          "min_seconds": float | null, "max_seconds": float | null,
          "timed_warm_runs": int | null,          # null for a variant not accepted
          "reason": str | null}],               # why there is no cost per result (R5.7)
      "offers": [{
          "offer_id", "provider", "gpu_model": str, "cpu_model": str | null,
          "gpus_per_lot" (0: CPU-only), "days", "lots": int,
          "package_total_usd_minor": int,       # one spend for the whole experiment
          "declared": bool,                     # the experiment's pricing.offer
          "note": str,
          "attribution": {"attributable": bool, "basis": str, "reason": str,
                          "gpus_used": int | null, "gpus_billed": int,
                          "lot_note": str | null},  # attribution.Attribution
          "variants": [{"variant_id": str, "accepted_results": 1 | null,
                        "cost_per_accepted_usd_minor": int | null, "reason": str | null}]}],
      "break_even": {
          "label": "threshold, not a forecast",
          "reference_accepted_results": 1 | null,
          "reason": str | null,                 # why no threshold was computed
          "pairs": [{"challenger": str, "reference": str,   # reference: measured here
                     "accepted_corpora_needed": int | null, "statement": str}]}
    }
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpubench_nb.economics.attribution import (
    ATTRIBUTION_RULE,
    Attribution,
    Hardware,
    attribute,
    recorded_hardware,
)
from gpubench_nb.economics.break_even import break_even
from gpubench_nb.economics.offers import (
    MACHINE_OFFER_ID,
    ROUNDING_RULE,
    Offer,
    PackageQuote,
    cost_per_accepted_usd_minor,
    load_offers,
    package_terms,
    resolve_offer,
)
from gpubench_nb.economics.package_columns import PricingLike, quote_for
from gpubench_nb.errors import EconomicsError
from gpubench_nb.protocol.bundle import CSV_NAME
from gpubench_nb.protocol.fingerprint import sha256_file
from gpubench_nb.protocol.quality import variant_acceptance
from gpubench_nb.protocol.records import Phase, read_environment, write_economics
from gpubench_nb.protocol.results import read_rows

# R5.4: one unit of useful work, declared once, the same for every variant and offer.
UNIT_OF_WORK = (
    "one complete, accepted corpus: every expected ID exactly once, no extra answer, valid "
    "format and the declared quality rules met (R1.5); repeats of one corpus count once (R5.3)"
)


def read_bundle_rows(csv_path: Path) -> list[dict[str, Any]]:
    """The bundle's typed rows, validated by the fixed schema (R4); a missing file is named."""
    if not csv_path.is_file():
        raise EconomicsError(
            f"{csv_path}: cannot read (no such file); fix: run the measurement (10_measure) first",
            rule="R5.6",
        )
    return read_rows(csv_path)


def _variant_facts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """economics.json ``variants``: the verdict of protocol.quality.variant_acceptance (the one
    rule, R1.5, R5.7) and, for an accepted variant only, its measured warm times (R3.5)."""
    facts = []
    for variant, verdict in variant_acceptance(rows).items():
        accepted = verdict.accepted
        timed = [
            row["elapsed_seconds"]
            for row in rows
            if row["variant_id"] == variant
            and row["phase"] == Phase.WARM
            and row["elapsed_seconds"] is not None  # a failed run is no time (R3.6)
        ]
        facts.append(
            {
                "variant_id": variant,
                "status": verdict.status,
                "accepted": accepted,
                "accepted_unique_corpora": verdict.accepted_unique_corpora,
                "measured_runs": verdict.measured_runs,
                "accepted_runs": verdict.accepted_runs,
                # A fact about accepted runs only (R3.5: median and range), never a rate.
                "median_seconds_per_accepted_corpus": statistics.median(timed)
                if accepted and timed
                else None,
                "min_seconds": min(timed) if accepted and timed else None,
                "max_seconds": max(timed) if accepted and timed else None,
                "timed_warm_runs": len(timed) if accepted else None,
                "reason": verdict.reason,
            }
        )
    return facts


def write_bundle_economics(
    bundle_dir: Path, pricing: PricingLike | None, offers_path: Path | None = None
) -> dict[str, Any]:
    """Price every offer for the declared package, write ``economics.json``, return its data.

    Accepted variants count 1 accepted corpus (the one validated corpus, R5.3); the others get
    no cost per result and a reason (R5.7). Break-even counts are thresholds, not forecasts.
    """
    bundle_dir = Path(bundle_dir)
    rows = read_bundle_rows(bundle_dir / CSV_NAME)
    data = economics_data(pricing, rows, offers_path, read_environment(bundle_dir).to_dict())
    write_economics(bundle_dir, data)
    return data


def economics_data(
    pricing: PricingLike | None,
    rows: list[dict[str, Any]],
    offers_path: Path | None = None,
    environment: Mapping[str, Any] | None = None,
    offers: Mapping[str, Offer] | None = None,
) -> dict[str, Any]:
    """``economics.json``'s data for these rows, computed in full before anything is written.
    ``offers``: the table already read from the offers file (read once per step)."""
    variants = _variant_facts(rows)
    gpu_models = sorted({row.get("gpu_model") or "" for row in rows} - {""})
    hardware = recorded_hardware(rows, dict(environment or {}))
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
            "gpu_model": gpu_models,
            "gpu_count": hardware.gpu_count,
            "hardware": hardware.describe(),
        },
        "attribution_rule": ATTRIBUTION_RULE,
        "variants": variants,
        "offers": [],
        "break_even": {
            "label": "threshold, not a forecast",
            "reference_accepted_results": None,
            "reason": "no pricing section declared: no package is priced (R5.5)",
            "pairs": [],
        },
    }
    if pricing is not None:
        offers_file = Path(offers_path if offers_path is not None else pricing.offers)
        table = dict(offers) if offers is not None else load_offers(offers_file)
        _price_offers(data, pricing, table, offers_file, hardware)
    return data


def _price_offers(
    data: dict[str, Any],
    pricing: PricingLike,
    table: Mapping[str, Offer],
    offers_file: Path,
    hardware: Hardware,
) -> None:
    """Fill ``data``'s ``pricing``, ``offers`` (each with its attribution, R5.3, R5.7) and
    ``break_even`` (thresholds against the offers whose hardware accepted the corpus)."""
    variants = data["variants"]
    declared = resolve_offer(table, pricing.offer)
    if declared.id == MACHINE_OFFER_ID:  # the demo's own offer, said so (R5.6)
        data["note"] += (
            f" The declared offer {MACHINE_OFFER_ID} was written by gpubench-nb for the machine "
            f"this bundle ran on ({declared.hardware}), with invented placeholder prices, so that "
            "a cost per accepted corpus shows on any machine; it is attributed by the same rule "
            "as every offer."
        )
    data["pricing"] = {
        "offers_file": str(offers_file),
        "offers_sha256": sha256_file(offers_file),  # check-bundle re-prices with this table
        "offer": declared.id,
        "days": pricing.days,
        "lots": pricing.lots,
        "gpus": pricing.gpus,
    }
    quotes = {offer_id: quote_for(offer, pricing) for offer_id, offer in table.items()}
    owners = {}
    for offer_id, quote in quotes.items():
        offer = table[offer_id]
        owners[offer_id] = attribute(
            offer_id=offer.id,
            offer_gpu_model=offer.gpu_model,
            gpus_per_lot=offer.gpus_per_lot,
            lots=quote.lots,
            hardware=hardware,
            declared_offer_id=declared.id,
            offer_cpu_model=offer.cpu_model,
        )
        data["offers"].append(_offer_entry(offer, quote, declared.id, variants, owners[offer_id]))
    measured = [offer_id for offer_id, owner in owners.items() if owner.attributable]
    if not any(fact["accepted"] for fact in variants):
        data["break_even"]["reason"] = (
            "no variant was accepted: there is no measured cost per result to beat (R5.5, R5.7)"
        )
    elif not measured:
        data["break_even"]["reason"] = (
            f"no offer's hardware accepted the corpus (it was accepted on "
            f"{hardware.describe()}): there is no measured cost per result to beat (R5.7)"
        )
    else:
        data["break_even"] = break_even(table, pricing, measured)


def _offer_entry(
    offer: Offer,
    quote: PackageQuote,
    declared_id: str,
    variants: list[dict[str, Any]],
    owner: Attribution,
) -> dict[str, Any]:
    per_variant = []
    for fact in variants:
        # R5.7: only an accepted variant has a measured accepted count (1 distinct corpus),
        # and only on the offer whose hardware accepted it (R2.4).
        accepted_results = 1 if fact["accepted"] and owner.attributable else None
        cost = cost_per_accepted_usd_minor(quote.package_total_usd_minor, accepted_results)
        reason = fact["reason"]
        if fact["accepted"] and not owner.attributable:
            reason = owner.reason
        per_variant.append(
            {
                "variant_id": fact["variant_id"],
                "accepted_results": accepted_results,
                "cost_per_accepted_usd_minor": cost,
                "reason": reason,
            }
        )
    return {
        "offer_id": offer.id,
        "provider": offer.provider,
        "gpu_model": offer.gpu_model,
        "cpu_model": offer.cpu_model,  # a CPU-only offer's hardware (gpus_per_lot 0)
        "gpus_per_lot": offer.gpus_per_lot,
        "days": quote.days,
        "lots": quote.lots,
        "package_total_usd_minor": quote.package_total_usd_minor,
        "placeholder": offer.placeholder,  # invented example prices, not a quote
        "declared": offer.id == declared_id,
        "note": " ".join(package_terms(offer, quote.days, quote.lots, None)[2]),
        "attribution": owner.to_dict(),
        "variants": per_variant,
    }

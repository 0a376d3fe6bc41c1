"""Break-even thresholds between offers: a threshold, never a forecast (R5.3, R5.5, R5.7)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpubench_nb.economics.offers import Offer, break_even_accepted, package_quote


def break_even_statement(
    challenger_id: str, reference_id: str, needed: int | None, reference_total_usd_minor: int
) -> str:
    """The threshold as one sentence (R5.5: a threshold, not a forecast)."""
    if needed is None:
        return f"{reference_id}'s package costs 0 cents: no count of accepted corpora beats it"
    corpora = "accepted corpus" if needed == 1 else "accepted corpora"
    return (
        f"{challenger_id}'s package costs less per accepted corpus than {reference_id}'s single "
        f"measured corpus ({reference_total_usd_minor} cents) once {challenger_id} delivers "
        f"{needed} {corpora}; a threshold, not a forecast"
    )


def break_even(table: Mapping[str, Offer], pricing: Any, measured: Sequence[str]) -> dict[str, Any]:
    """Thresholds of every other offer against each offer that measured its 1 accepted corpus
    (R2.4, R5.7: an offer that measured nothing has no cost per result to beat)."""
    pairs = []
    for ref_id in measured:
        ref_offer = table[ref_id]
        reference = package_quote(
            ref_offer, pricing.days, lots=pricing.lots, gpus=pricing.gpus, accepted_results=1
        )
        for ch_id, ch_offer in table.items():
            if ch_id == ref_id:
                continue
            challenger = package_quote(ch_offer, pricing.days, lots=pricing.lots, gpus=pricing.gpus)
            needed = break_even_accepted(challenger, reference)
            statement = break_even_statement(
                ch_id, ref_id, needed, reference.package_total_usd_minor
            )
            pairs.append(
                {
                    "challenger": ch_id,
                    "reference": ref_id,
                    "accepted_corpora_needed": needed,
                    "statement": statement,
                }
            )
    return {
        "label": "threshold, not a forecast",
        "reference_accepted_results": 1,
        "reason": None,
        "pairs": pairs,
    }

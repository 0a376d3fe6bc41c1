"""The report's economics section: package totals and costs per accepted corpus as economics.json
holds them, break-even thresholds and the rental ledger, never re-derived here (R5.3-R5.7)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from gpubench_nb import formats
from gpubench_nb.economics.attribution import ATTRIBUTION_RULE, NOT_MEASURED
from gpubench_nb.economics.offers import real_quote_howto
from gpubench_nb.protocol.records import BreakEvenPair, OfferEconomics
from gpubench_nb.report.bundles import Bundle
from gpubench_nb.report.escape import md_code, md_text
from gpubench_nb.report.stats import shown, table


def economics_table(bundles: Sequence[Bundle]) -> pd.DataFrame | None:
    """Per bundle and offer: the package total and the cost per accepted corpus per variant,
    as economics.json holds them (never re-derived here, R5.3, R5.7)."""
    records = []
    for b in bundles:
        for offer in b.economics.offers if b.economics else ():
            owner = b.attribution(offer)
            record = {
                "bundle": b.label,
                "offer": offer.offer_id,
                "declared offer": offer.declared,
                "offer GPU": offer.gpu_model or "none (CPU-only)",
                "days": offer.days,
                "lots": offer.lots,
                "package total (USD)": formats.price(
                    offer.package_total_usd_minor, placeholder=offer.placeholder
                ),
                "measured on this hardware?": owner.reason
                + (f"; {owner.lot_note}" if owner.lot_note else ""),
            }
            for cell in offer.cells:
                cost = cell.cost_per_accepted_usd_minor
                if not owner.attributable:
                    text = NOT_MEASURED
                elif cost is not None:
                    text = formats.price(cost, placeholder=offer.placeholder)
                else:
                    text = "none (not accepted)"
                record[f"{cell.variant_id}: USD per accepted corpus"] = text
            records.append(record)
    return shown(table(records, ["bundle", "offer"])) if records else None


def economics_markdown(bundles: Sequence[Bundle]) -> str:
    """The unit of work and what is and is not computed, per bundle (R5.3, R5.4, R5.5)."""
    lines = [f"**How costs are attributed.** {ATTRIBUTION_RULE}"]
    for b in bundles:
        data = b.economics
        if data is None:
            lines.append(
                f"**{md_text(b.label)}**: no economics.json in the bundle: no package is priced."
            )
            continue
        lines.append(f"**{md_text(b.label)}**: {md_text(data.note or '')}")
        if data.unit_of_work:
            lines.append(f"Unit of work (R5.4): {md_text(data.unit_of_work)}.")
        if not data.offers:
            lines.append("No offer was priced (no pricing section declared, R5.5).")
        examples = [o.offer_id for o in data.offers if o.placeholder]
        if examples:
            lines.append(
                f"**Placeholder prices ({', '.join(examples)}):** invented examples "
                f"(`placeholder: true`), so each is shown as [{formats.PLACEHOLDER_MARK}] and "
                f"no cost drawn from them is a real cost. {real_quote_howto(examples)}; then "
                "rerun `gpubench-nb run` (no run is redone)."
            )
    return "\n\n".join(lines)


def break_even_markdown(bundles: Sequence[Bundle]) -> str:
    """Per bundle, each threshold of economics.json as a sentence (R5.3); only an offer whose
    hardware accepted the corpus is a reference (R5.7). A threshold, never a forecast (R5.5)."""
    lines, reasons = [], []
    for b in bundles:
        data = b.economics
        offers = {o.offer_id: o for o in data.offers} if data else {}
        found = data.break_even_pairs if data else ()
        pairs = [
            p
            for p in found
            if p.reference in offers and b.attribution(offers[p.reference]).attributable
        ]
        if pairs:
            lines += [f"**{md_text(b.label)}**", *(_break_even(p, offers) for p in pairs), ""]
            continue
        why = (data.break_even_reason if data else None) or (
            "no offer's hardware accepted the corpus: no measured cost per result to beat"
            if found
            else "economics.json records no break-even threshold"
        )
        reasons.append(f"- {md_text(b.label)}: {md_text(why)}.")
    return "\n".join(lines + reasons).strip() or "No bundle was priced: no break-even threshold."


def _break_even(pair: BreakEvenPair, offers: Mapping[str, OfferEconomics]) -> str:
    """A's package costs less per accepted corpus than B's single corpus once A delivers N."""
    challenger, reference = md_text(pair.challenger), md_text(pair.reference)
    ch, ref = offers.get(pair.challenger), offers[pair.reference]
    ref_price = formats.price(ref.package_total_usd_minor, placeholder=ref.placeholder)
    needed = pair.accepted_corpora_needed
    ch_price = formats.price(
        ch.package_total_usd_minor if ch else None, placeholder=bool(ch and ch.placeholder)
    )
    corpora = "accepted corpus" if needed == 1 else "accepted corpora"
    return (
        f"- {challenger}'s package ({ch_price}) costs less per accepted corpus than "
        f"{reference}'s single measured corpus ({ref_price}) once {challenger} delivers "
        f"**{formats.count(needed)}** {corpora} (a threshold, not a forecast)."
    )


def ledger_markdown(ledger_path: str | None) -> str:
    """The rental ledger, when the report was given one: the measured count and what was left
    out, never an estimate (R5.3, R5.5). An empty string when none was given."""
    if not ledger_path:
        return ""
    from gpubench_nb.economics.ledger import read_ledger

    data = read_ledger(ledger_path)
    window = data["window"]
    lines = [
        "## The rental ledger: accepted corpora counted on the rented machine",
        "",
        f"**{md_text(data['statement'])}**",
        "",
        *(
            f"- **Counted, but check-bundle refuses it now:** {md_text(s)}"
            for s in data["unverified"]
        ),
        f"- Package window: {md_text(window['start_utc'])} to {md_text(window['end_utc'])} "
        f"({md_text(window['status'])}, as of {md_text(window['as_of_utc'])}).",
        f"- Machine: host {md_text(data['machine'].get('hostname') or '—')}, GPUs "
        f"{md_text(', '.join(data['machine'].get('gpu_uuids') or []) or '—')} "
        f"(from {md_text(data['machine'].get('source'))}).",
        f"- Distinct accepted corpora: {formats.count(data['accepted_corpora'])} "
        "(a corpus repeated, reordered, or benchmarked in several experiments counts once; R5.3).",
    ]
    key = "corpus_identity" if "accepted_corpus_identities" in data else "corpus_revision"
    for entry in (
        data.get("accepted_corpus_identities") or data.get("accepted_corpus_revisions") or []
    ):
        lines.append(
            f"  - {md_code(str(entry[key])[:16] + '…')} accepted in {len(entry['bundles'])} "
            f"bundle(s): {', '.join(md_code(b) for b in entry['bundles'])}"
        )
    left = data.get("left_out") or []
    lines.append(f"- Left out: {len(left)} bundle(s)" + (":" if left else "."))
    lines += [f"  - {md_code(entry['bundle'])}: {md_text(entry['reason'])}" for entry in left]
    return "\n".join(lines)

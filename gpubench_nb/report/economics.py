"""The report's economics: package totals, cost per accepted corpus, faster-but-rejected (R5)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from gpubench_nb import formats
from gpubench_nb.economics import costs as economics
from gpubench_nb.economics.attribution import (
    ATTRIBUTION_RULE,
    NOT_MEASURED,
    Attribution,
    attribute,
    recorded_hardware,
)
from gpubench_nb.report.bundles import Bundle
from gpubench_nb.report.escape import md_code, md_text
from gpubench_nb.report.stats import NOT_RECORDED, shown, summarise


def _usd(cents: Any) -> str:
    """Integer cents as dollars, without floats (R4.2)."""
    if cents is None:
        return NOT_RECORDED
    whole, part = divmod(int(cents), 100)
    return f"{whole:,}.{part:02d}"


def offer_owner(bundle: Bundle, offer: Mapping[str, Any]) -> Attribution:
    """Whether ``offer`` (an economics.json entry) accepted this bundle's corpus (R2.4, R5.7).

    Re-derived from the bundle's recorded hardware with the same rule economics.json applies,
    so an economics.json written before the rule existed is read correctly too.
    """
    declared = next(
        (
            o.get("offer_id")
            for o in (bundle.economics or {}).get("offers") or []
            if o.get("declared")
        ),
        None,
    )
    return attribute(
        offer_id=str(offer.get("offer_id")),
        offer_gpu_model=str(offer.get("gpu_model")),
        gpus_per_lot=int(offer.get("gpus_per_lot") or 1),
        lots=int(offer.get("lots") or 1),
        hardware=recorded_hardware(bundle.rows, bundle.environment),
        declared_offer_id=declared,
    )


def economics_table(bundles: Sequence[Bundle]) -> pd.DataFrame | None:
    """Per bundle and offer: the package total and the cost per accepted corpus per variant."""
    records = []
    for b in bundles:
        for offer in (b.economics or {}).get("offers") or []:
            owner = offer_owner(b, offer)
            record = {
                "bundle": b.label,
                "offer": offer.get("offer_id"),
                "declared offer": offer.get("declared"),
                "offer GPU": offer.get("gpu_model"),
                "days": offer.get("days"),
                "lots": offer.get("lots"),
                "package total (USD)": _usd(offer.get("package_total_usd_minor")),
                "measured on this hardware?": owner.reason
                + (f"; {owner.lot_note}" if owner.lot_note else ""),
            }
            for cell in offer.get("variants") or []:
                cost = cell.get("cost_per_accepted_usd_minor")
                if not owner.attributable:
                    text = NOT_MEASURED
                elif cost is not None:
                    text = _usd(cost)
                else:
                    text = "none (not accepted)"
                record[f"{cell.get('variant_id')}: USD per accepted corpus"] = text
            records.append(record)
    if not records:
        return None
    return shown(pd.DataFrame.from_records(records).set_index(["bundle", "offer"]))


def economics_markdown(bundles: Sequence[Bundle]) -> str:
    """The unit of work and what is and is not computed, per bundle (R5.3, R5.4, R5.5)."""
    lines = [f"**How costs are attributed.** {ATTRIBUTION_RULE}"]
    for b in bundles:
        data = b.economics
        if not data:
            lines.append(
                f"**{md_text(b.label)}**: no economics.json in the bundle: no package is priced."
            )
            continue
        lines.append(f"**{md_text(b.label)}**: {md_text(data.get('note') or '')}")
        if data.get("unit_of_work"):
            lines.append(f"Unit of work (R5.4): {md_text(data['unit_of_work'])}.")
        if not data.get("offers"):
            lines.append("No offer was priced (no pricing section declared, R5.5).")
    return "\n\n".join(lines)


def break_even_markdown(bundles: Sequence[Bundle]) -> str:
    """Per bundle, each threshold as a sentence: A's package costs less per accepted corpus than
    B's single measured corpus once A delivers N accepted corpora (R5.3).

    Read from ``economics.json``; only an offer whose hardware accepted the corpus is a
    reference (R5.7). A threshold, never a forecast of what a package will deliver (R5.5).
    """
    lines, reasons = [], []
    for b in bundles:
        data = b.economics or {}
        block = data.get("break_even") or {}
        offers = {o.get("offer_id"): o for o in data.get("offers") or []}
        pairs = [
            p
            for p in block.get("pairs") or []
            if p.get("reference") in offers and offer_owner(b, offers[p["reference"]]).attributable
        ]
        if not pairs:
            why = block.get("reason") or (
                "no offer's hardware accepted the corpus: no measured cost per result to beat"
                if block.get("pairs")
                else "economics.json records no break-even threshold"
            )
            reasons.append(f"- {md_text(b.label)}: {md_text(why)}.")
            continue
        lines.append(f"**{md_text(b.label)}**")
        for pair in pairs:
            challenger, reference = md_text(pair.get("challenger")), md_text(pair.get("reference"))
            needed = pair.get("accepted_corpora_needed")
            ch_total = (offers.get(pair.get("challenger")) or {}).get("package_total_usd_minor")
            ref_total = offers[pair["reference"]].get("package_total_usd_minor")
            if needed is None:
                lines.append(
                    f"- {reference}'s package costs {formats.usd(ref_total)}: no count of "
                    f"accepted corpora makes {challenger} cheaper."
                )
                continue
            corpora = "accepted corpus" if needed == 1 else "accepted corpora"
            lines.append(
                f"- {challenger}'s package ({formats.usd(ch_total)}) costs less per accepted "
                f"corpus than {reference}'s single measured corpus ({formats.usd(ref_total)}) "
                f"once {challenger} delivers **{formats.count(needed)}** {corpora} (a "
                "threshold, not a forecast)."
            )
        lines.append("")
    return "\n".join(lines + reasons).strip() or "No bundle was priced: no break-even threshold."


def _variant_status(bundle: Bundle) -> dict[str, tuple[bool | None, str | None]]:
    """variant -> (accepted, reason): economics.json's verdict, else re-derived from the rows."""
    facts = (bundle.economics or {}).get("variants")
    if facts:
        return {
            f["variant_id"]: (
                True
                if f.get("accepted")
                else None
                if f.get("status") == "acceptance not recorded"  # R4.3: unknown is not "no"
                else False,
                f.get("reason"),
            )
            for f in facts
        }
    out = {}
    for variant, entry in economics.variant_acceptance(bundle.rows).items():
        verdict = {1: True, 0: False}.get(entry["accepted_unique_corpora"])
        reason = None
        if verdict is False:
            measured = entry["measured_runs"]
            reason = f"{measured - entry['accepted_runs']} of {measured} measured runs not accepted"
        out[variant] = (verdict, reason)
    return out


def not_accepted_markdown(bundles: Sequence[Bundle], rows: pd.DataFrame) -> str:
    """A visible sentence for each variant faster than the fastest accepted one but not accepted.

    R5.7: a faster configuration that was not accepted does not reach the same goal. Speed is
    the median warm elapsed time (cold when no warm run was timed).
    """
    summary = summarise(rows)
    lines = []
    for b in bundles:
        status = _variant_status(b)
        mine = summary[summary["bundle"] == b.label]
        speed = {}
        for phase in ("cold", "warm"):  # warm overrides cold where both were timed
            part = mine[(mine["phase"] == phase) & (mine["n"] > 0)]
            speed.update(zip(part["variant_id"], part["median_seconds"], strict=True))
        accepted = {v: s for v, s in speed.items() if status.get(v, (None,))[0] is True}
        best = min(accepted, key=accepted.get) if accepted else None
        for variant, (verdict, reason) in status.items():
            if verdict is True:
                continue
            why = f" ({md_text(reason)})" if reason else ""
            state = "not accepted" if verdict is False else "acceptance not recorded"
            if best is not None and variant in speed and speed[variant] < accepted[best]:
                lines.append(
                    f"- **{md_text(b.label)} / {md_text(variant)} was faster but {state}**{why}: "
                    f"median {formats.seconds(speed[variant])} against "
                    f"{formats.seconds(accepted[best])} for {md_text(best)}, the "
                    "fastest accepted variant. It does not reach the same goal and has no cost "
                    "per accepted corpus (R5.7)."
                )
            else:
                lines.append(
                    f"- {md_text(b.label)} / {md_text(variant)}: {state}{why}; no cost per "
                    "result (R5.7)."
                )
        if best is None:
            lines.append(
                f"- {md_text(b.label)}: no variant was accepted, so no cost per result exists "
                "(R5.5)."
            )
    return "\n".join(lines) or "Every variant was accepted."


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

"""The report's economics: package totals, cost per accepted corpus, faster-but-rejected (R5)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from gpubench_nb.economics import costs as economics
from gpubench_nb.report.bundles import Bundle
from gpubench_nb.report.stats import NOT_RECORDED, shown, summarise


def _usd(cents: Any) -> str:
    """Integer cents as dollars, without floats (R4.2)."""
    if cents is None:
        return NOT_RECORDED
    whole, part = divmod(int(cents), 100)
    return f"{whole:,}.{part:02d}"


def economics_table(bundles: Sequence[Bundle]) -> pd.DataFrame | None:
    """Per bundle and offer: the package total and the cost per accepted corpus per variant."""
    records = []
    for b in bundles:
        for offer in (b.economics or {}).get("offers") or []:
            record = {
                "bundle": b.label,
                "offer": offer.get("offer_id"),
                "declared offer": offer.get("declared"),
                "offer GPU": offer.get("gpu_model"),
                "days": offer.get("days"),
                "lots": offer.get("lots"),
                "package total (USD)": _usd(offer.get("package_total_usd_minor")),
            }
            for cell in offer.get("variants") or []:
                cost = cell.get("cost_per_accepted_usd_minor")
                record[f"{cell.get('variant_id')}: USD per accepted corpus"] = (
                    _usd(cost) if cost is not None else "none (not accepted or not measured)"
                )
            records.append(record)
    if not records:
        return None
    return shown(pd.DataFrame.from_records(records).set_index(["bundle", "offer"]))


def economics_markdown(bundles: Sequence[Bundle]) -> str:
    """The unit of work and what is and is not computed, per bundle (R5.3, R5.4, R5.5)."""
    lines = []
    for b in bundles:
        data = b.economics
        if not data:
            lines.append(f"**{b.label}**: no economics.json in the bundle: no package is priced.")
            continue
        lines.append(f"**{b.label}**: {data.get('note') or ''}")
        if data.get("unit_of_work"):
            lines.append(f"Unit of work (R5.4): {data['unit_of_work']}.")
        if not data.get("offers"):
            lines.append("No offer was priced (no pricing section declared, R5.5).")
    return "\n\n".join(lines)


def break_even_table(bundles: Sequence[Bundle]) -> pd.DataFrame | str:
    """Per bundle, how many accepted corpora each offer needs to beat another's cost per result.

    Read from ``economics.json``: thresholds against a reference offer at its one measured
    accepted corpus (R5.3), never a forecast of what a package will deliver (R5.5). A string says
    why there is no table.
    """
    records, reasons = [], []
    for b in bundles:
        block = (b.economics or {}).get("break_even") or {}
        pairs = block.get("pairs") or []
        if not pairs:
            why = block.get("reason") or "economics.json records no break-even threshold"
            reasons.append(f"{b.label}: {why}.")
        for pair in pairs:
            needed = pair.get("accepted_corpora_needed")
            records.append(
                {
                    "bundle": b.label,
                    "offer": pair.get("challenger"),
                    "against": pair.get("reference"),
                    "accepted corpora needed (threshold, not a forecast)": (
                        NOT_RECORDED if needed is None else needed
                    ),
                }
            )
    if not records:
        return " ".join(reasons) or "No bundle was priced: no break-even threshold."
    return shown(pd.DataFrame.from_records(records).set_index(["bundle", "offer", "against"]))


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
            why = f" ({reason})" if reason else ""
            state = "not accepted" if verdict is False else "acceptance not recorded"
            if best is not None and variant in speed and speed[variant] < accepted[best]:
                lines.append(
                    f"- **{b.label} / {variant} was faster but {state}**{why}: median "
                    f"{speed[variant]:.4g} s against {accepted[best]:.4g} s for {best}, the "
                    "fastest accepted variant. It does not reach the same goal and has no cost "
                    "per accepted corpus (R5.7)."
                )
            else:
                lines.append(f"- {b.label} / {variant}: {state}{why}; no cost per result (R5.7).")
        if best is None:
            lines.append(
                f"- {b.label}: no variant was accepted, so no cost per result exists (R5.5)."
            )
    return "\n".join(lines) or "Every variant was accepted."

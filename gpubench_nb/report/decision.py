"""The answer first: one row per (bundle, variant), and who is cheapest and fastest (R5.3, R5.7).

Pure functions over loaded bundles: accepted or not (and why, in words), the median warm time
per corpus with its min–max (R3.5), cold and load, peak memory where measured, the declared
package total and the cost per accepted corpus only where the hardware that accepted the corpus
is the offer's (economics.attribution). :func:`decision_view` takes bundle folders, so a
campaign can call it over many targets.
"""

from __future__ import annotations

import html
import os
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from gpubench_nb import formats
from gpubench_nb.economics.attribution import NOT_MEASURED
from gpubench_nb.protocol.records import MEASURED_PHASES, Phase
from gpubench_nb.report.bundles import Bundle, load_bundles

PROTOCOL_REPEATS = 5  # R3.4: each variant measured five times
TABLE_ID = "decision-table"


@dataclass(frozen=True)
class Option:
    """One (bundle, variant): what a reader needs to choose, every number measured."""

    bundle: str
    variant_id: str
    knob: str | None  # "batch=4"
    accepted: bool | None  # None: acceptance not recorded (R4.3)
    why_not: str | None
    warm_seconds: tuple[float, ...]  # timed warm runs, failed ones excluded (R3.6)
    cold_median_seconds: float | None
    load_median_seconds: float | None
    peak_allocated_bytes: float | None  # median over timed warm runs; None = not measured
    peak_reserved_bytes: float | None
    offer_id: str | None  # the declared offer (pricing.offer)
    package: str | None  # "7 days × 1 lot"
    package_total_usd_minor: int | None
    cost_per_accepted_usd_minor: int | None
    cost_note: str | None  # why there is no cost per accepted corpus
    lot_note: str | None = None  # GPUs billed but not used (R2.5)

    @property
    def warm_median_seconds(self) -> float | None:
        return statistics.median(self.warm_seconds) if self.warm_seconds else None

    @property
    def warm_range(self) -> tuple[float, float] | None:
        return (min(self.warm_seconds), max(self.warm_seconds)) if self.warm_seconds else None

    @property
    def name(self) -> str:
        return f"{self.bundle} / {self.variant_id}"


@dataclass(frozen=True)
class DecisionView:
    """The decision table's options and the sentences that read it."""

    options: list[Option]
    sentences: list[str] = field(default_factory=list)


def _failed(row: Mapping[str, Any]) -> bool:
    return row.get("elapsed_seconds") is None or bool(row.get("error"))


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _short_error(error: str | None) -> str:
    text = (error or "").lower()
    if "out of memory" in text or "oom" in text.split():
        return "out of memory"
    return "error" if error else "no elapsed time"


def why_not(runs: Sequence[Mapping[str, Any]]) -> str | None:
    """Why a variant was not accepted, in words, with how many runs each reason hit (R1.5)."""
    reasons: Counter[str] = Counter()
    for row in runs:
        if row.get("corpus_accepted") is True:
            continue
        if row.get("corpus_accepted") is None and not _failed(row):
            reasons["acceptance not recorded"] += 1
        elif _failed(row) and row.get("ids_match") is not True:
            reasons[f"run failed: {_short_error(row.get('error'))}"] += 1
        elif row.get("ids_match") is False:
            reasons["IDs do not match the expected set"] += 1
        elif row.get("format_valid") is False:
            reasons["output format invalid"] += 1
        elif row.get("meets_threshold") is False or (
            row.get("quality_value") is not None
            and row.get("quality_threshold") is not None
            and row["quality_value"] < row["quality_threshold"]
        ):
            reasons[
                f"{row.get('quality_metric') or 'quality'} {formats.number(row['quality_value'])}"
                f" below the threshold {formats.number(row.get('quality_threshold'))}"
            ] += 1
        elif row.get("within_tolerance") is False:
            reasons["quality dropped more than the tolerance below the reference"] += 1
        else:
            reasons["not accepted"] += 1
    if not reasons:
        return None
    total = len(runs)
    return "; ".join(f"{reason} ({n} of {total} runs)" for reason, n in reasons.items())


def _cost(
    bundle: Bundle, variant: str, accepted: bool | None
) -> tuple[int | None, str | None, str | None]:
    """(cost per accepted corpus, why none, GPUs billed but not used) on the declared offer, as
    economics.json holds them: the report reads the one computation (R5.3, R5.7)."""
    offer = bundle.economics.declared_offer if bundle.economics is not None else None
    if offer is None:
        return None, "no package declared (no pricing section)", None
    owner = bundle.attribution(offer)
    if accepted is not True:
        return None, "not accepted: no accepted corpus, no cost (R5.7)", owner.lot_note
    if not owner.attributable:
        return None, owner.reason, None
    cell = offer.cell(variant)
    if cell is None or cell.cost_per_accepted_usd_minor is None:
        why = (cell.reason if cell else None) or "economics.json records no cost for it"
        return None, why, owner.lot_note
    return cell.cost_per_accepted_usd_minor, None, owner.lot_note


def bundle_options(bundle: Bundle) -> list[Option]:
    """The options of one bundle, variants in the declared order."""
    offer = bundle.economics.declared_offer if bundle.economics is not None else None
    verdicts = bundle.verdicts()
    knob = bundle.declared("knob")
    values = {v.get("id"): v.get(knob) for v in bundle.declared("variants") or [] if knob}
    options = []
    for variant in dict.fromkeys(r["variant_id"] for r in bundle.rows):
        mine = [r for r in bundle.rows if r["variant_id"] == variant]
        measured = [r for r in mine if r["phase"] in MEASURED_PHASES]

        def timed(phase: str, rows: list[dict[str, Any]] = mine) -> list[float]:
            return [
                float(r["elapsed_seconds"]) for r in rows if r["phase"] == phase and not _failed(r)
            ]

        accepted = verdicts.get(str(variant), (False, None))[0]
        warm = [r for r in mine if r["phase"] == Phase.WARM and not _failed(r)]
        cost, note, lot_note = _cost(bundle, str(variant), accepted)
        options.append(
            Option(
                bundle=bundle.label,
                variant_id=str(variant),
                knob=f"{knob}={values[variant]}" if values.get(variant) is not None else None,
                accepted=accepted,
                why_not=None if accepted else (why_not(measured) or "no measured run"),
                warm_seconds=tuple(timed(Phase.WARM)),
                cold_median_seconds=_median(timed(Phase.COLD)),
                load_median_seconds=_median(timed(Phase.LOAD)),
                peak_allocated_bytes=_median(
                    [r["peak_allocated_bytes"] for r in warm if r.get("peak_allocated_bytes")]
                ),
                peak_reserved_bytes=_median(
                    [r["peak_reserved_bytes"] for r in warm if r.get("peak_reserved_bytes")]
                ),
                offer_id=offer.offer_id if offer else None,
                package=f"{offer.days} days × {offer.lots} lot(s)" if offer else None,
                package_total_usd_minor=offer.package_total_usd_minor if offer else None,
                cost_per_accepted_usd_minor=cost,
                cost_note=note,
                lot_note=lot_note,
            )
        )
    return options


def _overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def decision_sentences(options: Sequence[Option]) -> list[str]:
    """The cheapest and the fastest accepted option, with the caveats that apply (R3.5, R5.7)."""
    accepted = [o for o in options if o.accepted is True]
    if not accepted:
        return [
            "No option was accepted: none reaches the goal, so there is no cheapest or fastest "
            "option to name (R1.5, R5.7)."
        ]
    out = []
    priced = [o for o in accepted if o.cost_per_accepted_usd_minor is not None]
    if priced:
        best = min(o.cost_per_accepted_usd_minor for o in priced)  # type: ignore[type-var]
        cheapest = [o for o in priced if o.cost_per_accepted_usd_minor == best]
        by_bundle: dict[str, list[Option]] = {}
        for o in cheapest:
            by_bundle.setdefault(o.bundle, []).append(o)
        names = [
            f"{bundle} ({group[0].offer_id}, {group[0].package}; variants "
            f"{', '.join(o.variant_id for o in group)})"
            for bundle, group in by_bundle.items()
        ]
        out.append(
            f"Cheapest accepted option: {' and, tied, '.join(names)} at {formats.usd(best)} per "
            "accepted corpus: the whole package divided by the 1 distinct corpus accepted on "
            "that hardware (R5.3). Every accepted variant of one package costs the same; speed "
            "decides between them."
        )
    else:
        why = sorted({o.cost_note for o in accepted if o.cost_note})
        out.append(
            "No accepted option has a cost per accepted corpus measured on the hardware of its "
            f"package ({'; '.join(why)}). Only package totals are shown (R5.5, R5.7)."
        )
    timed = [o for o in accepted if o.warm_seconds]
    if not timed:
        out.append("No accepted option has a timed warm run: no fastest option can be named.")
        return out
    fastest = min(timed, key=lambda o: o.warm_median_seconds)  # type: ignore[arg-type, return-value]
    low, high = fastest.warm_range  # type: ignore[misc]
    runs = len(fastest.warm_seconds)
    sentence = (
        f"Fastest accepted option: {fastest.name}, median warm time per corpus "
        f"{formats.seconds(fastest.warm_median_seconds)} ({formats.seconds(low)} – "
        f"{formats.seconds(high)} over {runs} runs)."
    )
    close = [
        o
        for o in timed
        if o is not fastest and _overlaps(fastest.warm_range, o.warm_range)  # type: ignore[arg-type]
    ]
    if close:
        sentence += (
            f" Not distinguishable on these {runs} runs from "
            + ", ".join(
                f"{o.name} ({formats.seconds_range(o.warm_median_seconds, *o.warm_range)})"  # type: ignore[misc]
                for o in close
            )
            + ": the min–max ranges overlap (R3.5)."
        )
    out.append(sentence)
    for o in options:
        if (
            o.accepted is not True
            and o.warm_seconds
            and o.warm_median_seconds < fastest.warm_median_seconds  # type: ignore[operator]
        ):
            state = "not accepted" if o.accepted is False else "its acceptance not recorded"
            out.append(
                f"{o.name} was faster (median {formats.seconds(o.warm_median_seconds)}) but "
                f"{state} ({o.why_not}): it does not reach the same goal (R5.7)."
            )
    few = [o for o in accepted if len(o.warm_seconds) < PROTOCOL_REPEATS]
    if few:
        out.append(
            "Fewer than 5 timed warm runs for "
            + ", ".join(f"{o.name} ({len(o.warm_seconds)})" for o in few)
            + ": the protocol measures each variant five times (R3.4); read these with care."
        )
    for bundle, note in dict.fromkeys((o.bundle, o.lot_note) for o in accepted if o.lot_note):
        out.append(f"{bundle}: {note}.")
    return out


def decision_view_of(bundles: Sequence[Bundle]) -> DecisionView:
    """The decision view of bundles already loaded."""
    options = [option for bundle in bundles for option in bundle_options(bundle)]
    return DecisionView(options, decision_sentences(options))


def decision_view(
    bundle_dirs: Sequence[str | os.PathLike[str]], *, allow_mismatch: bool = False
) -> DecisionView:
    """The decision view over bundle folders (unlike bundles refused, R2.1)."""
    return decision_view_of(load_bundles(list(bundle_dirs), allow_mismatch=allow_mismatch))


def _accepted_text(option: Option) -> str:
    if option.accepted is True:
        return "yes"
    if option.accepted is None:
        return "not recorded"
    return f"no: {option.why_not}"


def _memory_text(option: Option) -> str:
    if option.peak_allocated_bytes is None and option.peak_reserved_bytes is None:
        return formats.NOT_RECORDED
    return (
        f"{formats.size_bytes(option.peak_allocated_bytes)} allocated, "
        f"{formats.size_bytes(option.peak_reserved_bytes)} reserved"
    )


def _cost_text(option: Option) -> str:
    if option.cost_per_accepted_usd_minor is not None:
        return formats.usd(option.cost_per_accepted_usd_minor)
    note = option.cost_note or ""
    return NOT_MEASURED if note.startswith(NOT_MEASURED) else note.split(":")[0]


def decision_frame(view: DecisionView) -> pd.DataFrame:
    """The decision table, every number in human form (formats), indexed by bundle and variant."""
    records = []
    for o in view.options:
        warm = formats.NOT_RECORDED
        if o.warm_seconds:
            warm = (
                f"{formats.seconds_range(o.warm_median_seconds, *o.warm_range)}"  # type: ignore[misc]
                f", {len(o.warm_seconds)} runs"
            )
        records.append(
            {
                "bundle (machine)": o.bundle,
                "variant": f"{o.variant_id} ({o.knob})" if o.knob else o.variant_id,
                "accepted": _accepted_text(o),
                "warm per corpus: median (min – max)": warm,
                "cold (median)": formats.seconds(o.cold_median_seconds),
                "load (median)": formats.seconds(o.load_median_seconds),
                "peak memory (warm, median)": _memory_text(o),
                "declared package": (
                    f"{formats.usd(o.package_total_usd_minor)} ({o.offer_id}, {o.package})"
                    if o.offer_id
                    else formats.NOT_RECORDED
                ),
                "per accepted corpus": _cost_text(o),
            }
        )
    frame = pd.DataFrame.from_records(records)
    if frame.empty:
        return frame
    return frame.set_index(["bundle (machine)", "variant"])


def decision_html(view: DecisionView) -> str:
    """The decision table (id ``decision-table``) followed by its sentences, as HTML."""
    frame = decision_frame(view)
    table = (
        frame.to_html(table_id=TABLE_ID, na_rep=formats.NOT_RECORDED)
        if not frame.empty
        else "<p>No row in any bundle yet.</p>"
    )
    items = "".join(f"<li>{html.escape(s)}</li>" for s in view.sentences)
    return f'{table}\n<ul class="decision-sentences">{items}</ul>'

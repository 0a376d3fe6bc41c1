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
from gpubench_nb.economics.offers import REAL_QUOTE_HOWTO
from gpubench_nb.protocol.records import MEASURED_PHASES, Phase
from gpubench_nb.report.bundles import Bundle, load_bundles
from gpubench_nb.report.conditions import (
    RunConditions,
    VariantConditions,
    conditions_banner,
    variant_conditions,
)
from gpubench_nb.report.optimised import optimisation_sentences
from gpubench_nb.report.verdict import (
    DISTINGUISHABLE,
    NOT_DISTINGUISHABLE,
    OUTLIER_K,
    RULE_TEXT,
    TOO_FEW,
    compare_runs,
    outlier_fence,
    outlier_indices,
)

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
    warm_runs: tuple[int, ...] = ()  # run_index of each value of warm_seconds
    warm_conditions: tuple[RunConditions | None, ...] = ()  # aligned with warm_seconds
    conditions: VariantConditions | None = None  # over the warm runs (R2.5)
    quality: str | None = None  # "macro_f1 0.781 (threshold 0.70)"
    texts: int | None = None  # the corpus size: texts per pass
    warm_tokens_per_second: float | None = None  # median, where the backend counts tokens
    placeholder: bool = False  # the declared offer's prices are examples, not a quote

    @property
    def warm_outliers(self) -> tuple[int, ...]:
        """Positions in warm_seconds beyond the variant's fence (verdict.outlier_fence)."""
        return tuple(outlier_indices(self.warm_seconds))

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


def quality_text(runs: Sequence[Mapping[str, Any]]) -> str | None:
    """The declared metric's median over the measured runs against its threshold (R1.5)."""
    values = [float(r["quality_value"]) for r in runs if r.get("quality_value") is not None]
    if not values:
        return None
    metric = next((r.get("quality_metric") for r in runs if r.get("quality_metric")), "quality")
    threshold = next(
        (r.get("quality_threshold") for r in runs if r.get("quality_threshold") is not None), None
    )
    low, high = min(values), max(values)
    spread = "" if low == high else f" ({formats.number(low)} – {formats.number(high)})"
    text = f"{metric} {formats.number(statistics.median(values))}{spread}"
    if threshold is None:
        return text
    sign = "≥" if low >= float(threshold) else "<" if high < float(threshold) else "vs"
    return f"{text} {sign} {formats.number(float(threshold))}"


def _median_tokens_per_second(warm: Sequence[Mapping[str, Any]]) -> float | None:
    rates = [
        float(r["tokens_processed"]) / float(r["elapsed_seconds"])
        for r in warm
        if r.get("tokens_processed") and r.get("elapsed_seconds")
    ]
    return statistics.median(rates) if rates else None


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
    rows = [{**r, "bundle": bundle.label} for r in bundle.rows]
    conditions = {c.variant_id: c for c in variant_conditions(rows)}
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
        texts = next((r.get("expected_ids") for r in measured if r.get("expected_ids")), None)
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
                warm_runs=tuple(int(r["run_index"]) for r in warm),
                warm_conditions=tuple(r.get("conditions") for r in warm),
                conditions=conditions.get(str(variant)),
                quality=quality_text(measured),
                texts=int(texts) if texts else None,
                warm_tokens_per_second=_median_tokens_per_second(warm),
                placeholder=bool(offer.placeholder) if offer else False,
            )
        )
    return options


def fastest_sentence(fastest: Option, others: Sequence[Option]) -> str:
    """The fastest accepted option, and against each other one the verdict of THE rule
    (report.verdict.compare_runs, stated in the sentence); min–max stays shown (R3.5)."""
    low, high = fastest.warm_range  # type: ignore[misc]
    sentence = (
        f"Fastest accepted option: {fastest.name}, median warm time per corpus "
        f"{formats.seconds(fastest.warm_median_seconds)} ({formats.seconds(low)} – "
        f"{formats.seconds(high)} over {len(fastest.warm_seconds)} runs)."
    )
    if not others:
        return sentence
    groups: dict[str, list[str]] = {}
    for o in others:
        verdict = compare_runs(fastest.warm_seconds, o.warm_seconds)
        shown = (
            f"{o.name} ({formats.seconds_range(o.warm_median_seconds, *o.warm_range)}; "  # type: ignore[misc]
            f"{verdict.evidence()})"
        )
        groups.setdefault(verdict.verdict, []).append(shown)
    if groups.get(DISTINGUISHABLE):
        sentence += f" Faster than {', '.join(groups[DISTINGUISHABLE])}."
    if groups.get(NOT_DISTINGUISHABLE):
        sentence += (
            f" Not distinguishable from {', '.join(groups[NOT_DISTINGUISHABLE])}: these runs "
            "do not show which is faster."
        )
    if groups.get(TOO_FEW):
        sentence += f" Too few runs to decide against {', '.join(groups[TOO_FEW])}."
    return sentence + f" Rule: {RULE_TEXT} (R3.5, R3.6)."


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
        example = any(o.placeholder for o in cheapest)  # marked; how to fix: its own sentence
        out.append(
            f"Cheapest accepted option: {' and, tied, '.join(names)} at "
            f"{formats.price(best, placeholder=example)} per accepted corpus: the whole package "
            "divided by the 1 distinct corpus accepted on that hardware (R5.3). Every accepted "
            "variant of one package costs the same; speed decides between them."
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
    out.append(fastest_sentence(fastest, [o for o in timed if o is not fastest]))
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


def placeholder_sentences(options: Sequence[Option]) -> list[str]:
    """Say that example prices are not prices, and how to enter a real quote."""
    examples = list(dict.fromkeys(str(o.offer_id) for o in options if o.placeholder))
    if not examples:
        return []
    return [
        f"Prices marked [{formats.PLACEHOLDER_MARK}] ({', '.join(examples)}) are invented "
        f"examples from the offers table, not quotes: no cost here is a real cost; "
        f"{REAL_QUOTE_HOWTO}, then rerun gpubench-nb run (no run is redone)."
    ]


def decision_view_of(bundles: Sequence[Bundle]) -> DecisionView:
    """The decision view of bundles already loaded."""
    options = [option for bundle in bundles for option in bundle_options(bundle)]
    optimised = [line for bundle in bundles for line in optimisation_sentences(bundle)]
    sentences = decision_sentences(options) + optimised + placeholder_sentences(options)
    return DecisionView(options, sentences)


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


# The first screen holds the whole table (1400 × 900): compact cells, and the words that
# carry the answer kept on one line.
_TABLE_STYLE = (
    "<style>#decision-table{font-size:12px;line-height:1.25}"
    "#decision-table td,#decision-table th{padding:3px 6px}</style>"
)


def _cost_text(option: Option) -> str:
    if option.cost_per_accepted_usd_minor is not None:
        return formats.price(option.cost_per_accepted_usd_minor, placeholder=option.placeholder)
    note = option.cost_note or ""
    return NOT_MEASURED if note.startswith(NOT_MEASURED) else note.split(":")[0]


def _warm_text(o: Option) -> str:
    """``500 ms (480 ms – 1.03 s), 5 runs; outlier: run 3``: the range stays (R3.5)."""
    if not o.warm_seconds:
        return formats.NOT_RECORDED
    text = (
        f"{formats.seconds_range(o.warm_median_seconds, *o.warm_range)}"  # type: ignore[misc]
        f", {len(o.warm_seconds)} runs"
    )
    marked = [o.warm_runs[i] for i in o.warm_outliers if i < len(o.warm_runs)]
    if marked:
        text += f"; outlier: run {', '.join(map(str, marked))} (kept, R3.6)"
    return text


def _per_text(o: Option) -> str:
    """Time per text and texts per second at the median warm time; tokens/s where counted."""
    median = o.warm_median_seconds
    if not median or not o.texts:
        return formats.NOT_RECORDED
    parts = [f"{formats.seconds(median / o.texts)} per text", formats.rate(o.texts / median)]
    if o.warm_tokens_per_second:
        parts.append(formats.rate(o.warm_tokens_per_second, "tokens/s"))
    return "; ".join(parts)


def decision_frame(view: DecisionView) -> pd.DataFrame:
    """The decision table, every number in human form (formats), indexed by bundle and variant."""
    records = []
    for o in view.options:
        records.append(
            {
                "bundle (machine)": o.bundle,
                "variant": f"{o.variant_id} ({o.knob})" if o.knob else o.variant_id,
                "accepted": _accepted_text(o),
                "quality vs threshold": o.quality or formats.NOT_RECORDED,
                "warm per corpus: median (min – max)": _warm_text(o),
                "warm per text, throughput": _per_text(o),
                "cold · load (median)": (
                    f"{formats.seconds(o.cold_median_seconds)} · "
                    f"{formats.seconds(o.load_median_seconds)}"
                ),
                "peak memory (warm, median)": _memory_text(o),
                "machine during warm runs": o.conditions.text()
                if o.conditions
                else formats.NOT_RECORDED,
                "declared package": (
                    f"{formats.price(o.package_total_usd_minor, placeholder=o.placeholder)} "
                    f"({o.offer_id}, {o.package})"
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


def outlier_lines(options: Sequence[Option]) -> list[str]:
    """Each warm outlier, kept (R3.6), with what its run recorded at that moment (R2.5)."""
    lines = []
    for o in options:
        fence = outlier_fence(o.warm_seconds)
        for i in o.warm_outliers:
            value = o.warm_seconds[i]
            ratio = value / fence.median_seconds if fence and fence.median_seconds > 0 else None
            run = o.warm_runs[i] if i < len(o.warm_runs) else "?"
            seen = o.warm_conditions[i] if i < len(o.warm_conditions) else None
            lines.append(
                f"{o.name}, warm run {run}: {formats.seconds(value)}"
                + (f", {formats.number(ratio)}× its variant's median" if ratio else "")
                + f" (fence {formats.seconds(fence.high_seconds)}). "  # type: ignore[union-attr]
                + (
                    f"Recorded then: {seen.text()}."
                    if seen is not None
                    else "Its run.json records no machine conditions."
                )
            )
    return lines


def decision_html(view: DecisionView) -> str:
    """The decision table (id ``decision-table``) followed by its sentences, as HTML."""
    frame = decision_frame(view)
    table = (
        frame.to_html(table_id=TABLE_ID, na_rep=formats.NOT_RECORDED)
        if not frame.empty
        else "<p>No row in any bundle yet.</p>"
    )
    banner = conditions_banner([o.conditions for o in view.options if o.conditions])
    banner_html = (
        f'<p class="conditions-banner" style="border:2px solid #d62728;padding:4px 8px">'
        f"<strong>{html.escape(banner)}</strong></p>"
        if banner
        else ""
    )
    items = "".join(f"<li>{html.escape(s)}</li>" for s in view.sentences)
    outliers = outlier_lines(view.options)
    outliers_html = (
        f"<p>Warm runs above their variant's median + {OUTLIER_K:g} × MAD: kept and marked, "
        "never dropped (R3.6):</p>"
        f'<ul class="outliers">{"".join(f"<li>{html.escape(x)}</li>" for x in outliers)}</ul>'
        if outliers
        else ""
    )
    return (
        f"{table}\n{_TABLE_STYLE}{banner_html}"
        f'<ul class="decision-sentences">{items}</ul>{outliers_html}'
    )

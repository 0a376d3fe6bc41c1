"""The answer first: one row per (bundle, variant) and who is cheapest and fastest (R5.3, R5.7); a
fastest option only where report.verdict and conditions allow (R2.5)."""

from __future__ import annotations

import html
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from gpubench_nb import formats
from gpubench_nb.economics.attribution import NOT_MEASURED
from gpubench_nb.economics.offers import REAL_QUOTE_HOWTO
from gpubench_nb.protocol.capabilities import OPTIMISATIONS
from gpubench_nb.protocol.experiment_rules import MIN_REPEATS
from gpubench_nb.protocol.records import MEASURED_PHASES, Phase
from gpubench_nb.report.bundles import Bundle, summary_of
from gpubench_nb.report.conditions import ADVICE, ConditionsCheck, conditions_check
from gpubench_nb.report.stats import PhaseSummary, Summary, failed, table
from gpubench_nb.report.verdict import (
    DISTINGUISHABLE,
    NOT_DISTINGUISHABLE,
    OUTLIER_K,
    RULE_TEXT,
    TOO_FEW,
    compare_runs,
    outlier_fence,
)

TABLE_ID = "decision-table"


@dataclass(frozen=True)
class Option:
    """One (bundle, variant): its phases from the summary, and its package and cost."""

    warm: PhaseSummary
    cold: PhaseSummary | None = None
    load: PhaseSummary | None = None
    knob: str | None = None  # "batch=4"
    why_not: str | None = None
    offer_id: str | None = None  # the declared offer (pricing.offer)
    package: str | None = None  # "7 days × 1 lot"
    package_total_usd_minor: int | None = None
    cost_per_accepted_usd_minor: int | None = None
    cost_note: str | None = None  # why there is no cost per accepted corpus
    lot_note: str | None = None  # GPUs billed but not used (R2.5)
    quality: str | None = None  # "macro_f1 0.781 ≥ 0.70"
    placeholder: bool = False  # the declared offer's prices are examples, not a quote

    bundle = property(lambda self: self.warm.bundle)
    variant_id = property(lambda self: self.warm.variant_id)
    name = property(lambda self: self.warm.name)
    accepted = property(lambda self: self.warm.verdict)
    conditions = property(lambda self: self.warm.machine)  # over its timed warm runs (R2.5)


@dataclass(frozen=True)
class DecisionView:
    """The decision table's options and the sentences that read it."""

    options: list[Option]
    sentences: list[str] = field(default_factory=list)
    check: ConditionsCheck = ConditionsCheck((), ())


def why_not(runs: Sequence[Mapping[str, Any]]) -> str | None:
    """Why a variant was not accepted, in words, with how many runs each reason hit (R1.5):
    the checks each run recorded (checks.json, the CSV), never re-derived here."""
    reasons: Counter[str] = Counter()
    for row in runs:
        if row.get("corpus_accepted") is True:
            continue
        if row.get("corpus_accepted") is None and not failed(row):
            reasons["acceptance not recorded"] += 1
        elif failed(row) and row.get("ids_match") is not True:
            oom = "out of memory" if row.get("out_of_memory") else "error"
            reasons[f"run failed: {oom if row.get('error') else 'no elapsed time'}"] += 1
        elif row.get("ids_match") is False:
            reasons["IDs do not match the expected set"] += 1
        elif row.get("format_valid") is False:
            reasons["output format invalid"] += 1
        elif row.get("meets_threshold") is False:
            reasons[
                f"{row.get('quality_metric') or 'quality'} {formats.number(row['quality_value'])}"
                f" below the threshold {formats.number(row.get('quality_threshold'))}"
            ] += 1
        elif row.get("within_tolerance") is False:
            reasons["quality dropped more than the tolerance below the reference"] += 1
        else:
            reasons["not accepted"] += 1
    total = len(runs)
    return "; ".join(f"{reason} ({n} of {total} runs)" for reason, n in reasons.items()) or None


def quality_text(runs: Sequence[Mapping[str, Any]]) -> str | None:
    """The declared metric's median over the measured runs against its threshold (R1.5); the
    sign is what the runs' checks recorded (≥ all met, < none met, vs otherwise)."""
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
    met = {r.get("meets_threshold") for r in runs if r.get("quality_value") is not None}
    sign = {frozenset({True}): "≥", frozenset({False}): "<"}.get(frozenset(met), "vs")
    return f"{text} {sign} {formats.number(float(threshold))}"


def _cost(bundle: Bundle, variant: str, accepted: bool | None) -> dict[str, Any]:
    """The declared offer's package, and the cost per accepted corpus (or why none) as
    economics.json holds them: the report reads the one computation (R5.3, R5.7)."""
    offer = bundle.economics.declared_offer if bundle.economics is not None else None
    if offer is None:
        return {"cost_note": "no package declared (no pricing section)"}
    owner, cell = bundle.attribution(offer), offer.cell(variant)
    out: dict[str, Any] = {
        "offer_id": offer.offer_id,
        "package": f"{offer.days} days × {offer.lots} lot(s)",
        "package_total_usd_minor": offer.package_total_usd_minor,
        "placeholder": bool(offer.placeholder),
        "lot_note": owner.lot_note,  # None unless the offer is attributable (R2.5)
    }
    if accepted is not True:
        return {**out, "cost_note": "not accepted: no accepted corpus, no cost (R5.7)"}
    if not owner.attributable:
        return {**out, "cost_note": owner.reason}
    if cell is None or cell.cost_per_accepted_usd_minor is None:
        why = (cell.reason if cell else None) or "economics.json records no cost for it"
        return {**out, "cost_note": why}
    return {**out, "cost_per_accepted_usd_minor": cell.cost_per_accepted_usd_minor}


def _option(bundle: Bundle, variant: str, summary: Summary) -> Option:
    """One (bundle, variant) of the decision table, read from ``summary``."""
    label, knob = bundle.label, bundle.declared("knob")
    values = {v.get("id"): v.get(knob) for v in bundle.declared("variants") or [] if knob}
    acceptance, measured = summary.acceptance(label, variant), summary.measured(label, variant)
    accepted = acceptance.verdict if acceptance else None
    return Option(
        warm=summary.of(label, variant, Phase.WARM)
        or PhaseSummary(label, variant, Phase.WARM, (), acceptance),
        cold=summary.of(label, variant, Phase.COLD),
        load=summary.of(label, variant, Phase.LOAD),
        knob=f"{knob}={values[variant]}" if values.get(variant) is not None else None,
        why_not=None if accepted else (why_not(measured) or "no measured run"),
        quality=quality_text(measured),
        **_cost(bundle, variant, accepted),
    )


def _shown(o: Option, verdict: Any = None) -> str:
    text = formats.seconds_range(o.warm.median, o.warm.low, o.warm.high)
    return f"{o.name} ({text}; {verdict.evidence()})" if verdict else f"{o.name} ({text})"


def fastest_sentence(lowest: Option, others: Sequence[Option], check: ConditionsCheck) -> str:
    """THE rule between the lowest median and each other option: "Fastest accepted option" only when
    it separates them all and conditions allow (R2.5, R3.5)."""
    measured = (
        f"median warm time per corpus {formats.seconds(lowest.warm.median)} "
        f"({formats.seconds(lowest.warm.low)} – {formats.seconds(lowest.warm.high)} over "
        f"{lowest.warm.n} runs)"
    )
    if check.withheld:
        return (
            f"Verdict withheld: {lowest.name} has the lowest {measured}, but no option is shown "
            f"faster: the recorded conditions make this comparison unreliable "
            f"({'; '.join(check.withheld)}). To compare them, {ADVICE}. Medians: "
            + ", ".join(_shown(o) for o in others)
            + ". Median over fastest run: "
            + ", ".join(
                f"{o.name} {formats.number(o.warm.median / o.warm.low)}×"
                for o in (lowest, *others)
                if o.warm.low
            )  # fmt: skip
            + " (under contention a median measures the wait for the cores more than the setting)."
        )
    groups: dict[str, list[str]] = {}
    for o in others:
        verdict = compare_runs(lowest.warm.seconds, o.warm.seconds)
        groups.setdefault(verdict.verdict, []).append(_shown(o, verdict))
    if len(groups.get(DISTINGUISHABLE, [])) == len(others):
        sentence = f"Fastest accepted option: {lowest.name}, {measured}."
    else:
        shown = "fastest" if groups.get(DISTINGUISHABLE) else "faster"
        sentence = f"{lowest.name} has the lowest {measured}; no option is shown {shown}."
    sentence += "".join(
        tail.format(", ".join(groups[verdict])) for verdict, tail in _TAILS if verdict in groups
    )
    return sentence + (f" Rule: {RULE_TEXT} (R3.5, R3.6)." if others else "")


_TAILS = (  # what fastest_sentence adds per verdict of THE rule
    (DISTINGUISHABLE, " Faster than {}."),
    (NOT_DISTINGUISHABLE, " Not distinguishable from {}: these runs do not show which is faster."),
    (TOO_FEW, " Too few runs to decide against {}."),
)


def minima_sentence(lowest: Option, others: Sequence[Option]) -> str | None:
    """Where another option's fastest run beats the lowest median's fastest run: under load a
    median can measure contention for the cores more than the setting (R3.5: the range)."""
    quicker = [o for o in others if 0 < o.warm.low < lowest.warm.low]  # type: ignore[operator]
    if not quicker:
        return None
    named = ", ".join(
        f"{o.name}'s fastest warm run ({formats.seconds(o.warm.low)}) is "
        f"{formats.number(lowest.warm.low / o.warm.low)}× faster"  # type: ignore[operator]
        for o in quicker
    )
    return (
        f"The minima disagree with the medians: {named} than {lowest.name}'s fastest "
        f"({formats.seconds(lowest.warm.low)}). What the hardware can do and what these runs "
        "typically took differ; read the ranges, and the conditions, before choosing (R3.5)."
    )


def _cheapest(accepted: Sequence[Option]) -> str:
    priced = [o for o in accepted if o.cost_per_accepted_usd_minor is not None]
    if not priced:
        why = sorted({o.cost_note for o in accepted if o.cost_note})
        return (
            "No accepted option has a cost per accepted corpus measured on the hardware of its "
            f"package ({'; '.join(why)}). Only package totals are shown (R5.5, R5.7)."
        )
    best = min(o.cost_per_accepted_usd_minor for o in priced)  # type: ignore[type-var]
    by_bundle: dict[str, list[Option]] = {}
    for o in priced:
        if o.cost_per_accepted_usd_minor == best:
            by_bundle.setdefault(o.bundle, []).append(o)
    names = [
        f"{bundle} ({group[0].offer_id}, {group[0].package}; variants "
        f"{', '.join(o.variant_id for o in group)})"
        for bundle, group in by_bundle.items()
    ]
    example = any(o.placeholder for g in by_bundle.values() for o in g)
    return (
        f"Cheapest accepted option: {' and, tied, '.join(names)} at "
        f"{formats.price(best, placeholder=example)} per accepted corpus: the whole package "
        "divided by the 1 distinct corpus accepted on that hardware (R5.3). Every accepted "
        "variant of one package costs the same; speed decides between them."
    )


def decision_sentences(
    options: Sequence[Option], check: ConditionsCheck | None = None
) -> list[str]:
    """The cheapest and the fastest accepted option, with the caveats that apply (R3.5, R5.7)."""
    accepted = [o for o in options if o.accepted is True]
    if not accepted:
        return [
            "No option was accepted: none reaches the goal, so there is no cheapest or fastest "
            "option to name (R1.5, R5.7)."
        ]
    out = [_cheapest(accepted)]
    timed = [o for o in accepted if o.warm.n]
    if not timed:
        return [*out, "No accepted option has a timed warm run: no fastest option can be named."]
    lowest = min(timed, key=lambda o: o.warm.median)  # type: ignore[arg-type, return-value]
    others = [o for o in timed if o is not lowest]
    out.append(fastest_sentence(lowest, others, check or ConditionsCheck((), ())))
    out += [s for s in [minima_sentence(lowest, others)] if s]
    for o in options:
        if o.accepted is not True and o.warm.n and o.warm.median < lowest.warm.median:  # type: ignore[operator]
            state = "not accepted" if o.accepted is False else "its acceptance not recorded"
            out.append(
                f"{o.name} was faster (median {formats.seconds(o.warm.median)}) but "
                f"{state} ({o.why_not}): it does not reach the same goal (R5.7)."
            )
    few = [o for o in accepted if o.warm.n < MIN_REPEATS]
    if few:
        out.append(
            f"Fewer than {MIN_REPEATS} timed warm runs for "
            + ", ".join(f"{o.name} ({o.warm.n})" for o in few)
            + ": the protocol measures each variant five times (R3.4); read these with care."
        )
    for bundle, note in dict.fromkeys((o.bundle, o.lot_note) for o in accepted if o.lot_note):
        out.append(f"{bundle}: {note}.")
    return out


def _speed(time: float | None, base: float | None, reference: str) -> str:
    if not time or not base:
        return "no timed warm run to compare"
    ratio, word = (base / time, "faster") if base >= time else (time / base, "slower")
    return f"{ratio:.2f}× {word} per corpus than {reference} (warm medians)"


def _gate(quality: Mapping[str, Any], value: float | None, base: float | None) -> str:
    """``macro_f1 0.812 < 0.847 − 0.01``: the variant's median against the reference's less the
    tolerance, and the threshold where it is not met (R1.3)."""
    metric, tolerance, threshold = (quality.get(k) for k in ("metric", "tolerance", "threshold"))
    if value is None or base is None or tolerance is None:
        return "quality not recorded"
    sign = "≥" if value >= base - float(tolerance) else "<"
    text = f"{metric} {formats.number(value)} {sign} {formats.number(base)} − {float(tolerance):g}"
    if threshold is not None and value < float(threshold):
        text += f", below the threshold {formats.number(float(threshold))}"
    return text


def optimisation_sentences(bundle: Bundle, summary: Summary) -> list[str]:
    """One sentence per variant when the knob is how the model is run (compile, attention,
    quantization, threads), read from the report's one summary; empty for other knobs."""
    knob, quality = bundle.declared("knob"), bundle.declared("quality") or {}
    reference = str(quality.get("reference_variant") or "")
    if knob not in OPTIMISATIONS or not reference:
        return []
    values = {str(v.get("id")): v.get(knob) for v in bundle.declared("variants") or []}

    def facts(variant: str) -> tuple[float | None, float | None, bool | None]:
        """(warm median, median quality over its timed measured runs, accepted)."""
        phases = [summary.of(bundle.label, variant, str(p)) for p in MEASURED_PHASES]
        found = [v for p in phases if p for v in p.values("quality_value")]
        warm = summary.of(bundle.label, variant, str(Phase.WARM))
        acceptance = summary.acceptance(bundle.label, variant)
        verdict = acceptance.verdict if acceptance else None
        return warm.median if warm else None, statistics.median(found) if found else None, verdict

    base_time, base_quality, _ = facts(reference)
    out = []
    for variant, value in values.items():
        if variant == reference:
            continue
        time, measured, accepted = facts(variant)
        verdict = {True: "accepted", False: "refused"}.get(accepted, "acceptance not recorded")
        out.append(
            f"{variant} ({knob}={value}): {_speed(time, base_time, reference)}; "
            f"{verdict}: {_gate(quality, measured, base_quality)} (reference {reference}, R1.3, "
            "R5.7)."
        )
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


def decision_view_of(bundles: Sequence[Bundle], summary: Summary | None = None) -> DecisionView:
    """The decision view of bundles already loaded (and of their summary, when computed)."""
    summary = summary or summary_of(bundles)
    loaded = {b.label: b for b in bundles}  # variants in the summary's (declared) order
    options = [_option(loaded[b], v, summary) for b, v in summary.variants() if b in loaded]
    check = conditions_check([o.conditions for o in options if o.conditions])
    optimised = [line for b in bundles for line in optimisation_sentences(b, summary)]
    sentences = decision_sentences(options, check) + optimised + placeholder_sentences(options)
    return DecisionView(options, sentences, check)


def _memory_text(option: Option) -> str:
    allocated = option.warm.median_of("peak_allocated_bytes")
    reserved = option.warm.median_of("peak_reserved_bytes")
    if allocated is None and reserved is None:
        return formats.NOT_RECORDED
    return f"{formats.size_bytes(allocated)} allocated, {formats.size_bytes(reserved)} reserved"


# The first screen (1400 × 900) holds the whole table: compact cells, the answer on one line.
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
    if not o.warm.n:
        return formats.NOT_RECORDED
    text = f"{formats.seconds_range(o.warm.median, o.warm.low, o.warm.high)}, {o.warm.n} runs"
    if o.warm.outlier_runs:
        text += f"; outlier: run {', '.join(map(str, o.warm.outlier_runs))} (kept, R3.6)"
    return text


def _per_text(o: Option) -> str:
    """Time per text and texts per second at the median warm time; tokens/s where counted."""
    w = o.warm
    if not w.median or not w.texts:
        return formats.NOT_RECORDED
    tokens = [formats.rate(w.tokens_per_second, "tokens/s")] if w.tokens_per_second else []
    return "; ".join(
        [f"{formats.seconds(w.median / w.texts)} per text", formats.rate(w.median_rate), *tokens]
    )


def decision_frame(view: DecisionView) -> pd.DataFrame:
    """The decision table, every number in human form (formats), indexed by bundle and variant."""
    records = [
        {
            "bundle (machine)": o.bundle,
            "variant": f"{o.variant_id} ({o.knob})" if o.knob else o.variant_id,
            "accepted": {True: "yes", None: "not recorded"}.get(o.accepted, f"no: {o.why_not}"),
            "quality vs threshold": o.quality or formats.NOT_RECORDED,
            "warm per corpus: median (min – max)": _warm_text(o),
            "warm per text, throughput": _per_text(o),
            "cold · load (median)": (
                f"{formats.seconds(o.cold.median if o.cold else None)} · "
                f"{formats.seconds(o.load.median if o.load else None)}"
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
        for o in view.options
    ]
    return table(records, ["bundle (machine)", "variant"])


def outlier_lines(options: Sequence[Option]) -> list[str]:
    """Each warm outlier, kept (R3.6), with what its run recorded at that moment (R2.5)."""
    lines = []
    for o in options:
        fence = outlier_fence(o.warm.seconds)
        for i in o.warm.outliers:
            value, seen = o.warm.seconds[i], o.warm.conditions[i]
            ratio = value / o.warm.median if o.warm.median else None
            lines.append(
                f"{o.name}, warm run {o.warm.runs[i]}: {formats.seconds(value)}"
                + (f", {formats.number(ratio)}× its variant's median" if ratio else "")
                + f" (fence {formats.seconds(fence)}). "
                + (
                    f"Recorded then: {seen.text()}."
                    if seen is not None
                    else "Its run.json records no machine conditions."
                )
            )
    return lines


def decision_html(view: DecisionView) -> str:
    """The decision table (id ``decision-table``), the conditions banner, its sentences."""
    frame = decision_frame(view)
    grid = (
        frame.to_html(table_id=TABLE_ID, na_rep=formats.NOT_RECORDED)
        if not frame.empty
        else "<p>No row in any bundle yet.</p>"
    )
    banner = view.check.banner()
    banner_html = (
        f'<p class="conditions-banner" style="border:2px solid #d62728;padding:4px 8px">'
        f"<strong>{html.escape(banner)}</strong></p>"
        if banner
        else ""
    )
    outliers = outlier_lines(view.options)
    outliers_html = (
        f"<p>Warm runs above their variant's median + {OUTLIER_K:g} × MAD: kept and marked, "
        f"never dropped (R3.6):</p>{_items('outliers', outliers)}"
        if outliers
        else ""
    )
    sentences = _items("decision-sentences", view.sentences)
    return f"{grid}\n{_TABLE_STYLE}{banner_html}{sentences}{outliers_html}"


def _items(cls: str, texts: Sequence[str]) -> str:
    return f'<ul class="{cls}">' + "".join(f"<li>{html.escape(t)}</li>" for t in texts) + "</ul>"

"""The decision as a frontier: every option by cost per accepted corpus (warm time where no price
applies) against quality, refused ones greyed (R5.7); time orders two options only where THE rule
separates them and conditions allow (R2.5, R3.5). Facts are report.decision's, never re-derived."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import pandas as pd

from gpubench_nb import formats
from gpubench_nb.errors import PredictionsError
from gpubench_nb.protocol.bundle import PREDICTIONS_NAME, run_dir
from gpubench_nb.protocol.predictions_file import read_predictions
from gpubench_nb.protocol.records import read_run
from gpubench_nb.report.bundles import Bundle
from gpubench_nb.report.decision import DecisionView, Option
from gpubench_nb.report.stats import table
from gpubench_nb.report.verdict import DISTINGUISHABLE, compare_runs


@dataclass(frozen=True)
class Point:
    option: Option
    label: str  # "b4 (batch=4, runtime=onnxruntime) · cpu-offer"
    x: float | None  # cost per accepted corpus in cents (refused: package total), or warm s
    quality: float | None  # the declared metric's median over the timed measured runs
    answers: Mapping[str, int] | None = None  # the first kept run's labels, by ID
    changed: str = formats.NOT_RECORDED  # answers unlike the bundle's reference variant's
    on_frontier: bool = False


@dataclass(frozen=True)
class Frontier:
    points: tuple[Point, ...]
    priced: bool  # x is the cost per accepted corpus; else the median warm time
    metric: str
    sentence: str


def _point(o: Option, bundle: Bundle | None, priced: bool) -> Point:
    """The option placed, labelled with its knob, runtime (absent: torch) and offer."""
    runs = [(p.phase, r["run_index"]) for p in (o.warm, o.cold) if p for r in p.timed]
    folders = [run_dir(bundle.path, o.variant_id, *run) for run in runs] if bundle else []
    folder = next((f for f in folders if (f / PREDICTIONS_NAME).is_file()), None)
    variants = (bundle and bundle.declared("variants")) or []
    declared = [v for v in variants if v.get("id") == o.variant_id]
    run = read_run(folders[0]) if folders else None  # its record of the runtime, where any
    runtime = (declared or [{}])[0].get("runtime") or (run and run.runtime) or "torch"
    settings = [o.knob, None if (o.knob or "").startswith("runtime=") else f"runtime={runtime}"]
    try:  # without the declared classes every label would read alike: no count, not a zero
        index = {c: i for i, c in enumerate((bundle and bundle.declared("classes")) or [])}
        found = read_predictions(folder / PREDICTIONS_NAME, index) if folder and index else None
    except PredictionsError:
        found = None
    cost = o.cost_per_accepted_usd_minor if o.accepted else o.package_total_usd_minor
    return Point(
        o,
        f"{o.variant_id} ({', '.join(s for s in settings if s)}) · {o.offer_id or 'no offer'}",
        cost if priced else o.warm.median,
        o.quality_median,  # the decision table's: Summary.quality (R1.5)
        dict(zip(found.ids, found.labels, strict=True)) if found else None,
    )


def _ordered(a: Point, b: Point, priced: bool, withheld: bool) -> bool:
    """``a`` better on x than ``b``: cheaper, or faster by THE rule where conditions allow it."""
    if a.x is None or b.x is None or a.x >= b.x:
        return False
    seconds = (a.option.warm.seconds, b.option.warm.seconds)
    return priced or (not withheld and compare_runs(*seconds).verdict == DISTINGUISHABLE)


def _beats(a: Point, b: Point, priced: bool, withheld: bool) -> bool:
    """At least as good on both axes (higher quality is better) and strictly better on one."""
    if _ordered(b, a, priced, withheld) or a.quality < b.quality:  # type: ignore[operator]
        return False
    return _ordered(a, b, priced, withheld) or a.quality > b.quality  # type: ignore[operator]


def frontier_of(view: DecisionView, bundles: Sequence[Bundle] = ()) -> Frontier:
    """Every option of ``view`` placed; the frontier marked and named in one sentence (R5.7)."""
    loaded = {b.label: b for b in bundles}
    accepted = [o for o in view.options if o.accepted is True]
    priced = bool(accepted) and all(o.cost_per_accepted_usd_minor is not None for o in accepted)
    points = [_point(o, loaded.get(o.bundle), priced) for o in view.options]
    withheld = bool(view.check.withheld)
    placed = [p for p in points if p.option.accepted is True and None not in (p.x, p.quality)]
    best = [p for p in placed if not any(_beats(q, p, priced, withheld) for q in placed)]
    for i, p in enumerate(points):  # answers changed against the bundle's reference variant
        mine = [q for q in points if q.option.bundle == p.option.bundle]
        ref = (b := loaded.get(p.option.bundle)) and b.declared("quality", "reference_variant")
        ref = ref or mine[0].option.variant_id
        base = next((q for q in mine if q.option.variant_id == ref), p)
        changed = "reference" if base is p else formats.NOT_RECORDED
        if base is not p and None not in (base.answers, p.answers):
            differ = sum(p.answers.get(k) != v for k, v in base.answers.items())  # type: ignore[union-attr]
            changed = f"{differ:,} of {len(base.answers):,} vs {base.option.variant_id}"  # type: ignore[arg-type]
        points[i] = replace(p, changed=changed, on_frontier=any(p is q for q in best))
    rows = [r for o in view.options for r in o.warm.rows if r.get("quality_metric")]
    metric = str(rows[0]["quality_metric"]) if rows else "quality"
    return Frontier(tuple(points), priced, metric, _sentence(best, priced, metric, view))


def _sentence(best: Sequence[Point], priced: bool, metric: str, view: DecisionView) -> str:
    axis = "cost per accepted corpus" if priced else "median warm time per corpus"
    if not best:
        return f"No accepted option has both a {axis} and a {metric}: no frontier (R5.7)."
    named = "; ".join(f"{p.option.bundle} / {p.label} ({_x(p, priced)} {axis}, {metric} "
                      f"{formats.number(p.quality)})" for p in best)  # fmt: skip
    text = (
        f"On the frontier ({axis} against {metric}: no other accepted option is at least as good "
        f"on both and better on one; refused options are greyed, never on it, R5.7): {named}."
    )
    ties: dict[float, list[Point]] = {}  # one quality on the frontier: tied on x too
    for p in best:
        ties.setdefault(p.quality, []).append(p)  # type: ignore[arg-type]
    for tied in (group for group in ties.values() if len(group) > 1):
        found = [(a, b, compare_runs(a.option.warm.seconds, b.option.warm.seconds))
                 for i, a in enumerate(tied) for b in tied[i + 1 :]]  # fmt: skip
        why = (
            f"the same {axis}" if priced
            else f"the verdict withheld ({'; '.join(view.check.withheld)})" if view.check.withheld
            else "warm times the rule does not separate ("
            + "; ".join(f"{a.option.name} vs {b.option.name}: {c.verdict}, {c.evidence()}"
                        for a, b, c in found) + ")"
        )  # fmt: skip
        text += (
            f" {', '.join(p.option.name for p in tied)} tie: the same {metric} and {why}; none "
            f"is called {'cheaper' if priced else 'faster'}."
        )
    return text


def _x(p: Point, priced: bool) -> str:
    if p.x is None or not priced:
        return formats.seconds(p.x)
    return formats.price(int(p.x), placeholder=p.option.placeholder)


def frontier_frame(front: Frontier) -> pd.DataFrame:
    """One row per option: its label, verdict, both axes, frontier mark and answers changed."""
    axis = "per accepted corpus (refused: package total)" if front.priced else "median warm time"
    index = ["bundle (machine)", "option: variant (knob, runtime) · offer"]
    records = [
        dict(zip(index, (p.option.bundle, p.label), strict=True))
        | {
            "accepted": "yes" if p.option.accepted else f"refused (greyed): {p.option.why_not}",
            axis: _x(p, front.priced),
            f"{front.metric} (median)": formats.number(p.quality),
            "on the frontier": "yes" if p.on_frontier else "no",
            "answers changed (first kept run)": p.changed,
        }
        for p in front.points
    ]
    return table(records, index)


def frontier_html(front: Frontier) -> str:
    """The sentence, then the table (id ``frontier-table``)."""
    frame = frontier_frame(front)
    grid = "" if frame.empty else frame.to_html(table_id="frontier-table")
    return f'<p class="frontier-sentence">{html.escape(front.sentence)}</p>\n{grid}'

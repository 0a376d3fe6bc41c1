"""The decision as a frontier (issue 42): every option by cost per accepted corpus (or warm time)
against quality; refused options greyed with their reason, never on it (R5.7); the Pareto marks
on worked examples, ties stated, no "faster" the verdict withholds (R2.5, R3.5); answers changed
against the reference variant, counted from the kept predictions."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from matplotlib.colors import to_rgba

from gpubench_nb.report import figures
from gpubench_nb.report import render as report
from gpubench_nb.report.conditions import RunConditions, conditions_check
from gpubench_nb.report.decision import DecisionView, Option
from gpubench_nb.report.frontier import Frontier, frontier_frame, frontier_html, frontier_of
from gpubench_nb.report.stats import summarise

FIXTURE = Path(__file__).parents[1] / "fixtures" / "main-bundle"
FAST = (0.50, 0.52, 0.48, 0.51, 0.49)  # median 0.50
SLOW = (0.80, 0.82, 0.81, 0.79, 0.83)  # median 0.81: separated from FAST, p = 0.00794
REFUSED = "macro_f1 0.600 below the threshold 0.700 (10 of 10 runs)"


def _option(
    variant: str,
    warm: tuple[float, ...],
    quality: float,
    cost: int | None = 42_000,
    accepted: bool = True,
    seen: RunConditions | None = None,
    **changes,
) -> Option:
    """An option of bundle "box" whose warm runs took ``warm`` and scored ``quality``."""
    rows = [
        {"bundle": "box", "variant_id": variant, "phase": "warm", "run_index": i,
         "elapsed_seconds": s, "corpus_accepted": accepted, "quality_value": quality,
         "quality_metric": "macro_f1", "conditions": seen}
        for i, s in enumerate(warm, start=1)
    ]  # fmt: skip
    base = Option(
        warm=summarise(rows).phases[0],
        knob=f"batch={variant[1:]}",
        why_not=None if accepted else REFUSED,
        quality_median=quality,  # as decision's _option reads it from Summary.quality
        offer_id="h100",
        package_total_usd_minor=changes.pop("package", 42_000),
        cost_per_accepted_usd_minor=cost if accepted else None,
    )
    return dataclasses.replace(base, **changes)


def _front(*options: Option) -> Frontier:
    check = conditions_check([o.conditions for o in options if o.conditions])
    return frontier_of(DecisionView(list(options), [], check))


def _marked(front: Frontier) -> list[str]:
    return [p.option.variant_id for p in front.points if p.on_frontier]


def test_priced_pareto_keeps_the_trade_offs_and_drops_the_beaten() -> None:
    front = _front(
        _option("b1", SLOW, 0.80),  # USD 420, 0.80
        _option("b2", SLOW, 0.85, cost=60_000),  # dearer, better: a trade-off
        _option("b3", FAST, 0.80, cost=60_000),  # dearer than b1, no better: beaten (speed is
    )  # not an axis when every accepted option is priced)
    assert front.priced and _marked(front) == ["b1", "b2"]
    assert "On the frontier (cost per accepted corpus against macro_f1" in front.sentence
    named = "box / b1 (batch=1, runtime=torch) · h100 (USD 420.00 cost per accepted corpus"
    assert named in front.sentence
    assert "box / b3" not in front.sentence and " tie:" not in front.sentence


def test_a_tie_on_both_axes_is_stated_and_neither_is_called_cheaper() -> None:
    front = _front(_option("b1", SLOW, 0.80), _option("b4", FAST, 0.80))  # one package
    assert _marked(front) == ["b1", "b4"]
    assert (
        "box / b1, box / b4 tie: the same macro_f1 and the same cost per accepted corpus; "
        "none is called cheaper."
    ) in front.sentence


def test_a_refused_option_cheaper_and_faster_than_all_is_greyed_with_its_reason() -> None:
    refused = _option("b8", (0.10,) * 5, 0.60, accepted=False, package=1_000)
    front = _front(_option("b1", SLOW, 0.80), refused)
    assert _marked(front) == ["b1"]  # R5.7: a refused option does not reach the same goal
    by_time = _front(_option("b1", SLOW, 0.80, cost=None), refused)  # no price: warm time
    assert _marked(by_time) == ["b1"] and by_time.points[1].x == 0.10  # 8× faster, still off it
    placed = front.points[1]
    assert placed.x == 1_000 and not placed.on_frontier  # drawn at its package total
    row = frontier_frame(front).iloc[1]
    assert row["accepted"] == f"refused (greyed): {REFUSED}" and row["on the frontier"] == "no"
    assert row["per accepted corpus (refused: package total)"] == "USD 10.00"
    fig = figures.frontier_figure(front)
    ax = fig.axes[0]
    greys = [c for c in ax.collections if tuple(c.get_facecolor()[0]) == to_rgba("#9e9e9e")]
    assert len(greys) == 1 and tuple(greys[0].get_offsets()[0]) == (10.0, 0.60)
    assert [t.get_text() for t in ax.texts] == ["1", "2"]  # numbered as the table's rows
    key = [t.get_text() for t in fig.legends[0].get_texts()]
    assert key == [
        "1. b1 (batch=1, runtime=torch) · h100",
        f"2. b8 (batch=8, runtime=torch) · h100; refused: {REFUSED}",
    ]
    ticks = [t.get_text() for t in ax.get_xticklabels()]  # USD 10 and 420: a log axis
    assert ax.get_xscale() == "log" and "10.0" in ticks and "100" in ticks
    assert not any("e+" in t or "$" in t or "×" in t for t in ticks)  # no scientific notation
    assert (
        ax.get_xlabel()
        == "USD per accepted corpus (refused: package total), lower is better (log scale)"
    )


def test_time_axis_orders_only_what_the_verdict_separates() -> None:
    unpriced = {"cost": None}
    front = _front(_option("b1", SLOW, 0.80, **unpriced), _option("b4", FAST, 0.80, **unpriced))
    assert not front.priced and _marked(front) == ["b4"]  # faster by THE rule, same quality
    assert "median warm time per corpus" in front.sentence and " tie:" not in front.sentence
    # One run each: no test can separate them, so both stay, tied, and neither is called faster.
    one = {"cost": None, "warm": (0.50,)}
    front = _front(_option("b1", (0.81,), 0.80, cost=None), _option("b4", quality=0.80, **one))
    assert _marked(front) == ["b1", "b4"]
    assert (
        "box / b1, box / b4 tie: the same macro_f1 and warm times the rule does not separate "
        "(box / b1 vs box / b4: too few runs to decide, 1 + 1 runs: the smallest p the exact "
        "test can give is 1 > α = 0.05); none is called faster."
    ) in front.sentence
    # Better quality but not shown faster or slower: it beats the other on one axis only.
    front = _front(_option("b1", (0.81,), 0.85, cost=None), _option("b4", quality=0.80, **one))
    assert _marked(front) == ["b1"]


def test_withheld_verdict_never_calls_one_faster() -> None:
    busy = RunConditions(8.5, 8.5, 2, (), None, threads="2 torch thread(s)", threads_fixed=False)
    front = _front(
        _option("b1", SLOW, 0.80, cost=None, seen=busy),
        _option("b4", FAST, 0.80, cost=None, seen=busy),
    )  # separated by the rule on a quiet machine, but heavy load with free threads withholds it
    assert _marked(front) == ["b1", "b4"]
    assert "box / b1, box / b4 tie: the same macro_f1 and the verdict withheld (heavy load" in (
        front.sentence
    )
    assert "none is called faster" in front.sentence
    assert "faster than" not in front.sentence.lower()


def test_nothing_accepted_gives_an_empty_frontier_in_words() -> None:
    front = _front(_option("b8", FAST, 0.60, accepted=False))
    assert _marked(front) == [] and front.sentence.startswith("No accepted option has both")


def _fixture(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "main-bundle"))


def _frontier(bundle: Path) -> Frontier:
    bundles = report.load_bundles([bundle])
    return frontier_of(report.decision_view_of(bundles), bundles)


def test_answers_changed_against_the_reference_from_the_kept_predictions(tmp_path: Path) -> None:
    bundle = _fixture(tmp_path)
    front = _frontier(bundle)
    assert [p.changed for p in front.points] == ["reference", "0 of 20 vs b1"]
    kept = bundle / "runs" / "b4" / "warm-1" / "predictions.jsonl"
    lines = [json.loads(line) for line in kept.read_text(encoding="utf-8").splitlines()]
    for line in lines[:3]:  # three answers changed to another declared class
        line["label"] = "web" if line["label"] != "web" else "text"
    kept.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    front = _frontier(bundle)
    assert [p.changed for p in front.points] == ["reference", "3 of 20 vs b1"]
    assert frontier_frame(front).iloc[1]["answers changed (first kept run)"] == "3 of 20 vs b1"
    lock = bundle / "protocol.lock.json"  # no declared classes: no count, never a false zero
    data = json.loads(lock.read_text(encoding="utf-8"))
    del data["declaration"]["classes"]
    lock.write_text(json.dumps(data), encoding="utf-8")
    assert [p.changed for p in _frontier(bundle).points] == ["reference", "—"]


def test_labels_name_knob_runtime_and_offer_old_bundles_mean_torch(tmp_path: Path) -> None:
    bundle = _fixture(tmp_path)
    assert [p.label for p in _frontier(bundle).points] == [
        "b1 (batch=1, runtime=torch) · h100-example",
        "b4 (batch=4, runtime=torch) · h100-example",
    ]
    run = bundle / "runs" / "b4" / "warm-1" / "run.json"  # as a run records its runtime
    data = json.loads(run.read_text(encoding="utf-8"))
    run.write_text(json.dumps({**data, "runtime": "onnxruntime"}), encoding="utf-8")
    assert _frontier(bundle).points[1].label == "b4 (batch=4, runtime=onnxruntime) · h100-example"


def test_frontier_html_holds_sentence_and_table(tmp_path: Path) -> None:
    page = frontier_html(_frontier(_fixture(tmp_path)))
    assert page.startswith('<p class="frontier-sentence">On the frontier (median warm time')
    assert 'id="frontier-table"' in page and "answers changed (first kept run)" in page
    # the kept bundle ran under heavy load with free threads: a tie, the withheld verdict said
    assert "cpu / b1, main-bow-fixture · cpu / b4 tie: the same macro_f1 and the verdict " in page
    assert "withheld (heavy load" in page and "none is called faster" in page

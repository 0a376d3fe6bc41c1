"""The decision view: one row per (bundle, variant) and the sentences that read it (issue 13)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gpubench_nb.report.bundles import load_bundles
from gpubench_nb.report.decision import (
    DecisionView,
    Option,
    decision_frame,
    decision_html,
    decision_sentences,
    decision_view_of,
    placeholder_sentences,
)
from gpubench_nb.report.stats import summarise
from tests.support.golden import write_bundle


def _option(bundle: str, variant: str, warm: tuple[float, ...], **changes) -> Option:
    """An option whose warm runs took ``warm`` (run 1, 2, ...); ``accepted`` as its runs say."""
    accepted = changes.pop("accepted", True)
    rows = [
        {"bundle": bundle, "variant_id": variant, "phase": "warm", "run_index": i,
         "elapsed_seconds": s, "corpus_accepted": accepted}
        for i, s in enumerate(warm, start=1)
    ]  # fmt: skip
    base = Option(
        warm=summarise(rows).phases[0],
        offer_id="h100",
        package="7 days × 1 lot(s)",
        package_total_usd_minor=42_000,
        cost_per_accepted_usd_minor=42_000,
    )
    return dataclasses.replace(base, **changes)


FIVE_FAST = (0.50, 0.52, 0.48, 0.51, 0.49)  # median 0.50, range 0.48-0.52
FIVE_SLOW = (0.80, 0.82, 0.81, 0.79, 0.83)  # median 0.81, range 0.79-0.83


def test_cheapest_names_the_package_and_its_accepted_variants() -> None:
    options = [
        _option("H100 box", "b1", FIVE_SLOW),
        _option("H100 box", "b4", FIVE_FAST),
        _option("H200 box", "b4", FIVE_FAST, offer_id="h200", package_total_usd_minor=60_000,
                cost_per_accepted_usd_minor=60_000),
    ]  # fmt: skip
    cheapest = decision_sentences(options)[0]
    assert cheapest.startswith(
        "Cheapest accepted option: H100 box (h100, 7 days × 1 lot(s); variants b1, b4) at "
        "USD 420.00 per accepted corpus"
    )


def test_no_cost_when_no_accepted_option_was_measured_on_its_package_hardware() -> None:
    note = "not measured on this hardware: accepted on the CPU (no GPU used), not on a H100"
    options = [_option("cpu", "b1", FIVE_SLOW, cost_per_accepted_usd_minor=None, cost_note=note)]
    first = decision_sentences(options)[0]
    assert first.startswith("No accepted option has a cost per accepted corpus") and note in first


def test_fastest_distinct_by_the_stated_rank_rule() -> None:
    sentences = decision_sentences(
        [_option("box", "b1", FIVE_SLOW), _option("box", "b4", FIVE_FAST)]
    )
    assert sentences[1].startswith(
        "Fastest accepted option: box / b4, median warm time per corpus 500 ms "
        "(480 ms – 520 ms over 5 runs). Faster than box / b1 (810 ms (790 ms – 830 ms); "
        "p = 0.00794 ≤ α = 0.05, 5 + 5 runs). Rule: two-sided Mann–Whitney U test on the "
        "raw warm times (exact; normal with tie correction past 8 runs a side or with ties), "
        "α = 0.05;"
    )


def test_one_slow_run_of_five_does_not_flip_a_clear_median_gap() -> None:
    """Issue 24's example: batch 16 ~3.54 ms, nine times faster than batch 1 (~31.7 ms), but one
    of its five warm runs took 369 ms; the min–max overlap said "not distinguishable"."""
    b1 = (0.0317, 0.0315, 0.0320, 0.0318, 0.0316)
    b16 = (0.00354, 0.00350, 0.369, 0.00356, 0.00352)
    options = [_option("wn", "b1", b1), _option("wn", "b16", b16)]
    sentence = decision_sentences(options)[1]
    assert sentence.startswith("Fastest accepted option: wn / b16, median warm time per corpus")
    assert "(3.50 ms – 369 ms over 5 runs)" in sentence  # min–max stays reported (R3.5)
    assert (
        "Faster than wn / b1 (31.7 ms (31.5 ms – 32.0 ms); p = 0.00794 ≤ α = 0.05, 5 + 5 runs; "
        "1 outlier run(s) ranked at the fence (uncapped p = 0.151, which one slow run would "
        "have flipped))."
    ) in sentence
    assert "Not distinguishable" not in sentence
    frame = decision_frame(DecisionView(options, []))
    assert frame.loc[("wn", "b16"), "warm per corpus: median (min – max)"].endswith(
        "5 runs; outlier: run 3 (kept, R3.6)"
    )


def test_same_distribution_is_not_distinguishable() -> None:
    a = (0.50, 0.52, 0.54, 0.56, 0.58)  # interleaved ranks: U = 10, exact p = 0.690
    b = (0.51, 0.53, 0.55, 0.57, 0.59)
    sentences = decision_sentences([_option("box", "b4", a), _option("box", "b8", b)])
    assert sentences[1].startswith(
        "box / b4 has the lowest median warm time per corpus 540 ms (500 ms – 580 ms over 5 "
        "runs); no option is shown faster."
    )  # never "Fastest accepted option" for an option the rule cannot separate
    assert "Fastest" not in " ".join(sentences)
    assert (
        "Not distinguishable from box / b8 (550 ms (510 ms – 590 ms); p = 0.69 > α = 0.05, "
        "5 + 5 runs): these runs do not show which is faster."
    ) in sentences[1]


def test_too_few_runs_to_decide_is_said_as_such() -> None:
    sentences = decision_sentences(
        [_option("box", "b1", (0.80, 0.81, 0.82)), _option("box", "b4", (0.50, 0.51, 0.52))]
    )
    assert (
        "Too few runs to decide against box / b1 (810 ms (800 ms – 820 ms); 3 + 3 runs: the "
        "smallest p the exact test can give is 0.1 > α = 0.05)."
    ) in sentences[1]
    assert "Faster than" not in sentences[1]


def test_faster_but_rejected_and_fewer_than_five_runs_are_said() -> None:
    rejected = _option(
        "box", "b8", (0.30, 0.31, 0.29), accepted=False, why_not="macro_f1 0.66 below 0.7"
    )
    short = _option("box", "b4", (0.50, 0.52, 0.48, 0.51))
    sentences = decision_sentences([short, rejected])
    assert (
        "box / b8 was faster (median 300 ms) but not accepted (macro_f1 0.66 below 0.7): it "
        "does not reach the same goal (R5.7)."
    ) in sentences
    assert any(s.startswith("Fewer than 5 timed warm runs for box / b4 (4)") for s in sentences)


def test_nothing_accepted_names_no_option() -> None:
    sentences = decision_sentences([_option("box", "b1", FIVE_FAST, accepted=False)])
    assert sentences == [
        "No option was accepted: none reaches the goal, so there is no cheapest or fastest "
        "option to name (R1.5, R5.7)."
    ]


def test_decision_view_over_golden_bundle_folders(tmp_path: Path) -> None:
    gpu = write_bundle(tmp_path, "gpu", gpu=True)
    cpu = write_bundle(tmp_path, "cpu", gpu=False, scale=4.0)
    view = decision_view_of(load_bundles([gpu, cpu]))  # folders, as a campaign passes them
    assert [(o.variant_id, o.accepted) for o in view.options] == [
        ("b1", True), ("b4", True), ("b8", False), ("b1", True), ("b4", True), ("b8", False),
    ]  # fmt: skip
    frame = decision_frame(view)
    h100 = "demo-bow-batch · NVIDIA H100 80GB HBM3"
    b4 = frame.loc[(h100, "b4 (batch=4)")]
    assert b4["accepted"] == "yes"
    assert b4["warm per corpus: median (min – max)"] == "500 ms (480 ms – 520 ms), 5 runs"
    assert b4["cold · load (median)"] == "600 ms · 420 ms"
    # the most texts one pass truncated, beside the quality it may cost (R2.3)
    assert (
        b4["quality vs threshold"]
        == "macro_f1 0.780 ≥ 0.700; 3 texts cut, 41 tokens dropped (R2.3)"
    )
    assert b4["warm per text, throughput"] == "500 µs per text; 2,000 texts/s"
    assert b4["peak memory (warm, median)"] == "120 MiB allocated, 184 MiB reserved"
    assert b4["declared package"] == "USD 1,234.56 (h100-example, 7 days × 1 lot(s))"
    assert b4["per accepted corpus"] == "USD 1,234.56"
    b8 = frame.loc[(h100, "b8 (batch=8)")]
    assert b8["accepted"] == (
        "no: macro_f1 0.660 below the threshold 0.700 (9 of 10 runs); run failed: out of "
        "memory (1 of 10 runs)"
    )
    cpu_b4 = frame.loc[("demo-bow-batch · cpu", "b4 (batch=4)")]
    assert cpu_b4["per accepted corpus"] == "not measured on this hardware"  # R5.7
    assert cpu_b4["peak memory (warm, median)"] == "—"  # not measured on CPU (R4.3)
    assert "e+" not in frame.to_string()  # never scientific notation
    assert view.sentences[0].startswith(f"Cheapest accepted option: {h100} (h100-example")
    assert f"{h100} / b8 was faster (median 305 ms) but not accepted" in " ".join(view.sentences)
    html = decision_html(view)
    assert html.startswith('<table border="1" class="dataframe" id="decision-table">')


def test_placeholder_prices_are_marked_and_say_how_to_enter_a_quote() -> None:
    """Issue 24 §3: the decision table and its sentences never show an example price bare."""
    options = [
        _option("box", "b1", FIVE_SLOW, placeholder=True),
        _option("box", "b4", FIVE_FAST, placeholder=True),
    ]
    view = DecisionView(options, decision_sentences(options) + placeholder_sentences(options))
    assert view.sentences[0].startswith(
        "Cheapest accepted option: box (h100, 7 days × 1 lot(s); variants b1, b4) at "
        "USD 420.00 [PLACEHOLDER, not a quote] per accepted corpus"
    )
    assert view.sentences[-1].startswith(
        "Prices marked [PLACEHOLDER, not a quote] (h100) are invented examples"
    )
    assert "remove 'placeholder: true' from that offer" in view.sentences[-1]
    frame = decision_frame(view)
    assert set(frame["declared package"]) == {
        "USD 420.00 [PLACEHOLDER, not a quote] (h100, 7 days × 1 lot(s))"
    }
    assert set(frame["per accepted corpus"]) == {"USD 420.00 [PLACEHOLDER, not a quote]"}
    assert placeholder_sentences([_option("box", "b1", FIVE_SLOW)]) == []  # a real quote


def test_the_tools_own_example_offer_is_said_to_be_in_no_table() -> None:
    """this-machine-example is written by gpubench-nb for the machine: no offers table holds a
    'placeholder: true' to remove; the sentence says where it comes from and what to do."""
    options = [_option("box", "b1", FIVE_SLOW, placeholder=True, offer_id="this-machine-example")]
    (said,) = placeholder_sentences(options)
    assert "this-machine-example: written by gpubench-nb, with invented prices, for the" in said
    assert "in no offers table" in said and "name an offer of your offers table" in said
    assert "from that offer in the offers table" not in said


def test_compile_and_other_optimisation_seconds_show_beside_cold_and_load() -> None:
    """run.json's optimisation seconds (compile, quantise, export: whatever a run records) are
    the user's cost of a variant too: their cold median is on the decision table (R3.2)."""
    rows = [
        {"bundle": "box", "variant_id": "c1", "phase": phase, "run_index": i,
         "elapsed_seconds": 0.5, "corpus_accepted": True,
         "optimisation": {"compile_seconds": 70.0 + i, "export_seconds": 2.0, "compile": "x",
                          "quantize_seconds": None}}
        for phase in ("cold", "warm") for i in (1, 2, 3, 4, 5)
    ]  # fmt: skip
    cold, warm = summarise(rows).phases
    assert cold.optimisation_seconds == {"compile": 73.0, "export": 2.0}
    frame = decision_frame(DecisionView([Option(warm=warm, cold=cold)]))
    assert frame.iloc[0]["cold · load (median)"] == (
        "500 ms · — · compile 1 min 13 s · export 2.00 s"
    )


def test_too_few_runs_to_mark_an_outlier_is_said_and_none_is_marked() -> None:
    """With 3 runs a run at 1.20× the median was marked an outlier: below four runs no
    fence is drawn, and the table says so (R3.6)."""
    three = _option("box", "b1", (1.00, 1.00, 1.20))
    assert three.warm.outlier_runs == ()
    cell = decision_frame(DecisionView([three])).iloc[0]["warm per corpus: median (min – max)"]
    assert cell.endswith("3 runs; too few to mark an outlier (4 needed, R3.6)")
    five = _option("box", "b4", (1.00, 1.00, 1.01, 0.99, 1.60))
    assert five.warm.outlier_runs == (5,)

"""The verdict rule (report/verdict.py) and the run conditions (report/conditions.py), issue 24."""

from __future__ import annotations

import pytest

from gpubench_nb.report.conditions import (
    RunConditions,
    VariantConditions,
    conditions_check,
    over_runs,
    run_conditions,
)
from gpubench_nb.report.verdict import (
    DISTINGUISHABLE,
    NOT_DISTINGUISHABLE,
    TOO_FEW,
    compare_runs,
    outlier_fence,
    outlier_indices,
    smallest_p,
)


@pytest.mark.parametrize(
    "sizes, expected",
    [((5, 5), 2 / 252), ((4, 4), 2 / 70), ((3, 3), 0.1), ((3, 6), 2 / 84), ((1, 1), 1.0)],
)
def test_smallest_exact_p_is_two_over_the_binomial(sizes, expected) -> None:
    # Mann-Whitney exact null: all C(m+n, m) rank splits equally likely; complete separation
    # is 1 of them in each direction, so the smallest two-sided p is 2 / C(m+n, m).
    assert smallest_p(*sizes) == pytest.approx(expected)


def test_worked_fence_median_plus_three_scaled_mads() -> None:
    # median 0.50; |deviations| 0, .02, .02, .01, .01 -> MAD 0.01; fence 0.50 + 3 × 1.4826 × 0.01
    fence = outlier_fence([0.50, 0.52, 0.48, 0.51, 0.49])
    assert fence == pytest.approx(0.50 + 3 * 1.4826 * 0.01)
    assert outlier_indices([0.50, 0.52, 0.48, 0.51, 0.60]) == [4]
    assert outlier_indices([0.50, 0.52, 0.48, 0.51, 0.54]) == []
    assert outlier_indices([0.50, 0.52, 0.40, 0.51, 0.49]) == []  # a fast run is no accident
    assert outlier_fence([0.5, 9.0]) is None  # two runs: no run can stand out


def test_identical_runs_do_not_make_every_other_run_an_outlier() -> None:
    # MAD 0: the spread is floored at 1 % of the median, so 1.02 is not an outlier, 1.05 is.
    assert outlier_indices([1.0, 1.0, 1.0, 1.0, 1.02]) == []
    assert outlier_indices([1.0, 1.0, 1.0, 1.0, 1.05]) == [4]


def test_clear_gap_with_one_slow_run_holds_and_says_the_raw_p() -> None:
    fast = [0.0035, 0.0036, 0.369, 0.0034, 0.00355]
    slow = [0.0317, 0.0318, 0.0316, 0.0319, 0.0315]
    verdict = compare_runs(fast, slow)
    assert verdict.verdict == DISTINGUISHABLE and verdict.capped_runs == 1
    assert verdict.p_value == pytest.approx(2 / 252)
    assert verdict.raw_p_value == pytest.approx(38 / 252)  # U = 5: 19 of 252 splits each side
    assert "which one slow run would have flipped" in verdict.evidence()


def test_interleaved_runs_are_not_distinguishable_and_few_runs_say_so() -> None:
    same = compare_runs([1, 3, 5, 7, 9], [2, 4, 6, 8, 10])
    assert same.verdict == NOT_DISTINGUISHABLE and same.p_value == pytest.approx(0.690, abs=1e-3)
    few = compare_runs([1, 2, 3], [10, 11, 12])
    assert few.verdict == TOO_FEW and few.p_value is None
    assert few.evidence() == "3 + 3 runs: the smallest p the exact test can give is 0.1 > α = 0.05"
    assert compare_runs([1, 2, 3, 4], [10, 11, 12, 13]).verdict == DISTINGUISHABLE


RUN = {
    "notes": "scope: processing; fault injection GPUBENCH_FAULT=delay:1@batch:1@run:3; code=abc",
    "environment": {
        "load_average_start": [1.52, 1.1, 0.9],
        "load_average_end": [1.60, 1.2, 0.9],
        "cpu_activity_start": {
            "load_average_1min": 1.52,
            "cpu_count": 2,
            "busy_processes": [{"pid": 42, "name": "python", "cpu_share": 0.98}],
        },
        "cpu_activity_end": {"cpu_count": 2, "busy_processes": []},
        "gpu_processes_start": None,
    },
    "sm_clock_mhz": {"min": 1215, "median": 1507},  # issue 23's fields, where present
    "throttle_reasons": ["sw_thermal_slowdown"],
}


def test_run_conditions_read_from_run_json() -> None:
    seen = run_conditions(RUN)
    assert (seen.load_start, seen.load_end, seen.cpu_count) == (1.52, 1.60, 2)
    assert seen.busy == ("python (0.98 core)",) and seen.gpu_processes is None
    assert seen.fault == "fault injection GPUBENCH_FAULT=delay:1@batch:1@run:3"
    assert seen.text() == (
        "load 1.52 → 1.60 (2 cores); busy: python (0.98 core); "
        'sm_clock_mhz: {"median": 1507, "min": 1215}; throttle_reasons: ["sw_thermal_slowdown"]; '
        "fault injection GPUBENCH_FAULT=delay:1@batch:1@run:3"
    )
    bare = run_conditions({})  # a run.json written before R2.5 was recorded: nothing guessed
    assert bare.load_start is None and bare.busy is None and bare.gpu == ()
    assert bare.text() == "load n/a → n/a; busy processes not observable"


def _runs(variant: str, loads: list[float], busy: bool = False) -> VariantConditions:
    runs = [
        RunConditions(load, load, cpu_count=2, busy=("x (0.5 core)",) if busy else ())
        for load in loads
    ]
    return over_runs("box", variant, runs)


def test_banner_for_heavy_or_different_load_with_its_thresholds() -> None:
    calm = [_runs("b1", [0.2, 0.3, 0.2]), _runs("b4", [0.3, 0.2, 0.25])]
    assert conditions_check(calm).banner() is None
    assert calm[0].text() == "load 0.20, max 0.30 (2 cores); others busy 0/3 runs"
    uneven = [_runs("b1", [0.2, 0.3, 0.2]), _runs("b4", [2.5, 2.6, 1.9], True)]
    banner = conditions_check(uneven).banner()
    assert banner is not None
    assert (
        "heavy load: the 1-minute load average exceeded 1 per core during box / b4 (max 2.60)"
    ) in banner
    assert "different load: the variants' median loads per core differ by 1.15, more than 0.5" in (
        banner
    )
    assert uneven[1].text() == "load 2.50, max 2.60 (2 cores); others busy 3/3 runs (x)"


def test_variant_without_any_record_says_not_observable() -> None:
    empty = VariantConditions("box", "b1", 3, None, None, None, 0, (), 0, busy_observed_runs=0)
    assert empty.text() == "load not observable; other processes not observable"
    assert conditions_check([empty]).banner() is None

"""The verdict's p beyond the exact test's reach: hundreds of runs, ties, non-finite times,
any order (report/verdict.py follows scipy's method="auto")."""

from __future__ import annotations

import random

import pytest

from gpubench_nb.errors import ResultsError
from gpubench_nb.report.verdict import compare_runs, mannwhitney_p

scipy_stats = pytest.importorskip("scipy.stats")


def scipy_p(a, b) -> float:
    return float(scipy_stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)


@pytest.mark.parametrize("n", [516, 1000, 2000])
def test_many_runs_give_scipys_p_without_overflow(n: int) -> None:
    rng = random.Random(n)
    a = [round(rng.gauss(1.0, 0.1), 3) for _ in range(n)]  # rounded: many ties
    b = [round(rng.gauss(1.01, 0.1), 3) for _ in range(n)]
    assert mannwhitney_p(a, b) == pytest.approx(scipy_p(a, b), rel=1e-9)
    assert compare_runs(a, b).p_value is not None


@pytest.mark.parametrize("sizes", [(3, 40), (8, 8), (9, 9), (12, 30)])
def test_small_and_mid_samples_match_scipy(sizes) -> None:
    rng = random.Random(sum(sizes))
    a = [rng.random() for _ in range(sizes[0])]
    b = [rng.random() + 0.2 for _ in range(sizes[1])]
    assert mannwhitney_p(a, b) == pytest.approx(scipy_p(a, b), rel=1e-12)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_durations_are_refused(bad: float) -> None:
    with pytest.raises(ResultsError, match="R3.6.*not a finite number"):
        mannwhitney_p([bad, 1, 2, 3, 4], [5, 6, 7, 8, 9])
    with pytest.raises(ResultsError):
        compare_runs([1, 2, 3, 4, 5], [6, 7, bad, 8, 9])


def test_p_does_not_depend_on_order() -> None:
    rng = random.Random(7)
    a = [0.1, 0.1, 0.2, 0.3, 0.3, 0.5, 0.7]
    b = [0.2, 0.3, 0.4, 0.4, 0.6, 0.8, 0.9, 0.9]
    first = mannwhitney_p(a, b)
    for _ in range(20):
        rng.shuffle(a)
        rng.shuffle(b)
        assert mannwhitney_p(a, b) == first
        assert mannwhitney_p(b, a) == first


def test_identical_samples_are_not_distinguishable() -> None:
    assert mannwhitney_p([1.0] * 20, [1.0] * 20) == 1.0

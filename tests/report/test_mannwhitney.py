"""The Mann–Whitney p without scipy (report/verdict.py): the same floats as
``scipy.stats.mannwhitneyu`` with its default method="auto"."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpubench_nb.report.verdict import (
    average_ranks,
    compare_runs,
    mannwhitney_p,
    outlier_fence,
    scipy_binom,
    u_counts,
)

scipy_stats = pytest.importorskip("scipy.stats")
scipy_special = pytest.importorskip("scipy.special")


def scipy_p(a, b) -> float:
    return float(scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method="auto").pvalue)


def test_worked_example_scipy_docs() -> None:
    # scipy's own example (Shier 2004): males vs females, U = 17, exact p = 0.1111111111111111
    males, females = [19, 22, 16, 29, 24], [20, 11, 17, 12]
    assert mannwhitney_p(males, females) == 0.1111111111111111 == scipy_p(males, females)


def test_ranks_average_over_ties() -> None:
    assert average_ranks([3.0, 1.0, 3.0, 2.0, 3.0]) == ([4.0, 1.0, 4.0, 2.0, 4.0], [1, 1, 3])
    assert average_ranks([0.5, 0.5]) == ([1.5, 1.5], [2])


@pytest.mark.parametrize("m, n", [(1, 1), (3, 4), (5, 5), (8, 13)])
def test_u_counts_are_the_rank_splits(m: int, n: int) -> None:
    counts = u_counts(m, n)
    assert sum(counts) == math.comb(m + n, m)
    assert counts == counts[::-1]  # U and m·n − U are equally likely
    assert counts[0] == counts[-1] == 1  # complete separation: one split each way


def test_binom_is_scipys_float() -> None:
    for n in range(0, 40):  # k < 20: scipy's product path (beyond, both near the exact value)
        for k in range(0, n + 1):
            assert scipy_binom(n, k) == float(scipy_special.binom(n, k)), (n, k)


times = st.floats(min_value=1e-4, max_value=10.0, allow_nan=False)
tied = st.sampled_from([0.0035, 0.0036, 0.0317, 0.05, 1.0])  # many ties, as rounded clocks give


@settings(max_examples=400, deadline=None)
@given(
    a=st.lists(st.one_of(times, tied), min_size=1, max_size=15),
    b=st.lists(st.one_of(times, tied), min_size=1, max_size=15),
)
def test_p_is_scipys_on_generated_samples(a, b) -> None:
    assert mannwhitney_p(a, b) == pytest.approx(scipy_p(a, b), rel=1e-12, abs=1e-300)


# Warm times (s) of a `gpubench-nb run parameters/demo.yaml` on a 2-core CPU (2026-12-04).
DEMO_WARM = {
    "b1": [0.037606284, 0.036994946, 0.035537703, 0.037108395, 0.036325342],
    "b4": [0.015632089, 1.129400349, 0.222140791, 0.011928721, 0.348881451],
    "b8": [0.006674289, 0.017424921, 0.036935758, 0.006734829, 0.037847962],
}


def test_demo_verdicts_equal_scipys() -> None:
    # Every pair the demo's report compares, capped at the fences as compare_runs ranks them.
    for a in DEMO_WARM.values():
        for b in DEMO_WARM.values():
            verdict = compare_runs(a, b)
            fence_a, fence_b = outlier_fence(a), outlier_fence(b)
            capped_a = [min(v, fence_a) for v in a] if fence_a else a
            capped_b = [min(v, fence_b) for v in b] if fence_b else b
            assert verdict.p_value == scipy_p(capped_a, capped_b)
            assert verdict.raw_p_value == scipy_p(a, b)
    # the demo report's sentence: b8 vs b4, p = 0.222 (a b4 run capped at its fence)
    assert f"{compare_runs(DEMO_WARM['b8'], DEMO_WARM['b4']).p_value:.3g}" == "0.222"


def test_the_report_verdict_imports_no_scipy() -> None:
    # The point of this module: a fresh interpreter comparing runs never loads scipy.
    code = (
        "import sys, json\n"
        "from gpubench_nb.report.verdict import compare_runs, outlier_fence\n"
        "compare_runs([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy')))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert json.loads(out.stdout) == []

"""The two-sided Mann–Whitney U p-value of the verdict, in plain Python (no scipy import).

As ``scipy.stats.mannwhitneyu(a, b, alternative="two-sided")``, ``method="auto"`` (tests/report
compare the floats): exact when one sample has at most 8 values and none is tied, else the normal
approximation with tie and continuity correction. A duration that is not finite is refused: a NaN
has no rank (R3.6).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from gpubench_nb.errors import ResultsError

EXACT_MAX = 8  # scipy's rule: exact while one sample is this small and nothing is tied


def average_ranks(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """1-based ranks, ties sharing the mean of the positions they span; and each tie's size."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks, sizes = [0.0] * len(values), []
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for i in order[start : end + 1]:
            ranks[i] = (start + end + 2) / 2  # mean of positions start+1 .. end+1
        sizes.append(end - start + 1)
        start = end + 1
    return ranks, sizes


def u_counts(m: int, n: int) -> list[int]:
    """How many of the C(m+n, m) rank splits give U = 0, 1, ..., m·n: the coefficients of the
    Gaussian binomial prod_{i=1..m} (1 − q^(n+i)) / (1 − q^i), built one factor at a time."""
    counts = [1] + [0] * (m * n)
    top = len(counts) - 1
    for i in range(1, m + 1):
        for j in range(top, n + i - 1, -1):  # times (1 - q^(n+i)), from the top down
            counts[j] -= counts[j - n - i]
        for j in range(i, top + 1):  # divided by (1 - q^i): a running sum with stride i
            counts[j] += counts[j - i]
    return counts


def scipy_binom(n: int, k: int) -> float:
    """C(n, k) as ``scipy.special.binom`` computes it for a small k (here k ≤ EXACT_MAX): a
    product with the symmetric k, rescaled before it grows past 1e50."""
    if k > n / 2 and n > 0:
        k = n - k
    num = den = 1.0
    for i in range(1, k + 1):
        num *= float(i) + n - k
        den *= i
        if abs(num) > 1e50:
            num /= den
            den = 1.0
    return num / den


def mannwhitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Mann–Whitney U p-value of samples ``a`` and ``b`` (both non-empty, finite)."""
    values = [float(v) for v in (*a, *b)]
    n_a, n_b = len(a), len(b)
    if not n_a or not n_b:
        raise ValueError("the Mann–Whitney test needs two non-empty samples")
    bad = [v for v in values if not math.isfinite(v)]
    if bad:
        raise ResultsError(
            f"a warm duration is not a finite number ({bad[0]}); "
            "fix: restore the bundle's resultats-bruts.csv (its MANIFEST.sha256 names it)",
            rule="R3.6",
        )
    ranks, ties = average_ranks(values)
    u_a = sum(ranks[:n_a]) - n_a * (n_a + 1) / 2  # halves and integers: exact in floats
    u = max(u_a, n_a * n_b - u_a)
    if min(n_a, n_b) > EXACT_MAX or max(ties) > 1:
        return _normal_p(u, n_a, n_b, ties)
    return _exact_p(int(u), min(n_a, n_b), max(n_a, n_b))


def _normal_p(u: float, n_a: int, n_b: int, ties: list[int]) -> float:
    """The normal approximation, corrected for ties and for continuity (scipy's asymptotic)."""
    n = n_a + n_b
    tie_term = sum(t**3 - t for t in ties)
    spread = math.sqrt(n_a * n_b / 12 * ((n + 1) - tie_term / (n * (n - 1))))
    if spread == 0:  # every value equal: nothing tells the samples apart
        return 1.0
    z = (u - n_a * n_b / 2 - 0.5) / spread
    return min(max(math.erfc(z / math.sqrt(2)), 0.0), 1.0)  # 2 · P(Z > z)


def _exact_p(k: int, m: int, n: int) -> float:
    """2 · P(U ≥ k) under the exact null for sizes m ≤ n, summed as scipy sums it."""
    total = scipy_binom(m + n, m)
    pmf = [count / total for count in u_counts(m, n)]
    cdf = list(itertools.accumulate(pmf))  # summed left to right, as numpy's cumsum
    complement = m * n - k
    # P(U >= k); for k past the middle, P(U <= m·n − k) by symmetry
    survival = 1.0 - cdf[k] + pmf[k] if k < complement else cdf[complement]
    return min(max(2 * survival, 0.0), 1.0)

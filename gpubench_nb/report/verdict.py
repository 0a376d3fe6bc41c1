"""THE rule (:data:`RULE_TEXT`) for whether one variant's warm runs are faster than another's, and
the outlier fence (R3.6); an outlier ranks at its fence, so one slow run cannot hide a clear median
gap. The test's p-value is scipy's ``method="auto"`` in plain Python (no scipy import): exact when
one sample has at most 8 values and none is tied, else normal with tie and continuity correction."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gpubench_nb.errors import ResultsError

ALPHA = 0.05  # two-sided significance level of the exact Mann–Whitney U test
# fence = median + OUTLIER_K × MAD_SCALE × MAD, one-sided: noise (another process, a clock drop)
# only makes a run slower; a fast run is what the hardware can do.
OUTLIER_K = 3.0
MAD_SCALE = 1.4826  # makes the MAD estimate the standard deviation of normal data
MAD_FLOOR_SHARE = 0.01  # the spread never below this share of the median (identical timings)
MIN_RUNS_FOR_FENCE = 4  # with 3, the MAD is one gap: a run at 1.2× the median would stand out

DISTINGUISHABLE = "distinguishable"
NOT_DISTINGUISHABLE = "not distinguishable"
TOO_FEW = "too few runs to decide"

RULE_TEXT = (
    "two-sided Mann–Whitney U test on the raw warm times (exact; normal with tie correction "
    f"past 8 runs a side or with ties), α = {ALPHA:g}; a run above its variant's median + "
    f"{OUTLIER_K:g} × MAD is kept, marked and ranked at that fence"
)


def outlier_fence(values: Sequence[float]) -> float | None:
    """The time above which a run is an outlier, kept and marked (R3.6): median + OUTLIER_K ×
    scaled MAD (floored at MAD_FLOOR_SHARE of the median); None below MIN_RUNS_FOR_FENCE runs."""
    if len(values) < MIN_RUNS_FOR_FENCE:
        return None
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    spread = max(MAD_SCALE * mad, MAD_FLOOR_SHARE * abs(median))
    return median + OUTLIER_K * spread


def outlier_indices(values: Sequence[float]) -> list[int]:
    """Positions of the runs beyond their variant's fence (empty when no fence exists)."""
    fence = outlier_fence(values)
    return [] if fence is None else [i for i, v in enumerate(values) if v > fence]


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p the exact test can give for these sizes: 2 / C(n_a + n_b, n_a)."""
    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


@dataclass(frozen=True)
class Comparison:
    """The verdict on two variants' warm times, with the numbers that decided it."""

    verdict: str  # DISTINGUISHABLE | NOT_DISTINGUISHABLE | TOO_FEW
    n_a: int
    n_b: int
    p_value: float | None  # with outliers ranked at their fence; None when too few runs
    raw_p_value: float | None  # every run as measured
    capped_runs: int  # outliers (both variants) ranked at their fence
    smallest_p: float

    def evidence(self) -> str:
        """The numbers, for a sentence: ``p = 0.008 ≤ α = 0.05, 5 + 5 runs``."""
        runs = f"{self.n_a} + {self.n_b} runs"
        if self.p_value is None:
            return (
                f"{runs}: the smallest p the exact test can give is {_p(self.smallest_p)} "
                f"> α = {ALPHA:g}"
            )
        sign = "≤" if self.p_value <= ALPHA else ">"
        text = f"p = {_p(self.p_value)} {sign} α = {ALPHA:g}, {runs}"
        if self.capped_runs:
            text += (
                f"; {self.capped_runs} outlier run(s) ranked at the fence (uncapped "
                f"p = {_p(self.raw_p_value)}"
            )
            flipped = (self.raw_p_value is not None) and (
                (self.raw_p_value <= ALPHA) != (self.p_value <= ALPHA)
            )
            text += ", which one slow run would have flipped)" if flipped else ")"
        return text


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def compare_runs(a: Sequence[float], b: Sequence[float]) -> Comparison:
    """THE rule (RULE_TEXT): are the warm times ``a`` and ``b`` distinguishable? Too few runs
    when even a complete separation could not reach ALPHA (3 against 3 give at best p = 0.1)."""
    a, b = [float(v) for v in a], [float(v) for v in b]
    floor = smallest_p(len(a), len(b))
    if floor > ALPHA:
        return Comparison(TOO_FEW, len(a), len(b), None, None, 0, floor)
    capped_a, capped_b = _capped(a), _capped(b)
    capped = sum(x != y for x, y in zip([*a, *b], [*capped_a, *capped_b], strict=True))
    p_value = mannwhitney_p(capped_a, capped_b)
    raw = mannwhitney_p(a, b) if capped else p_value
    verdict = DISTINGUISHABLE if p_value <= ALPHA else NOT_DISTINGUISHABLE
    return Comparison(verdict, len(a), len(b), p_value, raw, capped, floor)


def _capped(values: list[float]) -> list[float]:
    fence = outlier_fence(values)
    return values if fence is None else [min(v, fence) for v in values]


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

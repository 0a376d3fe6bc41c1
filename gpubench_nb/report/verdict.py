"""THE rule that says whether one variant's warm runs are faster than another's, and the fence
above which a run is an outlier on every screen (kept and marked, R3.6).

:data:`RULE_TEXT`: a two-sided Mann–Whitney U test over the raw warm durations at ``ALPHA``, an
outlier ranked at its fence, so that one slow run of five cannot turn a clear median gap into
"not distinguishable" (exact p 0.008 → 0.151); the uncapped p is kept beside it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gpubench_nb.report.mannwhitney import mannwhitney_p  # scipy's, without importing scipy

ALPHA = 0.05  # two-sided significance level of the exact Mann–Whitney U test
# fence = median + OUTLIER_K × MAD_SCALE × MAD, one-sided: noise (another process, a clock drop)
# only makes a run slower; a fast run is what the hardware can do.
OUTLIER_K = 3.0
MAD_SCALE = 1.4826  # makes the MAD estimate the standard deviation of normal data
MAD_FLOOR_SHARE = 0.01  # the spread never below this share of the median (identical timings)
MIN_RUNS_FOR_FENCE = 3  # with fewer runs no run can stand out from its variant

DISTINGUISHABLE = "distinguishable"
NOT_DISTINGUISHABLE = "not distinguishable"
TOO_FEW = "too few runs to decide"

RULE_TEXT = (
    "two-sided Mann–Whitney U test on the raw warm times (exact; normal with tie correction "
    f"past 8 runs a side or with ties), α = {ALPHA:g}; a run above its variant's median + "
    f"{OUTLIER_K:g} × MAD is kept, marked and ranked at that fence"
)


@dataclass(frozen=True)
class Fence:
    """The time above which a run of one variant is an outlier (kept and marked, R3.6)."""

    median_seconds: float
    high_seconds: float

    def clip(self, value: float) -> float:
        return min(value, self.high_seconds)


def outlier_fence(values: Sequence[float]) -> Fence | None:
    """Median + OUTLIER_K × scaled MAD (floored at MAD_FLOOR_SHARE of the median); None when
    fewer than MIN_RUNS_FOR_FENCE runs were timed."""
    if len(values) < MIN_RUNS_FOR_FENCE:
        return None
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    spread = max(MAD_SCALE * mad, MAD_FLOOR_SHARE * abs(median))
    return Fence(median, median + OUTLIER_K * spread)


def outlier_indices(values: Sequence[float]) -> list[int]:
    """Positions of the runs beyond their variant's fence (empty when no fence exists)."""
    fence = outlier_fence(values)
    return [] if fence is None else [i for i, v in enumerate(values) if v > fence.high_seconds]


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
    return values if fence is None else [fence.clip(v) for v in values]

"""How often the verdict rule (report/verdict.py) calls a difference where there is none.

Draws pairs of variants from ONE distribution (5 + 5 warm runs each), applies compare_runs,
and prints the share of pairs called "distinguishable" (the false-positive rate at α = 0.05),
with the fence and without it (the raw exact Mann-Whitney U test). Then the power it keeps
when one of five runs of a clearly faster variant is slow (issue 24's example).

    python benchmarks/verdict_error_rates.py [--pairs 4000] [--seed 1]
"""

from __future__ import annotations

import argparse

import numpy as np

from gpubench_nb.report.verdict import ALPHA, compare_runs


def _rates(draw, pairs: int) -> tuple[float, float]:
    capped = raw = 0
    for _ in range(pairs):
        values = draw()
        verdict = compare_runs(values[:5], values[5:])
        capped += verdict.p_value is not None and verdict.p_value <= ALPHA
        raw += verdict.raw_p_value is not None and verdict.raw_p_value <= ALPHA
    return capped / pairs, raw / pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    nulls = {
        "normal, 5 % spread": lambda: rng.normal(1.0, 0.05, 10),
        "log-normal, sigma 0.2": lambda: rng.lognormal(0.0, 0.2, 10),
        "log-normal, sigma 1": lambda: rng.lognormal(0.0, 1.0, 10),
        "5 % of runs 10x slower": lambda: (
            rng.normal(1.0, 0.05, 10) * np.where(rng.random(10) < 0.05, 10.0, 1.0)
        ),
    }
    print(f"same distribution, 5 + 5 runs, {args.pairs} pairs: share called distinguishable")
    print(f"{'null':<26}{'with fence':>12}{'raw U test':>12}")
    for name, draw in nulls.items():
        capped, raw = _rates(draw, args.pairs)
        print(f"{name:<26}{capped:>12.3f}{raw:>12.3f}")

    def gap_with_one_slow_run() -> np.ndarray:
        fast = rng.normal(3.5e-3, 0.05e-3, 5)
        fast[rng.integers(5)] = 0.369  # issue 24: one run of five took 369 ms
        return np.concatenate([fast, rng.normal(31.7e-3, 0.3e-3, 5)])

    capped, raw = _rates(gap_with_one_slow_run, args.pairs)
    print(f"9x gap, one slow run of 5: called faster {capped:.3f} with fence, {raw:.3f} raw")


if __name__ == "__main__":
    main()

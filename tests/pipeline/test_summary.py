"""The summary printed at the end of `gpubench-nb run` (issue 25): times as the report shows
them, 3 significant digits with units (formats.seconds_range), median and min–max (R3.5)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpubench_nb.pipeline.progress import summary_text


@dataclass(frozen=True)
class _Verdict:
    verdict: bool | None
    accepted_runs: int
    measured_runs: int


def _row(phase: str, index: int, elapsed: float | None) -> dict:
    return {"variant_id": "b1", "phase": phase, "run_index": index, "elapsed_seconds": elapsed}


def test_the_summary_shows_seconds_with_units_not_six_decimals() -> None:
    rows = [
        _row("cold", 1, 0.040643),
        _row("warm", 1, 0.039416),
        _row("warm", 2, 0.038916),
        _row("warm", 3, 0.040643),
        _row("warm", 4, None),  # a failed run: counted, never a time (R3.6)
    ]
    text = summary_text(
        rows,
        Path("/tmp/b"),
        None,
        verdicts={"b1": _Verdict(True, 4, 4)},
    )
    assert "0.039416" not in text and "0.038916–0.040643" not in text  # the old six decimals
    warm = next(line for line in text.splitlines() if line.startswith("b1        warm"))
    assert warm.split()[:4] == ["b1", "warm", "4", "1"]  # n and failed kept
    assert warm.endswith("39.4 ms (38.9 ms – 40.6 ms)")  # median (min – max), R3.5
    cold = next(line for line in text.splitlines() if line.startswith("b1        cold"))
    assert cold.endswith("40.6 ms (40.6 ms – 40.6 ms)")
    assert "time: median (min – max)" in text.splitlines()[1]


def test_a_phase_without_any_time_shows_a_dash() -> None:
    text = summary_text(
        [_row("warm", 1, None)],
        Path("/tmp/b"),
        None,
        verdicts={"b1": _Verdict(None, 0, 1)},
    )
    warm = next(line for line in text.splitlines() if line.startswith("b1        warm"))
    assert warm.endswith("—") and "acceptance not recorded" in text

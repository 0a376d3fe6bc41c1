"""`gpubench-nb run`: the whole chain behind a progress bar on stderr, then its summary."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from gpubench_nb.pipeline import orchestrate
from gpubench_nb.pipeline.schedule import ScheduledRun
from gpubench_nb.protocol.outputs import check_output_folder
from gpubench_nb.protocol.records import PHASES
from gpubench_nb.summary import summary_text


def run_with_progress(
    experiment_path: str | Path,
    *,
    output_dir: str | Path,
    variants: list[str] | None,
    fresh: bool,
    run_timeout_seconds: int,
    protocol: str | Path | None,
    stream: TextIO,
) -> str:
    """Run every scheduled run (orchestrate.run_experiment) with a bar on ``stream``; return
    the one-screen summary (per variant and phase, then each verdict by the one rule, R1.5)."""
    check_output_folder(Path(output_dir), option="--output-dir")
    bars: list = []  # made at the first scheduled run: a refusal before it shows none
    finished = False
    try:
        result = orchestrate.run_experiment(
            experiment_path,
            output_dir=output_dir,
            variants=variants,
            fresh=fresh,
            run_timeout_seconds=run_timeout_seconds,
            on_progress=_progress(bars, stream),
            protocol=protocol,
        )
        finished = True
    finally:
        for bar in bars:  # closed at the real count; a refusal is printed after it (issue 16)
            if finished:
                bar.n = bar.total
            bar.close()
    return summary_text(
        result.rows, result.bundle_dir, result.report_path, verdicts=result.verdicts, phases=PHASES
    )


def _progress(bars: list, stream: TextIO) -> Callable[[ScheduledRun, int, int], None]:
    """``on_progress`` for run_experiment: one tqdm bar in ``bars``, made at its first call."""
    from tqdm import tqdm

    def progress(run: ScheduledRun, number: int, total: int) -> None:
        if not bars:
            bars.append(tqdm(total=total, unit="run", file=stream, dynamic_ncols=True))
        bar = bars[0]
        bar.n = number - 1  # runs finished so far
        bar.set_description(f"{run.variant_id} {run.phase} {run.run_index}")
        bar.refresh()

    return progress

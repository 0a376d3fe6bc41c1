"""`gpubench-nb run`: the whole chain with its progress on stderr (a tqdm bar in a terminal,
else one line per finished run), then its one-screen summary (R3.5; verdicts by R1.5, R5.7).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from gpubench_nb.formats import NOT_RECORDED, seconds, seconds_range
from gpubench_nb.pipeline import orchestrate
from gpubench_nb.pipeline.schedule import ScheduledRun
from gpubench_nb.protocol.outputs import check_output_folder
from gpubench_nb.protocol.quality import VariantAcceptance, variant_acceptance
from gpubench_nb.protocol.records import PHASES
from gpubench_nb.report.stats import summarise


def run_with_progress(
    experiment_path: str | Path, *, output_dir: str | Path, stream: TextIO, **options: Any
) -> str:
    """orchestrate.run_experiment(**options) with its progress on ``stream``; the summary."""
    check_output_folder(Path(output_dir), option="--output-dir")
    progress = progress_for(stream)
    finished = False
    try:
        result = orchestrate.run_experiment(
            experiment_path, output_dir=output_dir, on_progress=progress, **options
        )
        finished = True
    finally:  # closed at the real count; a refusal is printed after it
        progress.close(finished)
    verdicts = variant_acceptance(result.rows)  # the one rule (R1.5, R5.7)
    return summary_text(result.rows, result.bundle_dir, result.report_path, verdicts=verdicts)


def progress_for(stream: TextIO) -> ProgressBar | ProgressLines:
    """A bar when ``stream`` is a terminal, else one plain line per finished run."""
    isatty = getattr(stream, "isatty", None)
    return ProgressBar(stream) if callable(isatty) and isatty() else ProgressLines(stream)


class ProgressBar:
    """``on_progress`` for run_experiment: one tqdm bar, made at the first scheduled run."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.bar: Any = None

    def __call__(self, run: ScheduledRun, number: int, total: int) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="run", file=self.stream, dynamic_ncols=True)
        self.bar.n = number - 1  # runs finished so far
        self.bar.set_description(f"{run.variant_id} {run.phase} {run.run_index}", refresh=False)
        self.bar.refresh()

    def close(self, finished: bool) -> None:
        if self.bar is not None:
            if finished:
                self.bar.n = self.bar.total
            self.bar.close()


class ProgressLines:
    """``on_progress`` for a log: ``[ 4/30] b1 warm 1  3.71 s`` as a run ends (kernel start in)."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.clock = clock
        self.running: tuple[str, float] | None = None  # (run key, start time)

    def __call__(self, run: ScheduledRun, number: int, total: int) -> None:
        if self.running is None or self.running[0] != run.key:  # called before the run
            self.running = (run.key, self.clock())
            return
        wall_seconds = self.clock() - self.running[1]
        self.running = None
        done = number - 1  # called after the run: `number - 1` runs are finished
        width = len(str(total))
        self.stream.write(
            f"[{done:>{width}}/{total}] {run.variant_id} {run.phase} {run.run_index}  "
            f"{seconds(wall_seconds)}\n"
        )
        self.stream.flush()

    def close(self, finished: bool) -> None:
        """Nothing to close: each line was complete when written."""


# How the summary shows a variant's verdict (decided by protocol.quality, never here).
_SHOWN = {True: "accepted", False: "NOT accepted", None: "acceptance not recorded"}


def summary_text(
    rows: Sequence[dict[str, Any]],
    bundle_dir: Path,
    report: Path | None,
    *,
    verdicts: Mapping[str, VariantAcceptance],
) -> str:
    """Per variant and phase: n, failures, median (min – max) as the report; each verdict."""
    lines = [
        f"bundle: {bundle_dir}",
        f"{'variant':<10}{'phase':<7}{'n':>3}{'failed':>8}  time: median (min – max)",
    ]
    summary = summarise(rows)  # the report's one summary (R3.5)
    for bundle, variant in summary.variants():
        for phase in filter(None, (summary.of(bundle, variant, p) for p in PHASES)):
            shown = seconds_range(phase.median, phase.low, phase.high) if phase.n else NOT_RECORDED
            failed = len(phase.failed_runs)
            lines.append(f"{variant:<10}{phase.phase:<7}{len(phase.rows):>3}{failed:>8}  {shown}")
        verdict = verdicts[variant]
        lines.append(
            f"{variant:<10}{_SHOWN[verdict.verdict]} ({verdict.accepted_runs}"
            f"/{verdict.measured_runs} measured runs accepted, R1.5)"
        )
    lines.append(f"report: {report}" if report else "report: not rendered")
    return "\n".join(lines)

"""`run`'s progress (issue 25): a bar in a terminal; one plain line per finished run anywhere
else (``make demo > log``, CI, nohup), never carriage-return frames in a log."""

from __future__ import annotations

import io

from gpubench_nb.pipeline.progress import ProgressBar, ProgressLines, progress_for
from gpubench_nb.pipeline.schedule import ScheduledRun


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _drive(progress, runs: list[tuple[str, str, int]]) -> None:
    """What run_experiment does: a call before each run and one after it (number + 1)."""
    for number, (variant, phase, index) in enumerate(runs, start=1):
        run = ScheduledRun(number, variant, phase, index)
        progress(run, number, len(runs))
        progress(run, number + 1, len(runs))


def test_a_log_gets_one_plain_line_per_finished_run() -> None:
    stream = io.StringIO()  # not a terminal, as stderr is under `make demo > log`
    progress = progress_for(stream)
    assert isinstance(progress, ProgressLines)
    ticks = iter([0.0, 3.71, 10.0, 10.25] + [20.0 + i for i in range(20)])
    progress.clock = lambda: next(ticks)
    runs = [("b1", "cold", 1), ("b1", "warm", 1)] + [("b4", "warm", i) for i in range(1, 9)]
    _drive(progress, runs)
    progress.close(True)
    text = stream.getvalue()
    assert "\r" not in text  # no bar frames in a log
    lines = text.splitlines()
    assert len(lines) == len(runs)  # one per run, each once
    assert lines[0] == "[ 1/10] b1 cold 1  3.71 s"
    assert lines[1] == "[ 2/10] b1 warm 1  250 ms"
    assert lines[-1] == "[10/10] b4 warm 8  1.00 s"


def test_an_unfinished_run_prints_no_line() -> None:
    stream = io.StringIO()
    progress = ProgressLines(stream)
    run = ScheduledRun(1, "b1", "cold", 1)
    progress(run, 1, 3)
    progress(run, 2, 3)
    progress(ScheduledRun(2, "b4", "cold", 1), 2, 3)  # interrupted
    progress.close(False)
    [line] = stream.getvalue().splitlines()  # the finished run only
    assert line.startswith("[1/3] b1 cold 1  ")


def test_a_terminal_keeps_the_bar_each_frame_drawn_once() -> None:
    stream = _Terminal()
    progress = progress_for(stream)
    assert isinstance(progress, ProgressBar)
    _drive(progress, [("b1", "cold", 1), ("b1", "warm", 1)])
    progress.close(True)
    frames = [f for f in stream.getvalue().split("\r") if f.strip()]
    assert "2/2" in frames[-1] and "100%" in frames[-1]
    # tqdm's set_description used to draw a frame of its own before refresh() drew it again
    assert len(frames) == len(set(frames))

"""A schedule stopped by scancel or pre-emption (SIGTERM), Slurm's time-limit warning (USR2), a
closed terminal (SIGHUP) or Ctrl-C, for reasons outside the model: the run in progress is
discarded (no row), recorded in ``logs/interruptions.jsonl`` and redone with a note (R3.6)."""

from __future__ import annotations

import functools
import json
import os
import platform
import signal
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any

from gpubench_nb.atomic import append_text_durable
from gpubench_nb.engine.allocation import slurm_job_id
from gpubench_nb.protocol.clock import utc_now

INTERRUPTIONS_LOG = "logs/interruptions.jsonl"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR2, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A stop asked from outside, like Ctrl-C: never a row. ``then``: the handler it replaced
    (submitit's USR2 requeue), to call once the interruption is recorded."""

    def __init__(self, signal_name: str, then: Callable[[], None] | None = None) -> None:
        super().__init__(f"interrupted by {signal_name}")
        self.signal_name = signal_name
        self.then = then
        self.note: str | None = None  # set once recorded: what the terminal says


@contextmanager
def stop_on_signals(chain: Sequence[signal.Signals] = (signal.SIGUSR2,)) -> Iterator[None]:
    """Raise :class:`Interrupted` in the main thread on any STOP_SIGNALS (once), handing a
    ``chain`` signal's previous handler over in ``then``; handlers restored on exit."""
    previous: dict[signal.Signals, Any] = {}

    def handler(signum: int, frame: FrameType | None) -> None:
        for number in STOP_SIGNALS:  # a second signal must not interrupt the recording
            signal.signal(number, signal.SIG_IGN)
        original = previous.get(signal.Signals(signum))
        chained = signum in chain and callable(original)
        then = functools.partial(original, signum, frame) if chained else None
        raise Interrupted(signal.Signals(signum).name, then)

    for number in STOP_SIGNALS:
        previous[number] = signal.signal(number, handler)
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def record_interruption(
    bundle_dir: Path,
    run_key: str | None,
    stop: Interrupted,
    *,
    schedule: Sequence[str] = (),
    done: Collection[str] = (),
) -> dict:
    """Append the stop of ``run_key`` (``done``: the keys of ``schedule`` with rows) to the
    bundle's ``logs/interruptions.jsonl`` in one durable append; ``stop.note`` says it."""
    entry = {
        "utc": utc_now(),
        "signal": stop.signal_name,
        "run": None if run_key in done else run_key,  # None: nothing to redo
        "runs_done": [key for key in schedule if key in done],
        "runs_total": len(schedule) if schedule else None,
        "slurm_job_id": slurm_job_id(),
        "host": platform.node(),
        "pid": os.getpid(),
        "meaning": "the run in progress was discarded, not an observation (R3.6); "
        "it is redone when the schedule resumes",
    }
    log = Path(bundle_dir).resolve() / INTERRUPTIONS_LOG
    append_text_durable(log, json.dumps(entry) + "\n")
    # what the terminal says: the run discarded, the runs kept, the log, how to resume
    running = f"run {entry['run']} was discarded (not an observation, R3.6) and will be redone; "
    total = f" of {len(schedule)}" if schedule else ""
    stop.note = (
        f"interrupted by {stop.signal_name}: {running if entry['run'] else ''}"
        f"{len(entry['runs_done'])}{total} runs are done and kept; recorded in {log}. To resume, "
        "run the same command again (without --fresh): finished runs are not redone."
    )
    return entry


def read_interruptions(bundle_dir: Path) -> list[dict[str, Any]]:
    """Every recorded interruption of the bundle, oldest first (a torn last line is skipped)."""
    path, out = Path(bundle_dir) / INTERRUPTIONS_LOG, []
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        with suppress(json.JSONDecodeError):
            out.append(json.loads(line))
    return [entry for entry in out if isinstance(entry, dict)]


def interruption_note(entries: Sequence[dict[str, Any]]) -> str | None:
    """The note a redone run carries: which earlier attempts were interrupted, and why."""
    if not entries:
        return None
    events = ", ".join(
        f"{e.get('signal')} at {e.get('utc')}"
        + (f" (Slurm job {e['slurm_job_id']})" if e.get("slurm_job_id") else "")
        for e in entries
    )
    attempts = "attempt" if len(entries) == 1 else "attempts"
    return (
        f"R3.6: {len(entries)} earlier {attempts} of this run interrupted by {events} and "
        "discarded (an interruption is not an observation); this row is the redone run"
    )


def terminate_children(sig: int = signal.SIGTERM) -> list[int]:
    """Signal every descendant (the kernels), deepest first: none writes into a run to redo."""
    found: list[int] = []

    def walk(pid: int) -> None:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            with suppress(OSError):  # a task that ended meanwhile
                for child in map(int, (task / "children").read_text().split()):
                    walk(child)
                    found.append(child)

    walk(os.getpid())
    for pid in found:
        with suppress(OSError):
            os.kill(pid, sig)
    return found

"""A schedule stopped by a signal: the run in progress is discarded, recorded, redone (R3.6).

A Slurm job that is cancelled (``scancel``: SIGTERM), pre-empted (SIGTERM) or warned before its
time limit (USR2) must not turn the run in progress into an observation: the kernel that got
the signal dies of *our* interruption, not of the model. :func:`stop_on_signals` turns those
signals into :class:`Interrupted` in the main thread at once; the orchestrator writes no row
for the run in progress, appends the event to the bundle's ``logs/interruptions.jsonl``, and
the resumed schedule redoes that run with a note naming the interruption (R3.6: the event is
kept and explained, the interrupted attempt is not a measurement).
"""

from __future__ import annotations

import json
import os
import platform
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any

from gpubench_nb.atomic import append_text_durable
from gpubench_nb.protocol.clock import utc_now

INTERRUPTIONS_LOG = "logs/interruptions.jsonl"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR2)


class Interrupted(KeyboardInterrupt):
    """A stop asked from outside (a signal), like Ctrl-C: never an observation, never a row.

    ``then`` is the handler that was there before (submitit's USR2 handler checkpoints and
    requeues the job), to be called once the interruption is recorded.
    """

    def __init__(self, signal_name: str, then: Callable[[], None] | None = None) -> None:
        super().__init__(f"interrupted by {signal_name}")
        self.signal_name = signal_name
        self.then = then


@contextmanager
def stop_on_signals(
    signals: Sequence[signal.Signals] = STOP_SIGNALS,
    chain: Sequence[signal.Signals] = (signal.SIGUSR2,),
) -> Iterator[None]:
    """Raise :class:`Interrupted` in the main thread on any of ``signals`` (once).

    For a signal in ``chain``, the handler installed before (submitit's requeue on USR2) is
    handed over in ``Interrupted.then`` instead of being lost. Handlers are restored on exit.
    """
    previous: dict[signal.Signals, Any] = {}

    def handler(signum: int, frame: FrameType | None) -> None:
        for number in signals:  # a second signal must not interrupt the recording
            signal.signal(number, signal.SIG_IGN)
        original = previous.get(signal.Signals(signum))
        then = None
        if signum in chain and callable(original):

            def then() -> None:
                original(signum, frame)

        raise Interrupted(signal.Signals(signum).name, then)

    for number in signals:
        previous[number] = signal.signal(number, handler)
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def record_interruption(bundle_dir: Path, run_key: str | None, stop: Interrupted) -> dict:
    """Append the event to ``logs/interruptions.jsonl`` of the bundle (kept, sealed, R3.6)."""
    entry = {
        "utc": utc_now(),
        "signal": stop.signal_name,
        "run": run_key,  # None: between runs (a notebook step), nothing to redo
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "host": platform.node(),
        "pid": os.getpid(),
        "meaning": "the run in progress was discarded, not an observation (R3.6); "
        "it is redone when the schedule resumes",
    }
    append_text_durable(Path(bundle_dir) / INTERRUPTIONS_LOG, json.dumps(entry) + "\n")
    return entry


def read_interruptions(bundle_dir: Path) -> list[dict[str, Any]]:
    """Every recorded interruption of the bundle, oldest first (a torn last line is skipped)."""
    try:
        lines = (Path(bundle_dir) / INTERRUPTIONS_LOG).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


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
    """Signal every descendant of this process (the kernels), deepest first; Linux /proc only.

    Under Slurm the step's processes got the signal already; elsewhere (a local job) an
    orphaned kernel would otherwise go on writing into the run folder that is to be redone.
    """
    found: list[int] = []

    def walk(pid: int) -> None:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                walk(child)
                found.append(child)

    walk(os.getpid())
    for pid in found:
        with suppress(OSError):
            os.kill(pid, sig)
    return found

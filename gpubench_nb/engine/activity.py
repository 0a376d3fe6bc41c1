"""Concurrency on the machine (R2.5): the 1-minute load average and the other processes using
notable CPU, from /proc; each reading compares CPU ticks with the previous one (first: this
module's import), so nothing sleeps on the run's path. Without /proc: ``"not observable"``."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpubench_nb.engine.nvml import NOT_OBSERVABLE

MIN_WINDOW_SECONDS = 0.05  # shorter windows give shares too coarse to name a process
NOTABLE_SHARE = 0.10  # 10 % of one core over the window
TOP = 5


def _cpu_ticks(proc: Path) -> dict[int, tuple[str, int]]:
    """``pid -> (command name, utime + stime in clock ticks)`` for every readable process."""
    out: dict[int, tuple[str, int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:  # "pid (comm) state ppid ...": comm may hold spaces and parentheses
            text = (entry / "stat").read_text(encoding="utf-8", errors="replace")
            head, _, rest = text.rpartition(")")
            fields = rest.split()
            ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
        except (OSError, IndexError, ValueError):  # ended while we looked, or unreadable
            continue
        out[int(entry.name)] = (head.partition("(")[2], ticks)
    return out


def load_average() -> list[float] | None:
    """The 1, 5 and 15-minute load averages, or None off Linux."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):  # pragma: no cover - not on Linux
        return None


def load_average_1min() -> float | None:
    return (load_average() or [None])[0]


def _snapshot(proc: Path, clock: Callable[[], float]) -> tuple[dict[int, tuple[str, int]], float]:
    return _cpu_ticks(proc), clock()


try:  # the first window's start: this module's import, early in a run's kernel
    _LAST = {"/proc": _snapshot(Path("/proc"), time.monotonic)}
except OSError:  # pragma: no cover - no /proc (not Linux)
    _LAST = {}


def cpu_activity(
    *,
    window_seconds: float | None = None,
    proc: Path | str = "/proc",
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    own_pid: int | None = None,
    ticks_per_second: int | None = None,
    load_average: Callable[[], float | None] = load_average_1min,
) -> dict[str, Any]:
    """1-minute load average and the other processes busy over the window (top 5); the window
    runs since the previous reading, or ``window_seconds`` slept here."""
    proc = Path(proc)
    me = os.getpid() if own_pid is None else own_pid
    hz = ticks_per_second or os.sysconf("SC_CLK_TCK")
    record: dict[str, Any] = {
        "load_average_1min": load_average(),
        "cpu_count": os.cpu_count(),
        "window_seconds": window_seconds,
        "busy_processes": NOT_OBSERVABLE,
    }
    try:
        if window_seconds is not None:
            before, started = _snapshot(proc, clock)
            sleep(window_seconds)
        else:
            previous = _LAST.get(str(proc))
            before, started = previous if previous is not None else ({}, clock())
        after, now = _snapshot(proc, clock)
    except OSError:
        return record
    _LAST[str(proc)] = (after, now)
    elapsed = now - started
    record["window_seconds"] = round(elapsed, 3)
    if elapsed < MIN_WINDOW_SECONDS:
        return record
    busy = []
    for pid, (name, ticks) in after.items():
        if pid == me or pid not in before:
            continue
        share = (ticks - before[pid][1]) / hz / elapsed
        if share >= NOTABLE_SHARE:
            busy.append({"pid": pid, "name": name, "cpu_share": round(share, 2)})
    busy.sort(key=lambda p: -p["cpu_share"])
    record["busy_processes"] = busy[:TOP]
    return record


def activity_text(record: dict[str, Any] | None) -> str:
    """The `notes` form: ``load1=1.52 busy=pid 42 python (0.98 core)`` or ``busy=none``."""
    if not record:
        return NOT_OBSERVABLE
    load, busy = record.get("load_average_1min"), record.get("busy_processes")
    busy_text = NOT_OBSERVABLE
    if isinstance(busy, list):
        shares = (f"pid {p['pid']} {p['name']} ({p['cpu_share']:.2f} core)" for p in busy)
        busy_text = ", ".join(shares) or "none"
    return f"load1={'n/a' if load is None else f'{load:.2f}'} busy_cpu={busy_text}"

"""Concurrency on the machine (R2.5): the 1-minute load average and the other processes that use
notable CPU, sampled from /proc over a short window at the start and at the end of a run.

No dependency beyond the standard library; off Linux (no /proc) the process part is
``"not observable"``. The window (0.2 s) is spent outside every timer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

NOT_OBSERVABLE = "not observable"
WINDOW_SECONDS = 0.2
NOTABLE_SHARE = 0.10  # 10 % of one core over the window
TOP = 5


def _cpu_ticks(proc: Path) -> dict[int, tuple[str, int]]:
    """``pid -> (command name, utime + stime in clock ticks)`` for every readable process."""
    out: dict[int, tuple[str, int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text(encoding="utf-8", errors="replace")
        except OSError:  # the process ended while we looked
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        head, sep, rest = text.rpartition(")")
        if not sep:
            continue
        fields = rest.split()
        try:
            ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
        except (IndexError, ValueError):
            continue
        out[int(entry.name)] = (head.partition("(")[2], ticks)
    return out


def load_average_1min() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):  # pragma: no cover - not on Linux
        return None


def cpu_activity(
    *,
    window_seconds: float = WINDOW_SECONDS,
    proc: Path | str = "/proc",
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    own_pid: int | None = None,
    ticks_per_second: int | None = None,
    load_average: Callable[[], float | None] = load_average_1min,
) -> dict[str, Any]:
    """The machine's activity now: 1-minute load average, and the other processes that used at
    least 10 % of one core over ``window_seconds`` (top 5, busiest first, with their share)."""
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
        before, started = _cpu_ticks(proc), clock()
        sleep(window_seconds)
        after, elapsed = _cpu_ticks(proc), clock() - started
    except OSError:
        return record
    if elapsed <= 0:
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
    load = record.get("load_average_1min")
    busy = record.get("busy_processes")
    if isinstance(busy, list):
        busy_text = (
            ", ".join(f"pid {p['pid']} {p['name']} ({p['cpu_share']:.2f} core)" for p in busy)
            or "none"
        )
    else:
        busy_text = NOT_OBSERVABLE
    return f"load1={'n/a' if load is None else f'{load:.2f}'} busy_cpu={busy_text}"

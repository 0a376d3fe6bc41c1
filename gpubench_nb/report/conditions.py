"""What the machine was doing during each run, as its run.json recorded it (R2.5).

Per run: the 1-minute load average at start and end, other processes that used at least 10 % of
a core (engine/activity.py), other GPU processes, and, where the run's record has them, GPU
clock and throttle fields. Per variant: the same over its runs, and a banner when variants ran
under different or heavy load (thresholds below, stated in the banner).
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# A 1-minute load average above this many runnable tasks per core means the CPU was
# oversubscribed while the run waited or measured.
HEAVY_LOAD_PER_CORE = 1.0
# Variants whose median loads differ by more than this many tasks per core did not run under
# the same conditions: their times may differ for that reason alone.
DIFFERENT_LOAD_PER_CORE = 0.5
NOT_OBSERVABLE = "not observable"
_FAULT = re.compile(r"fault injection GPUBENCH_FAULT=[^;]*")
_GPU_KEY = re.compile(r"clock|throttle", re.I)


@dataclass(frozen=True)
class RunConditions:
    """The machine around one run; None where the record does not say (R4.3)."""

    load_start: float | None = None  # 1-minute load average
    load_end: float | None = None
    cpu_count: int | None = None
    busy: tuple[str, ...] | None = None  # "python (0.98 core)"; None: not observable
    gpu_processes: tuple[str, ...] | None = None  # None: not observable or no GPU
    gpu: tuple[str, ...] = field(default_factory=tuple)  # clock / throttle fields
    fault: str | None = None  # an injected fault scoped to this run (engine/faults.py)

    @property
    def load_max(self) -> float | None:
        loads = [v for v in (self.load_start, self.load_end) if v is not None]
        return max(loads) if loads else None

    def text(self) -> str:
        """One line: ``load 1.52 → 1.60 (2 cores); busy: python (0.98 core); ...``."""
        parts = [f"load {_load(self.load_start)} → {_load(self.load_end)}"]
        if self.cpu_count:
            parts[0] += f" ({self.cpu_count} cores)"
        if self.busy is None:
            parts.append(f"busy processes {NOT_OBSERVABLE}")
        else:
            parts.append(f"busy: {', '.join(self.busy) if self.busy else 'none'}")
        if self.gpu_processes:
            parts.append(f"other GPU processes: {', '.join(self.gpu_processes)}")
        parts += list(self.gpu)
        if self.fault:
            parts.append(self.fault)
        return "; ".join(parts)


def _load(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _first(value: Any) -> float | None:
    if isinstance(value, list | tuple):
        value = value[0] if value else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _busy(activity: Any) -> tuple[str, ...] | None:
    if not isinstance(activity, Mapping):
        return None
    procs = activity.get("busy_processes")
    if not isinstance(procs, list):
        return None
    return tuple(
        f"{p.get('name')} ({float(p.get('cpu_share') or 0):.2f} core)"
        for p in procs
        if isinstance(p, Mapping)
    )


def _gpu_processes(env: Mapping[str, Any]) -> tuple[str, ...] | None:
    seen: dict[str, None] = {}
    found = False
    for when in ("start", "end"):
        procs = env.get(f"gpu_processes_{when}")
        if isinstance(procs, list):
            found = True
            for p in procs:
                if isinstance(p, Mapping):
                    seen[f"pid {p.get('pid')} on {p.get('device')}"] = None
    return tuple(seen) if found else None


def _gpu_fields(*records: Mapping[str, Any]) -> tuple[str, ...]:
    """Clock and throttle fields, wherever a run's record holds them (never required)."""
    out = []
    for record in records:
        for key, value in record.items():
            if _GPU_KEY.search(str(key)) and value not in (None, "", [], {}):
                text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
                out.append(f"{key}: {text[:160]}")
    return tuple(dict.fromkeys(out))


def _telemetry(run: Mapping[str, Any]) -> Mapping[str, Any]:
    """run.json ``gpu_telemetry`` (engine/clocks.py): the clocks, reasons and
    throttle flag sampled during the timed pass, read like the top-level fields."""
    telemetry = run.get("gpu_telemetry")
    return telemetry if isinstance(telemetry, Mapping) and telemetry.get("observable") else {}


def run_conditions(run: Mapping[str, Any] | None, notes: str | None = None) -> RunConditions:
    """The conditions of one run from its run.json (``environment`` part) and row notes."""
    run = run or {}
    env = run.get("environment") if isinstance(run.get("environment"), Mapping) else {}
    start, end = env.get("cpu_activity_start"), env.get("cpu_activity_end")
    busy_start, busy_end = _busy(start), _busy(end)
    busy = None
    if busy_start is not None or busy_end is not None:
        busy = tuple(dict.fromkeys((*(busy_start or ()), *(busy_end or ()))))
    fault = _FAULT.search(notes or "") or _FAULT.search(str(run.get("notes") or ""))
    cpu_count = (start or {}).get("cpu_count") if isinstance(start, Mapping) else None
    return RunConditions(
        load_start=_first(env.get("load_average_start")),
        load_end=_first(env.get("load_average_end")),
        cpu_count=cpu_count or env.get("cpu_count"),
        busy=busy,
        gpu_processes=_gpu_processes(env),
        gpu=_gpu_fields(run, env, _telemetry(run)),
        fault=fault.group(0) if fault else None,
    )


@dataclass(frozen=True)
class VariantConditions:
    """The conditions over one variant's runs of one phase."""

    bundle: str
    variant_id: str
    runs: int
    load_median: float | None
    load_max: float | None
    cpu_count: int | None
    busy_runs: int  # runs during which another process used >= 10 % of a core
    busy_names: tuple[str, ...]  # the busiest names, most frequent first
    gpu_process_runs: int  # runs that saw another GPU process
    busy_observed_runs: int | None = None  # runs whose record could see other processes

    def text(self) -> str:
        """Short, for the decision table: ``load 1.20, max 3.10 (2 cores); others busy 4/5``."""
        if self.load_median is None:
            load = f"load {NOT_OBSERVABLE}"
        else:
            load = f"load {self.load_median:.2f}, max {self.load_max:.2f}"
            load += f" ({self.cpu_count} cores)" if self.cpu_count else ""
        observed = self.runs if self.busy_observed_runs is None else self.busy_observed_runs
        if not observed:
            return f"{load}; other processes {NOT_OBSERVABLE}"
        parts = [load, f"others busy {self.busy_runs}/{observed} runs"]
        if self.busy_names:
            parts[-1] += f" ({', '.join(self.busy_names)})"
        if self.gpu_process_runs:
            parts.append(f"other GPU processes {self.gpu_process_runs}/{self.runs} runs")
        return "; ".join(parts)


def variant_conditions(
    rows: Sequence[Mapping[str, Any]], phases: Sequence[str] = ("warm",)
) -> list[VariantConditions]:
    """Per (bundle, variant), over the runs of ``phases`` (rows carry ``conditions``)."""
    groups: dict[tuple[str, str], list[RunConditions]] = {}
    for row in rows:
        if row.get("phase") in phases and isinstance(row.get("conditions"), RunConditions):
            key = (str(row.get("bundle") or ""), str(row.get("variant_id")))
            groups.setdefault(key, []).append(row["conditions"])
    out = []
    for (bundle, variant), runs in groups.items():
        loads = [c.load_max for c in runs if c.load_max is not None]
        names: Counter[str] = Counter(name.split(" (")[0] for c in runs for name in (c.busy or ()))
        cores = [c.cpu_count for c in runs if c.cpu_count]
        out.append(
            VariantConditions(
                bundle=bundle,
                variant_id=variant,
                runs=len(runs),
                load_median=statistics.median(loads) if loads else None,
                load_max=max(loads) if loads else None,
                cpu_count=cores[0] if cores else None,
                busy_runs=sum(1 for c in runs if c.busy),
                busy_names=tuple(name for name, _ in names.most_common(3)),
                gpu_process_runs=sum(1 for c in runs if c.gpu_processes),
                busy_observed_runs=sum(1 for c in runs if c.busy is not None),
            )
        )
    return out


def conditions_banner(variants: Sequence[VariantConditions]) -> str | None:
    """A warning when variants ran under heavy or different load; None when they did not."""
    heavy = [
        v
        for v in variants
        if v.load_max is not None and v.cpu_count and v.load_max > HEAVY_LOAD_PER_CORE * v.cpu_count
    ]
    loads = [v for v in variants if v.load_median is not None and v.cpu_count]
    spread = (
        max(v.load_median for v in loads) - min(v.load_median for v in loads)  # type: ignore[operator]
        if len(loads) > 1
        else 0.0
    )
    cores = min((v.cpu_count for v in loads), default=None)
    different = bool(cores) and spread > DIFFERENT_LOAD_PER_CORE * cores  # type: ignore[operator]
    gpu_mixed = len({v.gpu_process_runs > 0 for v in variants}) > 1
    parts = []
    if heavy:
        parts.append(
            "heavy load: the 1-minute load average exceeded "
            f"{HEAVY_LOAD_PER_CORE:g} per core during "
            + ", ".join(f"{v.bundle} / {v.variant_id} (max {v.load_max:.2f})" for v in heavy)
        )
    if different:
        parts.append(
            f"different load: the variants' median loads differ by {spread:.2f}, more than "
            f"{DIFFERENT_LOAD_PER_CORE:g} per core on {cores} cores"
        )
    if gpu_mixed:
        parts.append("another GPU process was seen during some variants' runs and not others")
    if not parts:
        return None
    return (
        "Measured under uneven conditions (R2.5): "
        + "; ".join(parts)
        + ". Times may differ for that reason; see each variant's conditions and the outliers."
    )

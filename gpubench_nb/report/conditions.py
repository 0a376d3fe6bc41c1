"""The machine around each run (run.json, R2.5), per run and variant; when it spoils comparisons."""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

HEAVY_LOAD_PER_CORE = 1.0  # a 1-minute load above this per core: the CPU was oversubscribed
DIFFERENT_LOAD_PER_CORE = 0.5  # median loads per core further apart: not the same conditions
CONTENDED_SHARE = 0.25  # others took this of a run's usable CPUs (the survey, before the loads)
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
    threads: str | None = None  # "2 torch threads, OMP/MKL unset"; None: not recorded
    threads_fixed: bool | None = None  # OMP/MKL_NUM_THREADS or a declared threads setting
    throttled: bool = False  # NVML saw a throttling clock-event reason during the timed pass
    others: float | None = None  # the share of its usable CPUs others took; None: not surveyed

    @property
    def load_max(self) -> float | None:
        loads = [v for v in (self.load_start, self.load_end) if v is not None]
        return max(loads) if loads else None

    def text(self) -> str:
        """One line: ``load 1.52 → 1.60 (2 cores); busy: python (0.98 core); ...``."""
        load = f"load {_load(self.load_start)} → {_load(self.load_end)}"
        busy = f"busy: {', '.join(self.busy) or 'none'}" if self.busy is not None else None
        parts = [
            load + (f" ({self.cpu_count} cores)" if self.cpu_count else ""),
            busy or f"busy processes {NOT_OBSERVABLE}",
            self.others is not None and f"others took {self.others:.0%} of its usable CPUs",
            self.gpu_processes and f"other GPU processes: {', '.join(self.gpu_processes)}",
            self.threads,
            *self.gpu,
            self.fault,
        ]
        return "; ".join(p for p in parts if p)


def _load(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _first(value: Any) -> float | None:
    if isinstance(value, list | tuple):
        value = value[0] if value else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _listed(lists: Sequence[Any], text: Any) -> tuple[str, ...] | None:
    """``text(p)`` of every process in the lists the record holds; None: none was recorded."""
    found = [p for procs in lists if isinstance(procs, list) for p in procs]
    if not any(isinstance(procs, list) for procs in lists):
        return None
    return tuple(dict.fromkeys(text(p) for p in found if isinstance(p, Mapping)))


def _busy(p: Mapping[str, Any]) -> str:
    return f"{p.get('name')} ({float(p.get('cpu_share') or 0):.2f} core)"


def _gpu_fields(*records: Mapping[str, Any]) -> tuple[str, ...]:
    """Clock and throttle fields, wherever a run's record holds them (never required)."""
    out = []
    for record in records:
        for key, value in record.items():
            if _GPU_KEY.search(str(key)) and value not in (None, "", [], {}):
                text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
                out.append(f"{key}: {text[:160]}")
    return tuple(dict.fromkeys(out))


_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _threads(run: Mapping[str, Any], env: Mapping[str, Any]) -> tuple[str | None, bool | None]:
    """(text, fixed): the run's CPU threads from run.json ``threads``, else its start's numerics."""
    state = run.get("threads")
    if not isinstance(state, Mapping):
        numerics = env.get("numerics") if isinstance(env.get("numerics"), Mapping) else {}
        found = numerics.get("environment")
        variables = found if isinstance(found, Mapping) else {}
        state = {"intra_op": numerics.get("cpu_threads"), **variables}
    if state.get("intra_op") is None:
        return None, None
    fixed = [f"{k}={state[k]}" for k in _THREAD_VARIABLES if state.get(k)]
    inter = f", inter-op {state['inter_op']}" if state.get("inter_op") is not None else ""
    text = f"torch intra-op threads {state['intra_op']}{inter}, "
    text += ", ".join(fixed) if fixed else "OMP/MKL threads unset"
    declared = state.get("declared") not in (None, "auto")
    text += f" (declared threads: {state['declared']})" if declared else ""
    return text, bool(fixed) or declared


def _telemetry(run: Mapping[str, Any]) -> Mapping[str, Any]:
    """run.json ``gpu_telemetry`` (engine/clocks.py) when observable: sampled in the timed pass."""
    telemetry = run.get("gpu_telemetry")
    return telemetry if isinstance(telemetry, Mapping) and telemetry.get("observable") else {}


def run_conditions(run: Mapping[str, Any] | None, notes: str | None = None) -> RunConditions:
    """The conditions of one run from its run.json (``environment`` part) and row notes."""
    run = run or {}
    env = run.get("environment") if isinstance(run.get("environment"), Mapping) else {}
    activity = [env.get(f"cpu_activity_{k}") for k in ("start", "end")]
    start, end = [a if isinstance(a, Mapping) else {} for a in activity]
    fault = _FAULT.search(notes or "") or _FAULT.search(str(run.get("notes") or ""))
    threads, fixed = _threads(run, env)
    gpu_processes = [env.get("gpu_processes_start"), env.get("gpu_processes_end")]
    surveyed = (
        map(a.get, ("others_cpu_share", "cpus_usable", "window_seconds")) for a in (start, end)
    )
    windows = [(s / n, w) for s, n, w in surveyed if isinstance(s, float | int) and n and w]
    return RunConditions(
        load_start=_first(env.get("load_average_start")),
        load_end=_first(env.get("load_average_end")),
        cpu_count=start.get("cpu_count") or env.get("cpu_count"),
        busy=_listed([start.get("busy_processes"), end.get("busy_processes")], _busy),
        gpu_processes=_listed(gpu_processes, lambda p: f"pid {p.get('pid')} on {p.get('device')}"),
        gpu=_gpu_fields(run, env, _telemetry(run)),
        fault=fault.group(0) if fault else None,
        threads=threads,
        threads_fixed=fixed,
        throttled=bool(_telemetry(run).get("throttled")),
        others=sum(s * w for s, w in windows) / sum(w for _, w in windows) if windows else None,
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
    threads: tuple[str, ...] = ()  # the distinct thread settings of its runs
    threads_fixed: bool | None = None  # every run fixed its threads; None: not recorded
    throttled_runs: int = 0
    contended_runs: int | None = None  # None: no run surveyed the others on its CPUs

    @property
    def heavy(self) -> str | None:
        """Its contended runs (busy survey), else its load above HEAVY_LOAD_PER_CORE; or None."""
        if self.contended_runs is not None:
            return f"{self.contended_runs}/{self.runs} runs" if self.contended_runs else None
        over = bool(self.cpu_count) and (self.load_max or 0) > HEAVY_LOAD_PER_CORE * self.cpu_count
        return f"max {self.load_max:.2f}" if over else None

    def text(self) -> str:
        """Short, for the decision table: ``load 1.20, max 3.10 (2 cores); others busy 4/5``."""
        if self.load_median is None:
            load = f"load {NOT_OBSERVABLE}"
        else:
            load = f"load {self.load_median:.2f}, max {self.load_max:.2f}"
            load += f" ({self.cpu_count} cores)" if self.cpu_count else ""
        observed = self.runs if self.busy_observed_runs is None else self.busy_observed_runs
        parts = [load, f"other processes {NOT_OBSERVABLE}"]
        if observed:
            parts[1] = f"others busy {self.busy_runs}/{observed} runs"
            parts[1] += f" ({', '.join(self.busy_names)})" if self.busy_names else ""
        if self.gpu_process_runs:
            parts.append(f"other GPU processes {self.gpu_process_runs}/{self.runs} runs")
        if self.contended_runs:
            parts.append(f"others on its CPUs {self.contended_runs}/{self.runs} runs")
        if self.throttled_runs:
            parts.append(f"GPU throttled {self.throttled_runs}/{self.runs} runs")
        return "; ".join(parts)


def over_runs(bundle: str, variant: str, runs: Sequence[RunConditions]) -> VariantConditions:
    """The conditions of one variant's runs, summarised."""
    loads = [c.load_max for c in runs if c.load_max is not None]
    names: Counter[str] = Counter(name.split(" (")[0] for c in runs for name in (c.busy or ()))
    cores = [c.cpu_count for c in runs if c.cpu_count]
    fixed = [c.threads_fixed for c in runs if c.threads_fixed is not None]
    surveyed = any(c.others is not None for c in runs)  # the busy survey on its usable CPUs
    return VariantConditions(
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
        threads=tuple(dict.fromkeys(c.threads for c in runs if c.threads)),
        threads_fixed=all(fixed) if fixed else None,
        throttled_runs=sum(1 for c in runs if c.throttled),
        contended_runs=sum((c.others or 0) >= CONTENDED_SHARE for c in runs) if surveyed else None,
    )


ADVICE = (
    "rerun on a quiet machine, or with fixed threads (`threads: 1` under `fixed` in the "
    "experiment, or OMP_NUM_THREADS=1 for `gpubench-nb run`), so that every variant competes "
    "for the cores alike"
)


@dataclass(frozen=True)
class ConditionsCheck:
    """What the recorded conditions allow: ``problems`` for the banner, and among them
    ``withheld``, those that make a speed comparison unreliable (the verdict is withheld)."""

    problems: tuple[str, ...]
    withheld: tuple[str, ...]

    def banner(self) -> str | None:
        if not self.problems:
            return None
        text = f"Measured under uneven conditions (R2.5): {'; '.join(self.problems)}. "
        if self.withheld:
            return text + "No option is named faster on these runs: see why and what to do below."
        return text + "Times may differ for that reason; see each variant's conditions."


def conditions_check(variants: Sequence[VariantConditions]) -> ConditionsCheck:
    """What withholds a speed comparison (R2.5): heavy load (the busy survey, else the load average)
    unless every such variant fixed its threads (free threads fight for busy cores), load differing
    (not surveyed), another GPU process during some variants only, a throttled GPU."""
    heavy = [v for v in variants if v.heavy]
    loads = [v for v in variants if v.contended_runs is None]  # not surveyed: the load rule
    per_core = [v.load_median / v.cpu_count for v in loads if v.load_median and v.cpu_count]
    spread = max(per_core) - min(per_core) if per_core else 0.0
    found: list[tuple[str, bool]] = []
    if heavy:
        free = not all(v.threads_fixed for v in heavy)
        lead = f"the 1-minute load average exceeded {HEAVY_LOAD_PER_CORE:g} per core"
        if any(v.contended_runs is not None for v in heavy):
            lead = f"other processes used {CONTENDED_SHARE:.0%} or more of the CPUs a run may use"
        named = ", ".join(f"{v.bundle} / {v.variant_id} ({v.heavy})" for v in heavy)
        found.append((
            f"heavy load: {lead} during {named}"
            + (", with threads not fixed" if free else ", threads fixed"),
            free,
        ))  # fmt: skip
    if spread > DIFFERENT_LOAD_PER_CORE:
        found.append((
            f"different load: the variants' median loads per core differ by {spread:.2f}, more "
            f"than {DIFFERENT_LOAD_PER_CORE:g}",
            True,
        ))  # fmt: skip
    if len({v.gpu_process_runs > 0 for v in variants}) > 1:
        found.append(("another GPU process was seen during some variants' runs only", True))
    throttled = [f"{v.bundle} / {v.variant_id}" for v in variants if v.throttled_runs]
    if throttled:
        found.append((f"the GPU was throttled during {', '.join(throttled)}", True))
    return ConditionsCheck(tuple(t for t, _ in found), tuple(t for t, w in found if w))

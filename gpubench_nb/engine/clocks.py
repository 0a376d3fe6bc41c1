"""GPU clocks, power, temperature, clock-event reasons and energy, polled by NVML on its own thread
so the timed code never calls it (R3.1); only samples inside the span count. Never fails a pass;
keys: docs/ARCHITECTURE.md (``gpu_telemetry``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from gpubench_nb.engine.nvml import LOAD_ERROR, NOT_OBSERVABLE, handle_for, load_nvml, parent_gpu

DEFAULT_INTERVAL_SECONDS = 0.02
LOW_CLOCK_FRACTION = 0.85
# The energy counter is believed within [0.5 x min, 1.5 x max] power sampled (else the limit) x
# its window: a reading twice the truth is refused even on a 30 ms pass (docs/TIMING.md).
ENERGY_BOUNDS = (0.5, 1.5)
# NVML clock-event (throttle) reason bits, nvml.h (nvmlClocksEventReason*).
REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
REASON_GETTERS = (
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
)
# Reasons that do not mean the GPU was held back while it worked.
BENIGN = frozenset({"gpu_idle", "applications_clocks_setting", "display_clock_setting"})


def reason_names(mask: int) -> list[str]:
    """Names of the reason bits set in ``mask`` (unknown bits as ``bit_0x...``)."""
    names = [name for bit, name in REASONS.items() if mask & bit]
    unknown = mask & ~sum(REASONS)
    if unknown:
        names.append(f"bit_{unknown:#x}")
    return names


class ClockSampler:
    """Samples one GPU (``nvml`` module or fake, ``handle``; either None: nothing sampled,
    ``reason`` says why) on a side thread, on the stopwatch's clock (``perf_counter_ns``)."""

    def __init__(
        self,
        nvml: Any | None,
        handle: Any | None,
        *,
        interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
        reason: str | None = None,
        join_seconds: float = 0.25,
    ) -> None:
        self.nvml, self.handle, self.reason = nvml, handle, reason
        self.interval_seconds, self.join_seconds = interval_seconds, join_seconds
        self._clock = time.perf_counter_ns
        self.samples: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.energy_start: tuple[int, Any] | None = None  # (clock, mJ)
        self.energy_end: tuple[int, Any] | None = None
        self.span: tuple[int, int] | None = None
        self.failure: str | None = None  # the sampler itself failed: nothing it lacks is a fact
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._state = "new"  # -> started -> stopped

    @property
    def observable(self) -> bool:
        return self.nvml is not None and self.handle is not None

    def _note(self, text: str) -> None:
        if len(self.errors) < 8 and text not in self.errors:
            self.errors.append(text[:160])

    def _ask(self, getter: str | None, *args: Any) -> Any:
        """NVML's number, or None with the error (or the non-number) recorded."""
        if getter is None:
            return None
        try:
            value = getattr(self.nvml, getter)(self.handle, *args)
        except Exception as exc:
            self._note(f"{getter}: {type(exc).__name__}: {exc}")
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self._note(f"{getter} answered {type(value).__name__} {value!r:.40}, not a number")
            return None
        return value

    def sample(self) -> None:
        """One reading of every figure (a failed query is None in that sample)."""
        nvml = self.nvml
        power = self._ask("nvmlDeviceGetPowerUsage")
        reasons = self._ask(
            next((n for n in REASON_GETTERS if getattr(nvml, n, None) is not None), None)
        )
        sm, mem = getattr(nvml, "NVML_CLOCK_SM", 1), getattr(nvml, "NVML_CLOCK_MEM", 2)
        temperature = getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
        row = {
            "t": self._clock(),
            "sm_clock_mhz": self._ask("nvmlDeviceGetClockInfo", sm),
            "memory_clock_mhz": self._ask("nvmlDeviceGetClockInfo", mem),
            "power_watts": None if power is None else power / 1000,
            "temperature_c": self._ask("nvmlDeviceGetTemperature", temperature),
            "reasons": None if reasons is None else int(reasons),
        }
        if self._state == "started":  # a call that returns after stop() is not kept
            self.samples.append(row)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval_seconds):
                self.sample()
        except BaseException as exc:  # recorded, never raised into the pass
            self._note(f"sampler thread died: {type(exc).__name__}: {exc}")

    def _energy(self) -> tuple[int, Any]:
        return self._clock(), self._ask("nvmlDeviceGetTotalEnergyConsumption")

    def start(self) -> None:
        """Start the thread, then read the energy counter."""
        if not self.observable or self._state != "new":
            return
        self._state = "started"
        try:
            self._thread = threading.Thread(target=self._run, name="gpubench-clocks", daemon=True)
            self._thread.start()
        except Exception as exc:  # e.g. a container's pids limit: the pass runs unsampled
            self._thread = None
            self.failure = f"sampler thread not started: {type(exc).__name__}: {exc}"
        self.energy_start = self._energy()

    def stop(self, span: tuple[int, int] | None = None) -> None:
        """Read the energy counter, stop the thread (waiting at most ``join_seconds``);
        ``span``: the stopwatch's (start, stop). A second call changes nothing."""
        if not self.observable or self._state != "started":
            return
        self.energy_end = self._energy()
        self.span = span
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(self.join_seconds)
            if thread.is_alive():
                self._note(
                    f"sampler thread still inside an NVML call {self.join_seconds} s after the "
                    "pass: left behind"
                )
        self._state = "stopped"

    def summary(self) -> dict[str, Any]:
        """The ``gpu_telemetry`` record of the span."""
        if not self.observable:
            why = self.reason or "NVML cannot be asked for this device"
            return {"observable": False, "reason": why, "flags": []}
        sm = getattr(self.nvml, "NVML_CLOCK_SM", 1)
        limit = self._ask("nvmlDeviceGetEnforcedPowerLimit")
        return summarise(
            self.samples,
            span=self.span,
            energy=(self.energy_start, self.energy_end),
            failure=self.failure,
            power_limit_watts=None if limit is None else limit / 1000,
            max_sm_clock_mhz=self._ask("nvmlDeviceGetMaxClockInfo", sm),
            interval_seconds=self.interval_seconds,
            errors=self.errors,
        )


def check_energy(
    start: tuple[int, Any] | None,
    end: tuple[int, Any] | None,
    powers_watts: Sequence[float],
    power_limit_watts: float | None = None,
    failure: str | None = None,
) -> tuple[Any, float | None, str | None]:
    """(joules or "not observable", window seconds, reason): the counter's difference between two
    ``(clock ns, mJ)`` reads, kept if monotonic and within ENERGY_BOUNDS (``failure``: no read)."""
    if not start or not end or not all(isinstance(r[1], int) for r in (start, end)):
        return NOT_OBSERVABLE, None, f"the energy counter was not read: {failure or 'no answer'}"
    joules, seconds = (end[1] - start[1]) / 1000, (end[0] - start[0]) / 1e9
    powers = list(powers_watts) or [power_limit_watts or 0]
    low, high = (k * f(powers) * seconds for k, f in zip(ENERGY_BOUNDS, (min, max), strict=True))
    reason = None
    if joules < 0:
        reason = f"the energy counter went backwards ({start[1]} -> {end[1]} mJ: reset or wrap)"
    elif high <= 0:
        reason = "no power reading or power limit to check it against"
    elif not low <= joules <= high:
        reason = (
            f"the counter says {joules:.3f} J over {seconds:.4f} s, outside the "
            f"{low:.3f}-{high:.3f} J that the power sampled allows"
        )
    return (NOT_OBSERVABLE if reason else joules), seconds, reason


def _median(numbers: list[float]) -> float:
    """``statistics.median`` without importing ``decimal`` (74 ms in every measuring kernel)."""
    ordered = sorted(numbers)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _stats(values: list[Any]) -> dict[str, Any] | str:
    numbers = [v for v in values if isinstance(v, (int, float))]
    if not numbers:
        return NOT_OBSERVABLE
    return {"min": min(numbers), "median": _median(numbers), "max": max(numbers)}


def summarise(
    samples: list[dict[str, Any]],
    *,
    span: tuple[int, int] | None = None,
    energy: tuple[Any, Any] = (None, None),
    power_limit_watts: float | None = None,
    max_sm_clock_mhz: Any = None,
    interval_seconds: float | None = None,
    errors: Sequence[str] = (),
    failure: str | None = None,
) -> dict[str, Any]:
    """The summary of the samples inside ``span`` (all without one); none there: no flag, and
    a span longer than the interval with none is the sampler's ``failure``, never the pass's."""
    kept = [s for s in samples if span is None or span[0] <= s.get("t", span[0]) <= span[1]]
    seconds = (span[1] - span[0]) / 1e9 if span else 0
    if not kept and interval_seconds and seconds >= interval_seconds and not failure:
        failure = f"no sample in a {seconds:.3f} s span: the sampler thread took none"
    masks = [s["reasons"] for s in kept if isinstance(s.get("reasons"), int)]
    seen = sorted({name for mask in masks for name in reason_names(mask)})
    sm = _stats([s.get("sm_clock_mhz") for s in kept])
    powers = [s["power_watts"] for s in samples if isinstance(s.get("power_watts"), float)]
    read_error = next((e for e in errors if e.startswith("nvmlDeviceGetTotalEnergy")), None)
    joules, window, why = check_energy(*energy, powers, power_limit_watts, failure or read_error)
    throttled = [name for name in seen if name not in BENIGN]
    low = (
        isinstance(sm, dict)
        and isinstance(max_sm_clock_mhz, (int, float))
        and max_sm_clock_mhz > 0
        and sm["median"] < LOW_CLOCK_FRACTION * max_sm_clock_mhz
    )
    flags = []
    if throttled:
        flags.append(f"throttled: clock-event reasons {'+'.join(throttled)} during the pass")
    if low:
        flags.append(
            f"low clock: median SM clock {sm['median']:.0f} MHz is below "
            f"{LOW_CLOCK_FRACTION:.0%} of the maximum {max_sm_clock_mhz} MHz"
        )
    return {
        "observable": True,
        "samples": len(kept),
        "samples_outside_span": len(samples) - len(kept),
        "interval_seconds": interval_seconds,
        "sm_clock_mhz": sm,
        "memory_clock_mhz": _stats([s.get("memory_clock_mhz") for s in kept]),
        "power_watts": _stats([s.get("power_watts") for s in kept]),
        "temperature_c": _stats([s.get("temperature_c") for s in kept]),
        "max_sm_clock_mhz": max_sm_clock_mhz if max_sm_clock_mhz is not None else NOT_OBSERVABLE,
        "clock_event_reasons": seen if masks else NOT_OBSERVABLE,
        "energy_joules": joules,
        "energy_window_seconds": window,
        "energy_reason": why,
        "errors": list(errors),
        "failure": failure,  # the sampler failed: clocks and energy unknown, no fact of the pass
        "throttled": bool(throttled),
        "low_clock": bool(low),
        "flags": flags,
    }


def telemetry_text(record: dict[str, Any] | None) -> str:
    """The `notes` form of a ``gpu_telemetry`` record (R2.5)."""
    if not record:
        return ""
    if not record.get("observable"):
        return f"gpu clocks during the pass: {NOT_OBSERVABLE} ({record.get('reason')})"
    energy = record.get("energy_joules")
    energy_text = (
        f"{energy:.3f} J (counter read {record.get('energy_window_seconds', 0):.4f} s apart)"
        if isinstance(energy, (int, float))
        else f"{NOT_OBSERVABLE} ({record.get('energy_reason')})"
    )
    sm, reasons = record.get("sm_clock_mhz"), record.get("clock_event_reasons")
    if record.get("failure"):
        text = f"gpu during the pass: not sampled (the sampler failed: {record['failure']})"
    elif not record.get("samples"):
        text = (
            f"gpu during the pass: 0 samples in the span (the pass was shorter than the "
            f"{record.get('interval_seconds')} s sampling interval: clocks not sampled, no flag)"
        )
    else:
        sm_text = NOT_OBSERVABLE
        if isinstance(sm, dict):
            sm_text = f"min/median {sm['min']:.0f}/{sm['median']:.0f} MHz"
        seen = ("+".join(reasons) or "none") if isinstance(reasons, list) else NOT_OBSERVABLE
        text = (
            f"gpu during the pass ({record.get('samples')} samples in the span): SM clock "
            f"{sm_text} (max {record.get('max_sm_clock_mhz')}), clock-event reasons {seen}"
        )
    text += f", energy {energy_text}"
    if record.get("errors"):
        text += "; telemetry errors: " + "; ".join(record["errors"])
    if record.get("flags"):
        text += "; FLAG " + "; FLAG ".join(record["flags"])
    return text


def sampler_for(device: Any) -> ClockSampler:
    """A sampler for torch ``device`` (matched by UUID, a MIG slice read on its parent GPU);
    on CPU one that records nothing; without NVML one that says why."""
    if getattr(device, "type", "cpu") != "cuda":
        return ClockSampler(None, None)
    nvml = load_nvml()
    if nvml is None:
        reason = f"NVML cannot be loaded on {device} ({'; '.join(LOAD_ERROR) or 'no error'})"
        return ClockSampler(None, None, reason=reason)
    handle = handle_for(nvml, device.index if device.index is not None else 0)
    if handle is None:
        reason = f"no NVML device matches {device} by UUID"
        return ClockSampler(None, None, reason=reason)
    return ClockSampler(nvml, parent_gpu(nvml, handle))

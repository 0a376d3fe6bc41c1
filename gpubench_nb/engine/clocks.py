"""GPU clocks, power, temperature, clock-event reasons and energy during a timed pass.

``environment.json``'s clocks are an idle snapshot; what a pass ran at is only known by
sampling while it runs. A ``ClockSampler`` polls NVML on its own thread, started just before
the stopwatch and stopped just after it, so the timed code path never calls it (R3.1): the
pass only shares the CPU with a thread that sleeps between NVML queries. The energy counter
(``nvmlDeviceGetTotalEnergyConsumption``, mJ since the driver loaded, Volta and later) is read
before and after the pass where the GPU supports it: energy per corpus in joules, beside time.
Without NVML every figure is ``"not observable"``, never a guess.

run.json key ``gpu_telemetry`` (``summarise``): ``observable``, ``samples``,
``interval_seconds``, ``sm_clock_mhz`` / ``memory_clock_mhz`` / ``power_watts`` /
``temperature_c`` as ``{"min", "median", "max"}``, ``max_sm_clock_mhz``,
``clock_event_reasons`` (names seen in any sample), ``energy_joules``, ``throttled`` (a
reason other than idle / application-clock setting was seen), ``low_clock`` (median SM clock
below ``LOW_CLOCK_FRACTION`` of the maximum) and ``flags`` (sentences for notes and report).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

NOT_OBSERVABLE = "not observable"
DEFAULT_INTERVAL_SECONDS = 0.02
LOW_CLOCK_FRACTION = 0.85
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
# Reasons that do not mean the GPU was held back while it worked.
BENIGN = frozenset({"gpu_idle", "applications_clocks_setting", "display_clock_setting"})


def reason_names(mask: int) -> list[str]:
    """Names of the reason bits set in ``mask`` (unknown bits as ``bit_0x...``)."""
    names = [name for bit, name in REASONS.items() if mask & bit]
    unknown = mask & ~sum(REASONS)
    if unknown:
        names.append(f"bit_{unknown:#x}")
    return names


def _reasons_getter(nvml: Any) -> Callable[[Any], int] | None:
    for name in (
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
    ):
        getter = getattr(nvml, name, None)
        if getter is not None:
            return getter
    return None


class ClockSampler:
    """Samples one GPU's clocks, power, temperature and reasons on a side thread.

    ``nvml`` is the initialised pynvml module (or a fake) and ``handle`` the GPU's handle; with
    either None nothing is sampled and ``summary()`` says not observable. Use as a context
    manager around the timed span, or ``start()`` / ``stop()``.
    """

    def __init__(
        self,
        nvml: Any | None,
        handle: Any | None,
        *,
        interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.nvml, self.handle = nvml, handle
        self.interval_seconds = interval_seconds
        self._clock = clock
        self.samples: list[dict[str, Any]] = []
        self.energy_start_mj: int | None = None
        self.energy_end_mj: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []

    @property
    def observable(self) -> bool:
        return self.nvml is not None and self.handle is not None

    def _energy(self) -> int | None:
        try:
            value = self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)
        except Exception:  # pre-Volta, a MIG slice, or a fake without it
            return None
        return value if isinstance(value, int) else None

    def sample(self) -> None:
        """One reading of every figure (a failed query is None in that sample)."""
        nvml, handle = self.nvml, self.handle

        def ask(getter: str, *args: Any) -> Any:
            try:
                return getattr(nvml, getter)(handle, *args)
            except Exception as exc:
                if len(self.errors) < 5:
                    self.errors.append(f"{getter}: {type(exc).__name__}")
                return None

        sm = getattr(nvml, "NVML_CLOCK_SM", 1)
        mem = getattr(nvml, "NVML_CLOCK_MEM", 2)
        getter = _reasons_getter(nvml)
        reasons = None
        if getter is not None:
            try:
                reasons = int(getter(handle))
            except Exception:
                reasons = None
        power = ask("nvmlDeviceGetPowerUsage")
        self.samples.append(
            {
                "t": self._clock(),
                "sm_clock_mhz": ask("nvmlDeviceGetClockInfo", sm),
                "memory_clock_mhz": ask("nvmlDeviceGetClockInfo", mem),
                "power_watts": None if power is None else power / 1000,
                "temperature_c": ask(
                    "nvmlDeviceGetTemperature", getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
                ),
                "reasons": reasons,
            }
        )

    def _run(self) -> None:
        while not self._stop.wait(self.interval_seconds):
            self.sample()

    def start(self) -> None:
        """Read the energy counter and a first sample, then start the thread (before the timer)."""
        if not self.observable:
            return
        self.energy_start_mj = self._energy()
        self.sample()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="gpubench-clocks", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread, take a last sample, read the energy counter (after the timer).
        A second call (a failure after the timer stopped) changes nothing."""
        if not self.observable or self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self.sample()
        self.energy_end_mj = self._energy()

    def __enter__(self) -> ClockSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def summary(self, max_sm_clock_mhz: Any = None) -> dict[str, Any]:
        """The ``gpu_telemetry`` record of the span (see the module docstring)."""
        return summarise(
            self.samples,
            observable=self.observable,
            energy_start_mj=self.energy_start_mj,
            energy_end_mj=self.energy_end_mj,
            max_sm_clock_mhz=max_sm_clock_mhz if max_sm_clock_mhz is not None else self._max_sm(),
            interval_seconds=self.interval_seconds,
        )

    def _max_sm(self) -> Any:
        if not self.observable:
            return None
        try:
            return self.nvml.nvmlDeviceGetMaxClockInfo(
                self.handle, getattr(self.nvml, "NVML_CLOCK_SM", 1)
            )
        except Exception:
            return None


def _median(numbers: list[float]) -> float:
    """``statistics.median``, without importing it: in a process that has loaded torch, the
    ``decimal`` extension that ``statistics`` pulls in took 74 ms to load on 2 cores, paid by
    every measuring kernel."""
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
    observable: bool,
    energy_start_mj: int | None = None,
    energy_end_mj: int | None = None,
    max_sm_clock_mhz: Any = None,
    interval_seconds: float | None = None,
) -> dict[str, Any]:
    """The pure summary of samples: min/median/max, reasons seen, energy, flags."""
    if not observable:
        return {"observable": False, "reason": "NVML cannot be asked for this device", "flags": []}
    masks = [s["reasons"] for s in samples if isinstance(s.get("reasons"), int)]
    seen = sorted({name for mask in masks for name in reason_names(mask)})
    sm = _stats([s.get("sm_clock_mhz") for s in samples])
    energy: Any = NOT_OBSERVABLE
    if isinstance(energy_start_mj, int) and isinstance(energy_end_mj, int):
        energy = (energy_end_mj - energy_start_mj) / 1000
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
        "samples": len(samples),
        "interval_seconds": interval_seconds,
        "sm_clock_mhz": sm,
        "memory_clock_mhz": _stats([s.get("memory_clock_mhz") for s in samples]),
        "power_watts": _stats([s.get("power_watts") for s in samples]),
        "temperature_c": _stats([s.get("temperature_c") for s in samples]),
        "max_sm_clock_mhz": max_sm_clock_mhz if max_sm_clock_mhz is not None else NOT_OBSERVABLE,
        "clock_event_reasons": seen if masks else NOT_OBSERVABLE,
        "energy_joules": energy,
        "throttled": bool(throttled),
        "low_clock": bool(low),
        "flags": flags,
    }


def telemetry_text(record: dict[str, Any] | None) -> str:
    """The `notes` form of a ``gpu_telemetry`` record (R2.5)."""
    if not record:
        return ""
    if not record.get("observable"):
        return f"gpu clocks during the pass: {NOT_OBSERVABLE}"
    sm = record.get("sm_clock_mhz")
    sm_text = (
        f"SM clock min/median {sm['min']:.0f}/{sm['median']:.0f} MHz"
        if isinstance(sm, dict)
        else f"SM clock {NOT_OBSERVABLE}"
    )
    reasons = record.get("clock_event_reasons")
    reasons_text = (
        "+".join(reasons)
        if isinstance(reasons, list) and reasons
        else ("none" if isinstance(reasons, list) else NOT_OBSERVABLE)
    )
    energy = record.get("energy_joules")
    energy_text = f"{energy:.3f} J" if isinstance(energy, (int, float)) else NOT_OBSERVABLE
    text = (
        f"gpu during the pass ({record.get('samples')} samples): {sm_text} (max "
        f"{record.get('max_sm_clock_mhz')}), clock-event reasons {reasons_text}, energy "
        f"{energy_text}"
    )
    if record.get("flags"):
        text += "; FLAG " + "; FLAG ".join(record["flags"])
    return text


def sampler_for(device: Any, **kwargs: Any) -> ClockSampler:
    """A sampler for torch ``device`` (NVML matched by UUID, ``engine.nvml``); on CPU, or
    where NVML cannot be asked, one that records ``not observable``."""
    from gpubench_nb.engine.nvml import handle_for, load_nvml

    if getattr(device, "type", "cpu") != "cuda":
        return ClockSampler(None, None, **kwargs)
    nvml = load_nvml()
    index = device.index if device.index is not None else 0
    handle = None if nvml is None else handle_for(nvml, index)
    if handle is not None:
        try:
            if nvml.nvmlDeviceIsMigDeviceHandle(handle):
                handle = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
        except Exception:
            pass
    return ClockSampler(nvml, handle, **kwargs)

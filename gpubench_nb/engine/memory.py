"""GPU memory readings in the fixed R3.8 order, and the companion MLP demo (R3.3, R3.9)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

MEMORY_FIELDS = (
    "baseline_allocated_bytes",
    "baseline_reserved_bytes",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
)


@dataclass(frozen=True)
class MemoryReading:
    """The four R3.8 readings of one phase, in bytes; ``None`` = not recorded (R4.3), never 0.
    No total: allocated is inside reserved, and the two peaks may differ in time (R3.9)."""

    baseline_allocated_bytes: int | None = None
    baseline_reserved_bytes: int | None = None
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None

    def to_dict(self) -> dict[str, int | None]:
        return asdict(self)

    def problems(self) -> list[str]:
        """Plausibility checks on the readings (empty when fine or not recorded)."""
        out = []
        for alloc, res in (MEMORY_FIELDS[:2], MEMORY_FIELDS[2:]):
            a, r = getattr(self, alloc), getattr(self, res)
            if a is not None and r is not None and a > r:
                out.append(f"R3.9: {alloc}={a} exceeds {res}={r}; allocated must be <= reserved")
        return out


NOT_RECORDED = MemoryReading()


class MemoryProbe:
    """PyTorch caching-allocator readings of one CUDA/ROCm device in the R3.8 order (synchronise,
    baselines, reset peaks; synchronise, peaks); nothing outside it (R3.9)."""

    def __init__(self, device: Any, api: Any = None) -> None:
        """``api``: ``torch.cuda``, or a fake with its memory functions (tests)."""
        if api is None:
            import torch

            api = torch.cuda
        self.device = device
        self._api = api
        self._baseline: tuple[int, int] | None = None

    def begin(self) -> None:
        api, dev = self._api, self.device
        api.synchronize(dev)
        self._baseline = (int(api.memory_allocated(dev)), int(api.memory_reserved(dev)))
        api.reset_peak_memory_stats(dev)

    def end(self) -> MemoryReading:
        if self._baseline is None:
            raise RuntimeError("MemoryProbe.end() called before begin()")
        api, dev = self._api, self.device
        api.synchronize(dev)
        peak_alloc = int(api.max_memory_allocated(dev))
        peak_res = int(api.max_memory_reserved(dev))
        return MemoryReading(*self._baseline, peak_alloc, peak_res)

    def partial(self) -> MemoryReading:
        """Readings taken so far, for a pass that failed before ``end`` could run (R5.8)."""
        if self._baseline is None:
            return NOT_RECORDED
        return MemoryReading(*self._baseline)


class NullProbe:
    """CPU stand-in: torch's memory counters are CUDA-only, so every reading is ``None``."""

    def begin(self) -> None:
        return None

    def end(self) -> MemoryReading:
        return NOT_RECORDED

    def partial(self) -> MemoryReading:
        return NOT_RECORDED


def readings_so_far(probe: Any) -> MemoryReading:
    """The readings up to a failure (R5.8): all of them where the device still answers, the
    baselines where it does not, none where the span never began."""
    if probe is None:
        return NOT_RECORDED
    try:
        return probe.end()
    except Exception:  # begin() never ran, or the device is unusable after the fault
        return probe.partial()  # the stored baselines: asks nothing of the device


def failure_text(exc: BaseException) -> str:
    """A failure in one line, for run.json's ``error``: its type and message (500 chars)."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}"


def is_out_of_memory(exc: BaseException) -> bool:
    """The device ran out of memory: a failed observation, never a time of 0 (R5.8)."""
    import torch

    return isinstance(exc, torch.cuda.OutOfMemoryError)


def probe_for(device: Any) -> MemoryProbe | NullProbe:
    """The probe that can actually measure ``device`` (CUDA and ROCm both appear as ``cuda``)."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        return MemoryProbe(device)
    return NullProbe()


def memory_mlp_demo(device: str = "auto", *, width: int = 1024, batch: int = 256, seed: int = 0):
    """A small synthetic MLP's memory after each step, in the R3.8 order, as a DataFrame; times
    nothing (R3.3). On CPU the readings are ``None``."""
    import pandas as pd
    import torch

    from gpubench_nb.engine.backends.base import resolve_device

    dev = resolve_device(device)
    api = torch.cuda if dev.type == "cuda" else None
    rows: list[dict[str, Any]] = []
    # the torch.cuda functions read, each in a column without "memory_": max_allocated_bytes ...
    readers = ("memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved")

    def read(step: str, explanation: str, sync: bool = True) -> None:
        if api is not None and sync:
            api.synchronize(dev)
        row: dict[str, Any] = {"step": step, "device": str(dev), "explanation": explanation}
        for reader in readers:
            column = reader.replace("memory_", "") + "_bytes"
            row[column] = None if api is None else int(getattr(api, reader)(dev))
        rows.append(row)

    torch.manual_seed(seed)
    read("1 synchronise, read baselines", "queued work finished; what is held before we start")
    if api is not None:
        api.reset_peak_memory_stats(dev)
    read("2 reset peak statistics", "max_* restart from the current values", sync=False)
    mlp = torch.nn.Sequential(
        torch.nn.Linear(width, 4 * width),
        torch.nn.GELU(),
        torch.nn.Linear(4 * width, width),
    ).to(dev)
    weight_bytes = sum(p.numel() * p.element_size() for p in mlp.parameters())
    read("3 weights on device", f"parameters hold {weight_bytes} bytes", sync=False)
    with torch.inference_mode():
        x = torch.randn(batch, width, device=dev)
        y = mlp(x)
        read("4 forward pass", "input, hidden activation and output are live")
        del x, y
    read(
        "5 free activations",
        "allocated falls; reserved stays: the caching allocator keeps the blocks for reuse",
    )
    with torch.inference_mode():
        small = mlp(torch.randn(batch // 4, width, device=dev))
        del small
    read("6 smaller forward, synchronise, read peaks", "the peaks are those of step 4")
    del mlp
    if api is not None:
        api.empty_cache()
    read("7 free weights, empty_cache", "reserved returns to the driver; peaks are unchanged")
    frame = pd.DataFrame(rows)
    frame.attrs["weight_bytes"] = weight_bytes
    return frame

"""What NVML says of the GPUs a run used (R2.4, R2.5), else ``"not observable"``; matched by UUID,
as CUDA_VISIBLE_DEVICES renumbers torch's devices, not NVML's."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from typing import Any

NOT_OBSERVABLE = "not observable"  # the engine's word for a figure it cannot read
_PROCESS_GETTERS = ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses")
LOAD_ERROR: list[str] = []  # why the last load_nvml() found none, said where that matters


def load_nvml() -> Any | None:
    """The initialised ``pynvml`` module, or None (no NVIDIA driver, ROCm, CPU machine)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception as exc:
        LOAD_ERROR[:] = [f"{type(exc).__name__}: {exc}"[:160]]
        return None


def decoded(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _ask(getter: Any, *args: Any) -> Any:
    try:
        return getter(*args)
    except Exception:
        return NOT_OBSERVABLE


def torch_uuid(index: int, torch_cuda: Any = None) -> str:
    """The UUID torch reports for its CUDA device ``index``, or "" (no device, no UUID)."""
    if torch_cuda is None:
        import torch

        torch_cuda = torch.cuda
    try:
        uuid = str(torch_cuda.get_device_properties(index).uuid or "")
    except Exception:
        return ""
    return "" if uuid == "None" else uuid


def handle_for(nvml: Any, index: int, torch_cuda: Any = None, environ: Any = None) -> Any | None:
    """The NVML handle of torch's CUDA device ``index``, matched by UUID (``GPU-``/``MIG-``);
    by index only without a UUID and with no MIG device visible; else None, never GPU 0."""
    env = os.environ if environ is None else environ
    uuid = torch_uuid(index, torch_cuda)
    if uuid:
        bare = uuid.removeprefix("GPU-").removeprefix("MIG-")
        for candidate in dict.fromkeys((uuid, f"GPU-{bare}", f"MIG-{bare}")):
            with contextlib.suppress(Exception):
                return nvml.nvmlDeviceGetHandleByUUID(candidate)
        return None  # torch knows the device's UUID and NVML does not: do not guess
    visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if any(v.startswith("MIG-") for v in visible) or _mig_enabled_anywhere(nvml):
        return None
    try:
        physical = int(visible[index]) if visible and visible[index].isdigit() else index
        return nvml.nvmlDeviceGetHandleByIndex(physical)
    except Exception:
        return None


def _mig_enabled_anywhere(nvml: Any) -> bool:
    try:
        count = nvml.nvmlDeviceGetCount()
        return any(
            nvml.nvmlDeviceGetMigMode(nvml.nvmlDeviceGetHandleByIndex(i))[0] for i in range(count)
        )
    except Exception:
        return False


def parent_gpu(nvml: Any, handle: Any) -> Any:
    """The physical GPU of a MIG slice (clocks, power and ECC live there); else ``handle``."""
    with contextlib.suppress(Exception):
        if nvml.nvmlDeviceIsMigDeviceHandle(handle):
            return nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
    return handle


def form_factor(board_name: str) -> str:
    """SXM / PCIe / NVL where the board name says so (NVML has no form-factor query)."""
    upper = board_name.upper()
    for token, label in (("SXM", "SXM"), ("PCIE", "PCIe"), ("NVL", "NVL")):
        if token in upper:
            return label
    if "HBM3" in upper and "H100" in upper:  # e.g. "NVIDIA H100 80GB HBM3" is the SXM5 board
        return "SXM (H100 HBM3 board)"
    return "not stated by NVML"


def cuda_driver_runtime(nvml: Any | None) -> str:
    """The CUDA version the driver supports, e.g. ``cuda 12.8`` (torch's is recorded beside)."""
    value = NOT_OBSERVABLE if nvml is None else _ask(nvml.nvmlSystemGetCudaDriverVersion)
    if not isinstance(value, int):
        return NOT_OBSERVABLE
    return f"cuda {value // 1000}.{(value % 1000) // 10}"


def sku_details(nvml: Any | None, devices: Iterable[Any], torch_cuda: Any = None) -> list[dict]:
    """Per used GPU: board, form factor, power limit, clocks, persistence, MIG, ECC (R2.4)."""
    out = []
    for dev in devices:
        row: dict[str, Any] = {"device": str(dev)}
        handle = None if nvml is None else handle_for(nvml, getattr(dev, "index", dev), torch_cuda)
        if handle is None:
            out.append({**row, "nvml": NOT_OBSERVABLE})
            continue
        gpu = parent_gpu(nvml, handle)
        name = decoded(_ask(nvml.nvmlDeviceGetName, gpu))
        sm, mem = getattr(nvml, "NVML_CLOCK_SM", 1), getattr(nvml, "NVML_CLOCK_MEM", 2)
        row.update(
            board_name=name,
            form_factor=form_factor(name) if name != NOT_OBSERVABLE else NOT_OBSERVABLE,
            board_part_number=decoded(_ask(nvml.nvmlDeviceGetBoardPartNumber, gpu)),
            is_mig_slice=gpu is not handle,
            power_limit_watts=_milli(_ask(nvml.nvmlDeviceGetPowerManagementLimit, gpu)),
            enforced_power_limit_watts=_milli(_ask(nvml.nvmlDeviceGetEnforcedPowerLimit, gpu)),
            sm_clock_mhz=_ask(nvml.nvmlDeviceGetClockInfo, gpu, sm),
            memory_clock_mhz=_ask(nvml.nvmlDeviceGetClockInfo, gpu, mem),
            max_sm_clock_mhz=_ask(nvml.nvmlDeviceGetMaxClockInfo, gpu, sm),
            persistence_mode=_mode(_ask(nvml.nvmlDeviceGetPersistenceMode, gpu)),
            mig_mode=_mode(_ask(nvml.nvmlDeviceGetMigMode, gpu)),
            ecc_mode=_mode(_ask(nvml.nvmlDeviceGetEccMode, gpu)),
        )
        out.append(row)
    return out


def _milli(value: Any) -> Any:
    return round(value / 1000, 1) if isinstance(value, int) else NOT_OBSERVABLE


def _mode(value: Any) -> Any:
    """NVML modes: an int, or a (current, pending) pair; recorded as on/off (+ pending)."""
    if isinstance(value, (list, tuple)) and value:
        current = "on" if value[0] else "off"
        pending = "on" if len(value) > 1 and value[1] else "off"
        return current if len(value) < 2 or pending == current else f"{current} (pending {pending})"
    if isinstance(value, int):
        return "on" if value else "off"
    return NOT_OBSERVABLE


def process_survey(
    nvml: Any | None,
    devices: Iterable[Any],
    *,
    own_pid: int | None = None,
    holds_context: bool = False,
    torch_cuda: Any = None,
) -> dict[str, Any]:
    """The processes NVML sees on the used GPUs, and which are foreign (R2.5). ``holds_context``:
    NVML must list this process; if not, the PIDs are another namespace's (not comparable)."""
    me = os.getpid() if own_pid is None else own_pid
    if nvml is None:
        return _unobservable("NVML is not available (no NVIDIA driver, ROCm or CPU)")
    seen: list[dict[str, Any]] = []
    for dev in devices:
        handle = handle_for(nvml, getattr(dev, "index", dev), torch_cuda)
        if handle is None:
            return _unobservable(f"no NVML handle matches {dev} (UUID unmatched, e.g. MIG)")
        answered = 0
        for getter in _PROCESS_GETTERS:
            try:
                procs = getattr(nvml, getter)(handle)
            except Exception:
                continue
            answered += 1
            for proc in procs:
                used = getattr(proc, "usedGpuMemory", None)
                entry = {
                    "device": str(dev),
                    "pid": int(proc.pid),
                    "used_bytes": int(used) if isinstance(used, int) else None,
                }
                if entry not in seen:
                    seen.append(entry)
        if answered == 0:
            return _unobservable(f"both NVML process queries failed on {dev}")
    if any(p["pid"] == me for p in seen):
        return _survey(seen, [p for p in seen if p["pid"] != me])
    if holds_context:
        if not seen:
            return _unobservable("NVML lists no process, not even this one (it holds a context)")
        reason = (
            f"this process (pid {me}) is not among NVML's PIDs: they belong to another PID "
            "namespace (container), so this run cannot be told from the others"
        )
        return _survey(seen, None, comparable=False, reason=reason)
    return _survey(seen, list(seen))


def _survey(seen: Any, foreign: Any, *, comparable: Any = True, reason: Any = None) -> dict:
    observable = seen is not None
    return {
        "observable": observable,
        "pids_comparable": comparable if observable else None,
        "seen": seen,
        "foreign": foreign,
        "reason": reason,
    }


def _unobservable(reason: str) -> dict[str, Any]:
    return _survey(None, None, reason=reason)


def survey_text(survey: dict[str, Any] | None) -> str:
    """The `notes` form of a process survey."""
    if not survey or not survey.get("observable"):
        return NOT_OBSERVABLE
    if survey.get("foreign") is None:
        return (
            f"not comparable ({len(survey.get('seen') or [])} GPU process(es) seen in another "
            "PID namespace, this run among them)"
        )
    return processes_text(survey["foreign"])


def processes_text(procs: list[dict[str, Any]] | None) -> str:
    """The `notes` form of a list of GPU processes (None: not observable)."""
    if procs is None:
        return NOT_OBSERVABLE
    parts = []
    for p in procs:
        used = "?" if p.get("used_bytes") is None else f"{p['used_bytes']} B"
        parts.append(f"pid {p['pid']} on {p['device']} ({used})")
    return " ".join(parts) or "none"

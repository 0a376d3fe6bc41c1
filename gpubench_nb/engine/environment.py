"""The hardware and software a run used (R2.4) and the machine's activity (R2.5), probed inside
calls; on CPU ``gpu_count`` is 0 and GPU-only fields ``None`` (R4.3). Busy CPU processes compare
/proc's tick counts with the previous reading (first: at import), so nothing sleeps on the run."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import gpubench_nb
from gpubench_nb.engine.allocation import allocation_note, slurm_allocation
from gpubench_nb.engine.numerics import cuda_initialised, numeric_settings, numerics_note
from gpubench_nb.engine.nvml import (
    NOT_OBSERVABLE,
    cuda_driver_runtime,
    decoded,
    load_nvml,
    process_survey,
    sku_details,
    survey_text,
    torch_uuid,
)
from gpubench_nb.protocol.clock import utc_now
from gpubench_nb.protocol.results_schema import ENVIRONMENT_COLUMNS

ROW_FIELDS = ENVIRONMENT_COLUMNS  # the CSV's environment columns (R2.4)
_PACKAGE_ROOT = Path(gpubench_nb.__file__).resolve().parent.parent


MIN_WINDOW_SECONDS = 0.05  # shorter windows give shares too coarse to name a process
NOTABLE_SHARE = 0.10  # 10 % of one core over the window
TOP = 5


def _cpu_ticks(proc: Path) -> dict[int, tuple[str, int, int, int]]:
    """``pid -> (name, utime + stime ticks, parent pid, CPU last run on)``, readable processes."""
    out: dict[int, tuple[str, int, int, int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:  # "pid (comm) state ppid ...": comm may hold spaces and parentheses
            text = (entry / "stat").read_text(encoding="utf-8", errors="replace")
            head, _, rest = text.rpartition(")")
            fields = rest.split()
            ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
            out[int(entry.name)] = (head.partition("(")[2], ticks, int(fields[1]), int(fields[36]))
        except (OSError, IndexError, ValueError):  # ended while we looked, or unreadable
            continue
    return out


def usable_cpus(root: Path = Path("/")) -> tuple[frozenset[int], float]:
    """The CPUs this process may run on (``sched_getaffinity``) and how many it may use: their
    count, capped by its cgroup v2 quota (``cpu.max``) where readable."""
    count: float = len(mine := frozenset(os.sched_getaffinity(0)))
    with contextlib.suppress(OSError, ValueError):
        group = (root / "proc/self/cgroup").read_text(encoding="utf-8").strip().rpartition(":")[2]
        quota, period = (root / f"sys/fs/cgroup/{group.strip('/')}/cpu.max").read_text().split()
        count = min(count, int(quota) / int(period))  # "max" (no quota): a ValueError
    return mine, round(count, 2)


def _line(procs: dict[int, Any], pid: int, seen: tuple[int, ...] = ()) -> tuple[int, ...]:
    """``pid`` and the processes that started it, up the tree."""
    return seen if pid not in procs or pid in seen else _line(procs, procs[pid][2], (*seen, pid))


def load_average() -> list[float] | None:
    """The 1, 5 and 15-minute load averages, or None off Linux."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):  # pragma: no cover - not on Linux
        return None


def load_average_1min() -> float | None:
    return (load_average() or [None])[0]


try:  # the first window's start: this module's import, early in a run's kernel
    _LAST = {"/proc": (_cpu_ticks(Path("/proc")), time.monotonic())}
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
    cpus: Callable[[], tuple[frozenset[int], float]] = usable_cpus,
) -> dict[str, Any]:
    """1-minute load average, the others busy over the window (top 5), the CPUs' worth all others
    took on this process's CPUs; the window runs since the previous reading, or is slept here."""
    proc = Path(proc)
    me = os.getpid() if own_pid is None else own_pid
    hz = ticks_per_second or os.sysconf("SC_CLK_TCK")
    mine, usable = cpus()
    record: dict[str, Any] = {
        "load_average_1min": load_average(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "window_seconds": window_seconds,
        "busy_processes": NOT_OBSERVABLE,
    }
    try:
        if window_seconds is not None:
            before, started = _cpu_ticks(proc), clock()
            sleep(window_seconds)
        else:
            previous = _LAST.get(str(proc))
            before, started = previous if previous is not None else ({}, clock())
        after, now = _cpu_ticks(proc), clock()
    except OSError:
        return record
    _LAST[str(proc)] = (after, now)
    elapsed = now - started
    record["window_seconds"] = round(elapsed, 3)
    if elapsed < MIN_WINDOW_SECONDS:
        return record
    # the tool's own load is never counted: this process, what started it, what it started
    own = {me, *_line(after, me), *(pid for pid in after if me in _line(after, pid))}
    busy, others = [], 0.0
    for pid, (name, ticks, _, cpu) in after.items():
        if pid in own:
            continue
        share = (ticks - before.get(pid, (name, 0))[1]) / hz / elapsed  # new: all ticks in it
        others += share if cpu in mine else 0
        if share >= NOTABLE_SHARE:
            busy.append({"pid": pid, "name": name, "cpu_share": round(share, 2)})
    busy.sort(key=lambda p: -p["cpu_share"])
    record.update(busy_processes=busy[:TOP], others_cpu_share=round(others, 2))
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


def devices_used(model: Any) -> list[Any]:
    """The devices of ``model``'s parameters and buffers (a Module, or a Backend's
    ``.module``), R2.4; a device or a list of them as they are, ``None`` as none."""
    import torch

    if isinstance(model, (list, tuple, set)):
        return [torch.device(d) for d in model]
    module = model if isinstance(model, torch.nn.Module) else getattr(model, "module", None)
    if isinstance(module, torch.nn.Module):
        found = {t.device for t in module.parameters()} | {t.device for t in module.buffers()}
        if not found and getattr(model, "device", None) is not None:
            found = {torch.device(model.device)}
        return sorted(found, key=lambda d: (d.type, -1 if d.index is None else d.index))
    if model is None:
        return []
    return [torch.device(model)]


def _gpu_devices(devices: Iterable[Any]) -> list[Any]:
    import torch

    cuda = [d for d in map(torch.device, devices) if d.type == "cuda"]
    indices = {torch.cuda.current_device() if d.index is None else d.index for d in cuda}
    return [torch.device("cuda", i) for i in sorted(indices)]


def runtime_version() -> str | None:
    """The GPU runtime PyTorch was built against: ``cuda 12.4`` / ``hip 6.2``, or ``None``."""
    import torch

    if getattr(torch.version, "hip", None):
        return f"hip {torch.version.hip}"
    if torch.version.cuda:
        return f"cuda {torch.version.cuda}"
    return None


def driver_version() -> str | None:
    """NVIDIA driver via NVML, or the amdgpu kernel module version on ROCm; else ``None``."""
    nvml = load_nvml()
    if nvml is not None:
        with contextlib.suppress(Exception):
            return f"nvidia {decoded(nvml.nvmlSystemGetDriverVersion())}"
    amd = Path("/sys/module/amdgpu/version")
    text = amd.read_text(encoding="utf-8", errors="replace").strip() if amd.is_file() else ""
    return f"amdgpu {text}" if text else None


def gpu_process_survey(devices: Iterable[Any]) -> dict[str, Any] | None:
    """Processes NVML sees on the used GPUs (R2.5, ``nvml.process_survey``); None on CPU."""
    gpus = _gpu_devices(devices)
    if not gpus:
        return None
    return process_survey(load_nvml(), gpus, holds_context=cuda_initialised())


def gpu_uuid(index: int) -> str | None:
    """The UUID (``GPU-…``) of torch's CUDA device ``index``, or None (R2.4, R5.3)."""
    uuid = torch_uuid(index)
    return f"GPU-{uuid.removeprefix('GPU-')}" if uuid else None


def cpu_model() -> str | None:
    with contextlib.suppress(OSError):
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        for line in cpuinfo.splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip() or None
    return platform.processor() or None


def code_revision(root: Path | None = None) -> str:
    """``git:<commit>`` (+ ``-dirty``), else ``package:gpubench-nb==<version>`` (R1.1, R2.5)."""
    root = _PACKAGE_ROOT if root is None else Path(root)
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")  # read-only: status never rewrites the index

    def git(*args: str) -> subprocess.CompletedProcess:
        command = ["git", "-C", str(root), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=30, env=env)

    try:
        commit = git("rev-parse", "--verify", "HEAD")
        if commit.returncode == 0:
            status = git("status", "--porcelain")
            dirty = status.returncode != 0 or bool(status.stdout.strip())
            return f"git:{commit.stdout.strip()}{'-dirty' if dirty else ''}"
    except (OSError, subprocess.SubprocessError):
        pass
    return f"package:gpubench-nb=={gpubench_nb.__version__}"


def capture_environment(device: Any = None, *, used: Any = None) -> dict[str, Any]:
    """What this process runs on (R2.4) and what else runs there (R2.5), now: the GPU fields
    describe the devices ``used`` (else ``device``) sits on, not those merely visible."""
    import torch

    used_devices = devices_used(device if used is None else used)
    gpus = _gpu_devices(used_devices)
    names = [torch.cuda.get_device_name(d) for d in gpus]
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    start = _activity("start", gpus)
    nvml = load_nvml() if gpus else None
    hip = getattr(torch.version, "hip", None)
    driver_cuda = cuda_driver_runtime(nvml) if gpus and not hip else None
    return {
        "captured_utc": utc_now(),
        "gpu_model": " + ".join(sorted(set(names))) if names else None,
        "gpu_count": len(gpus),  # truly zero on CPU (R4.3): see the module docstring
        "gpu_devices": [str(d) for d in gpus],
        "gpu_uuids": [u for u in (gpu_uuid(d.index) for d in gpus) if u],  # used (R2.4)
        "visible_gpu_uuids": [u for u in map(gpu_uuid, range(visible)) if u],
        "device": ",".join(map(str, used_devices)) or None,
        "visible_gpu_count": visible,  # seen, not necessarily used (R2.5)
        "visible_gpu_models": [torch.cuda.get_device_name(i) for i in range(visible)],
        "driver_version": driver_version() if gpus else None,
        "python_version": platform.python_version(),
        "torch_version": torch.__version__,
        "runtime_version": runtime_version() if gpus else None,
        "runtime_built": runtime_version(),
        "code_revision": code_revision(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "hostname": platform.node(),
        "platform": platform.platform(),
        "python_executable": sys.executable,
        "pid": os.getpid(),
        "slurm": slurm_allocation(),  # job, partition, nodes, CPUs/GPUs allocated (R2.4)
        "cuda_runtime_torch": torch.version.cuda,  # beside the driver's (R2.4)
        # R2.4 beyond the row on a GPU: the driver's CUDA runtime and the SKU details
        "cuda_driver_runtime": None if not gpus else NOT_OBSERVABLE if hip else driver_cuda,
        **({"gpu_details": sku_details(nvml, gpus)} if gpus else {}),
        "numerics": numeric_settings(),
        **start,
        **{key.replace("_start", "_end"): None for key in start},
    }


def _activity(when: str, gpus: list[Any]) -> dict[str, Any]:
    """Concurrent activity now (R2.5): GPU processes, load average, busy CPU processes."""
    survey = gpu_process_survey(gpus)
    return {
        f"gpu_processes_{when}": None if survey is None else survey["foreign"],
        f"gpu_process_survey_{when}": survey,
        f"load_average_{when}": load_average(),
        f"cpu_activity_{when}": cpu_activity(),
    }


def finish_environment(env: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``env`` with the end-of-run activity (other GPU processes, load) added."""
    return {**env, **_activity("end", env.get("gpu_devices") or [])}


def environment_notes(env: dict[str, Any]) -> str:
    """The R2.5 part of `notes`: code, CPU, activity at start and end, numeric settings."""

    def load(value: list[float] | None) -> str:
        return "n/a" if value is None else "/".join(f"{x:.2f}" for x in value)

    def activity(when: str) -> list[str]:
        return [
            f"other_gpu_processes_{when}={survey_text(env.get(f'gpu_process_survey_{when}'))}",
            f"load_avg_{when}={load(env.get(f'load_average_{when}'))}",
            f"machine_{when}: {activity_text(env.get(f'cpu_activity_{when}'))}",
        ]

    parts = [
        f"code={env.get('code_revision')}",
        *filter(None, [allocation_note(env.get("slurm"))]),
        f"cpu={env.get('cpu_model')}",
        f"gpus_visible={env.get('visible_gpu_count')}",
        *activity("start"),
    ]
    if env.get("load_average_end") is not None or env.get("gpu_processes_end") is not None:
        parts += activity("end")  # after finish_environment
    if env.get("numerics"):
        parts.append(numerics_note(env["numerics"]))
    if env.get("gpu_devices"):
        parts.append(
            f"cuda driver/torch={env.get('cuda_driver_runtime')}/{env.get('cuda_runtime_torch')}"
        )
        parts.extend(_sku_text(d) for d in env.get("gpu_details") or [])
    return "; ".join(parts)


def _sku_text(details: dict[str, Any]) -> str:
    if details.get("nvml") == NOT_OBSERVABLE:
        return f"{details.get('device')}: SKU details {NOT_OBSERVABLE}"
    return (
        f"{details.get('device')}: {details.get('board_name')} [{details.get('form_factor')}] "
        f"power_limit={details.get('power_limit_watts')} W "
        f"clocks sm/mem={details.get('sm_clock_mhz')}/{details.get('memory_clock_mhz')} MHz "
        f"persistence={details.get('persistence_mode')} mig={details.get('mig_mode')} "
        f"ecc={details.get('ecc_mode')}"
    )


def record_environment(experiment: str | Path, bundle_dir: str | Path) -> dict[str, Any]:
    """00_environment: the machine as observed (R2.4, R2.5) into environment.json, only for
    the frozen declaration (R1.3)."""
    from gpubench_nb.engine.backends import resolve_device
    from gpubench_nb.kernel import ENVIRONMENT_STEP
    from gpubench_nb.protocol.experiment import load_experiment
    from gpubench_nb.protocol.lock import require_frozen
    from gpubench_nb.protocol.records import write_environment
    from gpubench_nb.protocol.writer import bundle_writer

    with bundle_writer(bundle_dir, ENVIRONMENT_STEP, step=True):
        exp = load_experiment(experiment)
        require_frozen(bundle_dir, exp, step=ENVIRONMENT_STEP)
        environment = capture_environment(resolve_device(exp.fixed.get("device", "auto")))
        write_environment(Path(bundle_dir), environment)
        return environment

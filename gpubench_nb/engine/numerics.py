"""Settings that change a measured number but not the declaration (R2.4, R2.5): TF32, reductions,
SDPA, cuDNN, allocator variables; read in a call, else "not observable"."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpubench_nb.engine.nvml import NOT_OBSERVABLE

# Environment variables that change what is computed or what a memory reading means.
ENV_VARS = (
    "NVIDIA_TF32_OVERRIDE",  # 0 disables TF32 in cuBLAS/cuDNN whatever torch says
    "PYTORCH_CUDA_ALLOC_CONF",  # changes what "reserved" means (R3.9)
    "PYTORCH_ALLOC_CONF",
    "PYTORCH_HIP_ALLOC_CONF",
    "CUDA_MODULE_LOADING",  # LAZY loads kernels at first use: part of a cold pass
    "CUBLAS_WORKSPACE_CONFIG",
    "CUDA_LAUNCH_BLOCKING",  # 1 makes every kernel launch synchronous
    "TORCH_CUDNN_V8_API_DISABLED",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
)
SDPA_BACKENDS = ("flash", "mem_efficient", "math", "cudnn")


def _read(getter: Callable[[], Any]) -> Any:
    """``getter()``, or ``"not observable"`` when this torch build cannot answer."""
    try:
        with warnings.catch_warnings():  # some of these flags are deprecated aliases
            warnings.simplefilter("ignore")
            value = getter()
    except Exception:
        return NOT_OBSERVABLE
    return value if isinstance(value, (bool, int, float, str)) or value is None else str(value)


def _libc_getenv(name: str) -> str | None:
    """The C-level variable ``name``: torch sets CUDA_MODULE_LOADING with C ``setenv``, which
    ``os.environ`` never sees."""
    import ctypes

    try:
        getenv = ctypes.CDLL(None).getenv
    except (OSError, AttributeError):
        return os.environ.get(name)
    getenv.restype = ctypes.c_char_p
    getenv.argtypes = (ctypes.c_char_p,)
    value = getenv(name.encode())
    return None if value is None else value.decode(errors="replace")


def _start_environ(path: str = "/proc/self/environ") -> dict[str, str] | None:
    """The environment this process started with (/proc, untouched since), or None."""
    try:
        raw = Path(path).read_bytes()
    except OSError:
        return None
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}


def cuda_initialised(cuda: Any = None) -> bool:
    """Whether this process has initialised CUDA (False where torch cannot say)."""
    if cuda is None:
        import torch

        cuda = torch.cuda
    try:
        return bool(cuda.is_initialized())
    except Exception:
        return False


def module_loading(
    cuda: Any = None,
    *,
    getenv: Callable[[str], str | None] = _libc_getenv,
    environ: Mapping[str, str] | None = None,
    start_environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The effective ``CUDA_MODULE_LOADING`` after CUDA initialisation ("not observable"
    before), its value at process start and who set it (the start, Python, or torch)."""
    env = os.environ if environ is None else environ
    started = start_environ
    if started is None:  # an injected ``environ`` is the whole environment, from the start
        started = _start_environ() if environ is None else environ
    in_python = env.get("CUDA_MODULE_LOADING")
    at_start = (started if isinstance(started, Mapping) else env).get("CUDA_MODULE_LOADING")
    initialised = cuda_initialised(cuda)
    effective = getenv("CUDA_MODULE_LOADING") if initialised else NOT_OBSERVABLE
    if not initialised:
        source = "CUDA not initialised in this process"
    elif effective is None:
        source = "unset after CUDA initialisation: the driver's default (LAZY from CUDA 12.2)"
        effective = NOT_OBSERVABLE
    elif at_start == effective and isinstance(started, Mapping):
        source = "set before the process started"
    elif at_start == effective:
        source = "set before the process started, or from Python before CUDA initialised"
    elif in_python == effective:
        source = "set from Python (os.environ) in this process before CUDA initialised"
    else:
        source = "set by torch when it initialised CUDA"
    return {"effective": effective, "at_start": at_start, "source": source}


def numeric_settings(
    torch: Any = None,
    environ: Mapping[str, str] | None = None,
    *,
    getenv: Callable[[str], str | None] = _libc_getenv,
) -> dict:
    """What changes a number in this process, JSON-able (R2.4); call after CUDA initialises."""
    if torch is None:
        import torch
    env = os.environ if environ is None else environ
    cuda, cudnn = torch.backends.cuda, torch.backends.cudnn
    sdpa = {
        name: _read(lambda n=name: getattr(cuda, f"{n}_sdp_enabled")()) for name in SDPA_BACKENDS
    }
    return {
        "float32_matmul_precision": _read(torch.get_float32_matmul_precision),
        "cuda_matmul_allow_tf32": _read(lambda: cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": _read(lambda: cudnn.allow_tf32),
        "cuda_matmul_fp16_reduced_precision_reduction": _read(
            lambda: cuda.matmul.allow_fp16_reduced_precision_reduction
        ),
        "cuda_matmul_bf16_reduced_precision_reduction": _read(
            lambda: cuda.matmul.allow_bf16_reduced_precision_reduction
        ),
        "sdpa_backends_enabled": sdpa,
        "cudnn_version": _read(lambda: cudnn.version()),
        "cudnn_benchmark": _read(lambda: cudnn.benchmark),
        "deterministic_algorithms": _read(torch.are_deterministic_algorithms_enabled),
        "cpu_threads": _read(torch.get_num_threads),
        "environment": {name: env.get(name) for name in ENV_VARS},  # None = unset at start
        "cuda_module_loading": module_loading(
            getattr(torch, "cuda", object()), getenv=getenv, environ=env
        ),
    }


def _flag(value: Any) -> str:
    return "on" if value is True else "off" if value is False else str(value)


def numerics_note(settings: Mapping[str, Any]) -> str:
    """One `notes` item: every setting that changes a number, unset ones included (R2.5)."""
    sdpa = settings.get("sdpa_backends_enabled") or {}
    enabled = [name for name, on in sdpa.items() if on is True]
    unknown = [name for name, on in sdpa.items() if on not in (True, False)]
    sdpa_text = "+".join(enabled) or "none"
    if unknown:
        sdpa_text += f" ({'/'.join(unknown)} {NOT_OBSERVABLE})"
    env = settings.get("environment") or {}
    loading = settings.get("cuda_module_loading") or {}  # the effective mode, after CUDA init
    shown = ("NVIDIA_TF32_OVERRIDE", "PYTORCH_CUDA_ALLOC_CONF", "CUDA_MODULE_LOADING")
    env_text = " ".join(f"{n}={'unset' if env.get(n) is None else env.get(n)}" for n in shown[:2])
    env_text += f" CUDA_MODULE_LOADING={loading.get('effective')} ({loading.get('source')})"
    others = [f"{name}={v}" for name, v in env.items() if v is not None and name not in shown]
    return (
        f"numerics: fp32_matmul={settings.get('float32_matmul_precision')} "
        f"tf32 matmul/cudnn={_flag(settings.get('cuda_matmul_allow_tf32'))}/"
        f"{_flag(settings.get('cudnn_allow_tf32'))} "
        "reduced-precision reductions fp16/bf16="
        f"{_flag(settings.get('cuda_matmul_fp16_reduced_precision_reduction'))}/"
        f"{_flag(settings.get('cuda_matmul_bf16_reduced_precision_reduction'))} "
        f"sdpa={sdpa_text} cudnn={settings.get('cudnn_version')} {env_text}"
        + (f" {' '.join(others)}" if others else "")
        + " (R2.4)"
    )

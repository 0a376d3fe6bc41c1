"""Name what failed when a model meets a device: architecture, precision, device or model file."""

from __future__ import annotations

import re
from typing import Any

from gpubench_nb.errors import BackendError

# Messages of a torch build that has no kernels for this GPU's architecture.
_ARCHITECTURE = re.compile(
    r"no kernel image is available|not compatible with the current PyTorch installation|"
    r"invalid device function|hipErrorNoBinaryForGpu",
    re.IGNORECASE,
)
# Messages of an operator that has no kernel for a dtype ("... not implemented for 'Half'").
_DTYPE = re.compile(
    r"not implemented for '(Half|BFloat16|Float16)'|(Half|BFloat16) .*not (implemented|supported)"
    r"|does not support (half|bfloat16|bf16|fp16)",
    re.IGNORECASE,
)
_DEVICE = re.compile(r"CUDA error|HIP error|CUBLAS_STATUS|CUDNN_STATUS|device-side assert")


def failure_kind(exc: BaseException) -> str:
    """``architecture``, ``precision``, ``device`` or ``other``: what an exception says failed."""
    text = f"{type(exc).__name__}: {exc}"
    if _ARCHITECTURE.search(text):
        return "architecture"
    if _DTYPE.search(text):
        return "precision"
    if _DEVICE.search(text):
        return "device"
    return "other"


def _arch_hint(device: Any) -> str:
    try:
        import torch

        major, minor = torch.cuda.get_device_capability(device)
        return (
            f" (the GPU is sm_{major}{minor}; this torch build has kernels for "
            f"{torch.cuda.get_arch_list()})"
        )
    except Exception:  # the device may be unusable after the failure
        return ""


def as_backend_error(
    exc: BaseException, *, backend: str, device: Any, precision: str, stage: str = "load"
) -> BackendError:
    """A BackendError that says what failed and how to fix it; its rule follows the kind."""
    kind = failure_kind(exc)
    what = f"backend {backend} {stage} on {device} at {precision}"
    hint = _arch_hint(device) if kind == "architecture" else ""
    why = {
        "architecture": f": the installed torch has no kernels for this GPU's architecture"
        f"{hint}; install a torch build for it (R2.4).",
        "precision": f": an operator has no {precision} kernel on this device; declare another "
        "precision (a precision change is its own experiment, R2.2).",
        "device": ": the device reported an error (R3.6).",
    }.get(kind, " failed:")
    message = " ".join(str(exc).split())[:400]
    rule = {"architecture": "R2.4", "precision": "R2.2"}.get(kind, "R3.6")
    return BackendError(f"{what}{why} {type(exc).__name__}: {message}", rule=rule)

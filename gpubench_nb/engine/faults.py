"""Fault injection (env var GPUBENCH_FAULT) so that failed observations (R3.6, R5.8) are testable.

Grammar (whitespace ignored, case-sensitive)::

    GPUBENCH_FAULT = FAULT *( ";" FAULT )
    FAULT  = KIND "@" SITE *( "@" FILTER )
    KIND   = "oom"        raise torch.cuda.OutOfMemoryError (as a real CUDA OOM would)
           | "error"      raise InjectedFault (a RuntimeError)
           | "crash"      os._exit(13): the process dies like a dead kernel
           | "hang"       sleep forever (for dead-kernel / timeout handling)
           | "cudaerror"  launched at SITE, raised at the next device synchronisation
                          (``surface_pending``), at once under CUDA_LAUNCH_BLOCKING=1
           | "delay:" S   sleep 0 < S <= 3600 seconds inside the timed span, not a failure (R3.6)
    SITE   = "batch:" N   just before the N-th batch (1-based, in batch order) is predicted
           | "load"       inside the timed load phase, before the backend loads
    FILTER = "variant:" ID | "phase:" ("cold" | "warm") | "run:" N
           | "pass:" ("measured" | "warmup" | "any")   which pass; default "measured"

A filter matches only when the caller states that field; the plan is resolved before the timer."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpubench_nb.errors import ProtocolError
from gpubench_nb.protocol.records import MEASURED_PHASES

ENV_VAR = "GPUBENCH_FAULT"
KINDS = ("oom", "error", "crash", "hang", "delay", "cudaerror")
MAX_DELAY_SECONDS = 3600.0
PASSES = ("measured", "warmup", "any")
CRASH_EXIT_CODE = 13
_CHOICES = {"phase": [str(p) for p in MEASURED_PHASES], "pass": list(PASSES)}  # filter values


class FaultSpecError(ProtocolError):
    """GPUBENCH_FAULT does not follow the grammar in ``gpubench_nb.engine.faults``."""


class InjectedFault(RuntimeError):
    """The exception raised by an ``error@...`` fault."""


class InjectedDeviceError(RuntimeError):
    """The exception of a ``cudaerror@...`` fault; its text reads as a CUDA error does."""


_PENDING: list[InjectedDeviceError] = []  # launched, not yet surfaced (like the CUDA context)


def surface_pending() -> None:
    """Raise a pending ``cudaerror`` now, at a device synchronisation (sticky, as CUDA's)."""
    if _PENDING:
        raise _PENDING[0]


@dataclass(frozen=True)
class Fault:
    kind: str
    site: str  # "batch" | "load"
    batch: int | None = None
    variant: str | None = None
    phase: str | None = None
    run: int | None = None
    pass_kind: str = "measured"
    spec: str = ""
    seconds: float | None = None  # "delay" only: how long the pass sleeps


def _bad(spec: str, why: str) -> FaultSpecError:
    return FaultSpecError(
        f"{ENV_VAR} entry {spec!r}: {why}; expected KIND@SITE[@FILTER...] such as "
        "'oom@batch:3' or 'crash@load@variant:b4' (grammar in gpubench_nb/engine/faults.py)"
    )


def _positive_int(spec: str, name: str, value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise _bad(spec, f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _kind_and_seconds(spec: str, kind: str) -> tuple[str, float | None]:
    name, sep, value = kind.partition(":")
    if name not in KINDS:
        raise _bad(spec, f"kind {name!r} is not one of {list(KINDS)}")
    if name != "delay":
        if sep:
            raise _bad(spec, f"kind {name!r} takes no value, got {kind!r}")
        return name, None
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (0 < seconds <= MAX_DELAY_SECONDS):  # NaN and inf fail too
        raise _bad(
            spec,
            f"delay needs SECONDS > 0 and <= {MAX_DELAY_SECONDS:g} ('delay:1.5'), got {value!r}",
        )
    return name, seconds


def parse_faults(text: str | None) -> tuple[Fault, ...]:
    """Parse a GPUBENCH_FAULT value; empty or ``None`` means no fault."""
    faults = []
    for raw in (text or "").split(";"):
        spec = "".join(raw.split())
        if not spec:
            continue
        kind, *parts = spec.split("@")
        kind, seconds = _kind_and_seconds(spec, kind)
        if not parts:
            raise _bad(spec, "a SITE ('batch:N' or 'load') is required")
        site, *filters = parts
        fields: dict[str, object] = {"kind": kind, "spec": spec, "seconds": seconds, "site": site}
        if site.startswith("batch:"):
            fields.update(site="batch", batch=_positive_int(spec, "batch", site[len("batch:") :]))
        elif site != "load":
            raise _bad(spec, f"site {site!r} is neither 'batch:N' nor 'load'")
        for item in filters:
            key, sep, value = item.partition(":")
            if not sep or not value:
                raise _bad(spec, f"filter {item!r} is not KEY:VALUE")
            if key == "run":
                value = _positive_int(spec, "run", value)
            elif key in _CHOICES and value not in _CHOICES[key]:
                raise _bad(spec, f"{key} must be one of {_CHOICES[key]}, got {value!r}")
            elif key not in ("variant", *_CHOICES):
                raise _bad(spec, f"unknown filter {key!r} (variant, phase, run, pass)")
            fields["pass_kind" if key == "pass" else key] = value
        faults.append(Fault(**fields))  # type: ignore[arg-type]
    return tuple(faults)


def check_fault_spec(experiment: Any = None, items: int = 0) -> None:
    """Refuse a malformed GPUBENCH_FAULT (exit 2) before the first kernel starts; given the
    ``experiment`` and its corpus' ``items``, a fault that can never fire too."""
    for f in parse_faults(os.environ.get(ENV_VAR)) if experiment is not None else ():
        declared = [v for v in experiment.variants if f.variant in (None, v.id)]
        if not declared:
            raise _bad(f.spec, f"it never fires: no variant {f.variant!r} is declared")
        most = max(-(-items // v.settings.batch) for v in declared)  # batches of a pass
        if (f.batch or 0) > most:
            raise _bad(f.spec, f"it never fires: {items} texts make {most} batches at most")
    parse_faults(os.environ.get(ENV_VAR))


@dataclass(frozen=True)
class FaultPlan:
    """The faults that apply to one run (variant, phase, run index), resolved before timing."""

    faults: tuple[Fault, ...] = ()
    variant: str | None = None
    phase: str | None = None
    run: int | None = None

    @classmethod
    def from_env(
        cls,
        *,
        variant: str | None = None,
        phase: str | None = None,
        run: int | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> FaultPlan:
        env = os.environ if environ is None else environ
        return cls(parse_faults(env.get(ENV_VAR)), variant, phase, run)

    def _matching(self, pass_kind: str | None = None) -> list[Fault]:
        """The faults scoped to this run, in a pass of ``pass_kind`` (None: any pass)."""
        here = {"variant": self.variant, "phase": self.phase, "run": self.run}
        return [
            f
            for f in self.faults
            if all(getattr(f, key) in (None, value) for key, value in here.items())
            and (pass_kind is None or f.pass_kind in ("any", pass_kind))
        ]

    def batch_faults(self, pass_kind: str = "measured") -> dict[int, Fault]:
        """Batch number (1-based) -> fault, for one pass of kind ``measured`` or ``warmup``."""
        return {f.batch: f for f in self._matching(pass_kind) if f.site == "batch" and f.batch}

    def load_fault(self) -> Fault | None:
        return next((f for f in self._matching() if f.site == "load"), None)  # whatever the pass

    def describe(self) -> str:
        """For `notes`: the injected faults scoped to this run (any pass), or ''."""
        specs = [f.spec for f in self._matching()]
        return f"fault injection {ENV_VAR}={';'.join(specs)}" if specs else ""


def trigger(fault: Fault, where: str) -> None:
    """Make ``fault`` happen now (``where``: for the message). Only ``delay`` (after its
    sleep) and a launched ``cudaerror`` return; every other kind raises, exits or hangs."""
    if fault.kind == "delay":
        time.sleep(fault.seconds or 0.0)
        return
    message = f"injected by {ENV_VAR}={fault.spec} at {where}"
    if fault.kind == "oom":
        import torch

        raise torch.cuda.OutOfMemoryError(f"CUDA out of memory ({message})")
    if fault.kind == "error":
        raise InjectedFault(message)
    if fault.kind == "cudaerror":
        error = InjectedDeviceError(f"CUDA error: device-side assert triggered ({message})")
        if os.environ.get("CUDA_LAUNCH_BLOCKING") == "1":
            raise error  # synchronous launches: the error shows at its own batch
        _PENDING.append(error)
        return
    if fault.kind == "crash":
        os._exit(CRASH_EXIT_CODE)
    while True:  # "hang": only an outside timeout or kill ends this
        time.sleep(3600)

"""The notes of run.json: one sentence per fact and event of the run, from the values the
load, the passes, the fault plan and the environment capture returned (R3.2, R3.6, R2.5)."""

from __future__ import annotations

from typing import Any

from gpubench_nb.engine.clocks import telemetry_text
from gpubench_nb.engine.environment import environment_notes
from gpubench_nb.engine.load import LoadOutcome
from gpubench_nb.engine.measure import PassResult
from gpubench_nb.engine.timing import LOAD_SCOPE, scope_note
from gpubench_nb.protocol.records import Phase

# The cold pass's memory peak includes the cuBLAS workspace (32 MiB per stream and handle on
# recent GPUs with CUDA >= 12) that torch allocates at the first matrix product and keeps:
# part of what a fresh process pays, reported with the cold row.
CUBLAS_NOTE = (
    "on CUDA its peak memory includes the cuBLAS workspace (32 MiB on Hopper/Blackwell with "
    "CUDA >= 12) that torch allocates at the first matrix product and keeps for the process"
)


def phase_note(phase: str, warmups: int) -> str:
    """What the phase holds: a fresh process's first pass, or passes after warm-up (R3.2)."""
    if phase == Phase.COLD:
        return f"phase=cold: first pass in a fresh process, no warm-up (R3.2, R3.7); {CUBLAS_NOTE}"
    return f"phase=warm: {warmups} unrecorded warm-up pass(es), then one measured pass (R3.4)"


def run_notes(
    scope: str,
    prompt: Any,
    phase: str,
    warmups: int,
    loaded: LoadOutcome,
    result: PassResult | None,
    faults: str,
    env: dict[str, Any],
) -> str:
    """run.json's notes: scope, phase, the load's and the pass's facts, then the events, the
    injected faults and the environment (R3.1, R3.6, R2.4, R2.5)."""
    telemetry = telemetry_text(result.gpu_telemetry) if result is not None else ""
    lines = [
        scope_note(scope),
        *([prompt.note()] if prompt is not None else []),  # a prompted causal LM (R2.5)
        LOAD_SCOPE,
        phase_note(phase, warmups),
        *loaded.facts,
        *([telemetry] if telemetry else []),
        *loaded.events,
        *(result.events() if result is not None else []),
        *([faults] if faults else []),
        environment_notes(env),
    ]
    return "; ".join(lines)

"""How the model was run, next to what it changed: each optimised variant's speed against the
reference variant and the quality gate's decision on it, in one sentence (R1.3, R5.7)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from gpubench_nb import formats
from gpubench_nb.protocol.experiment_spec import LATER_DEFAULTS
from gpubench_nb.protocol.records import MEASURED_PHASES, Phase
from gpubench_nb.report.stats import Summary


def _speed(time: float | None, base: float | None, reference: str) -> str:
    if not time or not base:
        return "no timed warm run to compare"
    ratio, word = (base / time, "faster") if base >= time else (time / base, "slower")
    return f"{ratio:.2f}× {word} per corpus than {reference} (warm medians)"


def _gate(quality: Mapping[str, Any], value: float | None, base: float | None) -> str:
    """``macro_f1 0.812 < 0.847 − 0.01``: the variant's median against the reference's less the
    tolerance, and the threshold where it is not met (R1.3)."""
    metric, tolerance, threshold = (quality.get(k) for k in ("metric", "tolerance", "threshold"))
    if value is None or base is None or tolerance is None:
        return "quality not recorded"
    sign = "≥" if value >= base - float(tolerance) else "<"
    text = f"{metric} {formats.number(value)} {sign} {formats.number(base)} − {float(tolerance):g}"
    if threshold is not None and value < float(threshold):
        text += f", below the threshold {formats.number(float(threshold))}"
    return text


def optimisation_sentences(bundle: Any, summary: Summary) -> list[str]:
    """One sentence per variant when the knob is how the model is run (compile, attention,
    quantization, threads), read from the report's one summary; empty for other knobs."""
    knob, quality = bundle.declared("knob"), bundle.declared("quality") or {}
    reference = str(quality.get("reference_variant") or "")
    if knob not in LATER_DEFAULTS or not reference:
        return []
    values = {str(v.get("id")): v.get(knob) for v in bundle.declared("variants") or []}

    def facts(variant: str) -> tuple[float | None, float | None, bool | None]:
        """(warm median, median quality over its timed measured runs, accepted)."""
        phases = [summary.of(bundle.label, variant, str(p)) for p in MEASURED_PHASES]
        found = [v for p in phases if p for v in p.values("quality_value")]
        warm = summary.of(bundle.label, variant, str(Phase.WARM))
        verdict = next((p.verdict for p in phases if p and p.acceptance), None)
        return warm.median if warm else None, statistics.median(found) if found else None, verdict

    base_time, base_quality, _ = facts(reference)
    out = []
    for variant, value in values.items():
        if variant == reference:
            continue
        time, measured, accepted = facts(variant)
        verdict = {True: "accepted", False: "refused"}.get(accepted, "acceptance not recorded")
        out.append(
            f"{variant} ({knob}={value}): {_speed(time, base_time, reference)}; "
            f"{verdict}: {_gate(quality, measured, base_quality)} (reference {reference}, R1.3, "
            "R5.7)."
        )
    return out

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
    ratio = base / time
    if ratio >= 1:
        return f"{ratio:.2f}× faster per corpus than {reference} (warm medians)"
    return f"{1 / ratio:.2f}× slower per corpus than {reference} (warm medians)"


def _gate(quality: Mapping[str, Any], value: float | None, base: float | None) -> str:
    """``macro_f1 0.812 < 0.847 − 0.01``: the variant's median against the reference's less the
    tolerance, and the threshold where it is not met (R1.3)."""
    metric, tolerance, threshold = (quality.get(k) for k in ("metric", "tolerance", "threshold"))
    if value is None or base is None or tolerance is None:
        return "quality not recorded"
    floor = base - float(tolerance)
    text = (
        f"{metric} {formats.number(value)} {'≥' if value >= floor else '<'} "
        f"{formats.number(base)} − {float(tolerance):g}"
    )
    if threshold is not None and value < float(threshold):
        text += f", below the threshold {formats.number(float(threshold))}"
    return text


def optimisation_sentences(bundle: Any, summary: Summary) -> list[str]:
    """One sentence per variant of an experiment whose knob is how the model is run (compile,
    attention, quantization, threads): ``q8 (quantization=int8_dynamic): 1.80× faster per
    corpus than q0 (warm medians); refused: macro_f1 0.812 < 0.847 − 0.01``. Empty for other
    knobs. Times and verdicts are the report's one summary (report.stats)."""
    knob = bundle.declared("knob")
    quality = bundle.declared("quality") or {}
    reference = quality.get("reference_variant")
    if knob not in LATER_DEFAULTS or not reference:
        return []
    values = {str(v.get("id")): v.get(knob) for v in bundle.declared("variants") or []}
    phases = {
        variant: [summary.of(bundle.label, variant, str(phase)) for phase in MEASURED_PHASES]
        for variant in values
    }

    def warm_median(variant: str) -> float | None:
        warm = summary.of(bundle.label, variant, str(Phase.WARM))
        return warm.median if warm else None

    def quality_median(variant: str) -> float | None:
        found = [
            float(r["quality_value"])
            for p in phases[variant]
            if p
            for r in p.timed
            if r.get("quality_value") is not None
        ]
        return statistics.median(found) if found else None

    base_time, base_quality = warm_median(str(reference)), quality_median(str(reference))
    out = []
    for variant, value in values.items():
        if variant == str(reference):
            continue
        acceptance = next((p.acceptance for p in phases[variant] if p and p.acceptance), None)
        accepted = acceptance.verdict if acceptance else None
        verdict = {True: "accepted", False: "refused"}.get(accepted, "acceptance not recorded")
        out.append(
            f"{variant} ({knob}={value}): {_speed(warm_median(variant), base_time, reference)}; "
            f"{verdict}: {_gate(quality, quality_median(variant), base_quality)} "
            f"(reference {reference}, R1.3, R5.7)."
        )
    return out

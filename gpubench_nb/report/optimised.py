"""How the model was run, next to what it changed: each optimised variant's speed against the
reference variant and the quality gate's decision on it, in one sentence (R1.3, R5.7)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from gpubench_nb import formats
from gpubench_nb.protocol.experiment_spec import LATER_DEFAULTS
from gpubench_nb.protocol.records import MEASURED_PHASES, Phase


def _median(rows: list[Mapping[str, Any]], key: str, phases: tuple[str, ...]) -> float | None:
    values = [
        float(r[key])
        for r in rows
        if r["phase"] in phases and r.get(key) is not None and not r.get("error")
    ]
    return statistics.median(values) if values else None


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


def optimisation_sentences(bundle: Any) -> list[str]:
    """One sentence per variant of an experiment whose knob is how the model is run (compile,
    attention, quantization, threads): ``q8 (quantization=int8_dynamic): 1.80× faster per
    corpus than q0 (warm medians); refused: macro_f1 0.812 < 0.847 − 0.01``. Empty for other
    knobs. The verdict is the bundle's (economics.json or the one acceptance rule)."""
    knob = bundle.declared("knob")
    quality = bundle.declared("quality") or {}
    reference = quality.get("reference_variant")
    if knob not in LATER_DEFAULTS or not reference:
        return []
    values = {v.get("id"): v.get(knob) for v in bundle.declared("variants") or []}
    rows = {variant: [r for r in bundle.rows if r["variant_id"] == variant] for variant in values}
    verdicts = bundle.verdicts()
    base_time = _median(rows.get(reference, []), "elapsed_seconds", (Phase.WARM,))
    base_quality = _median(rows.get(reference, []), "quality_value", MEASURED_PHASES)
    out = []
    for variant, value in values.items():
        if variant == reference:
            continue
        accepted = verdicts.get(str(variant), (None, None))[0]
        verdict = {True: "accepted", False: "refused"}.get(accepted, "acceptance not recorded")
        time = _median(rows[variant], "elapsed_seconds", (Phase.WARM,))
        value_q = _median(rows[variant], "quality_value", MEASURED_PHASES)
        out.append(
            f"{variant} ({knob}={value}): {_speed(time, base_time, reference)}; {verdict}: "
            f"{_gate(quality, value_q, base_quality)} (reference {reference}, R1.3, R5.7)."
        )
    return out

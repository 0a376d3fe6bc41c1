"""The decision view puts each optimised variant's speed next to the quality gate's decision on
it (R1.3, R5.7): a quantised variant 1.8× faster but below the tolerance reads as refused."""

from __future__ import annotations

from pathlib import Path

from gpubench_nb.protocol.lock import LockRecord
from gpubench_nb.protocol.records import EnvironmentRecord
from gpubench_nb.report.bundles import Bundle, summary_of
from gpubench_nb.report.decision import decision_view_of, optimisation_sentences


def _rows(variant: str, seconds: float, quality: float, accepted: bool) -> list[dict]:
    return [
        {
            "bundle": "b",
            "variant_id": variant,
            "phase": phase,
            "run_index": i,
            "elapsed_seconds": seconds * (1.1 if phase == "cold" else 1.0),
            "quality_value": quality,
            "corpus_accepted": accepted,
            "error": None,
        }
        for phase in ("cold", "warm")
        for i in (1, 2, 3)
    ]


def _bundle(knob: str = "quantization") -> Bundle:
    lock = {
        "declaration": {
            "knob": knob,
            "quality": {
                "metric": "macro_f1",
                "threshold": 0.7,
                "tolerance": 0.01,
                "reference_variant": "q0",
            },
            "variants": [{"id": "q0", knob: "none"}, {"id": "q8", knob: "int8_dynamic"}],
        }
    }
    rows = _rows("q0", 0.9, 0.847, True) + _rows("q8", 0.5, 0.812, False)
    return Bundle(
        path=Path("b"),
        label="b",
        lock=LockRecord.from_dict(lock),
        environment=EnvironmentRecord(),
        economics=None,
        rows=rows,
    )


def test_a_quantised_variant_refused_by_the_tolerance_reads_at_a_glance() -> None:
    assert optimisation_sentences(_bundle(), summary_of([_bundle()])) == [
        "q8 (quantization=int8_dynamic): 1.80× faster per corpus than q0 (warm medians); "
        "refused: macro_f1 0.812 < 0.847 − 0.01 (reference q0, R1.3, R5.7)."
    ]
    assert (
        optimisation_sentences(_bundle(), summary_of([_bundle()]))[0]
        in decision_view_of([_bundle()]).sentences
    )


def test_other_knobs_get_no_optimisation_sentence() -> None:
    assert optimisation_sentences(_bundle("batch"), summary_of([_bundle("batch")])) == []

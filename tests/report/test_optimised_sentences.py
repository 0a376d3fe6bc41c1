"""The decision view puts each optimised variant's speed next to the quality gate's decision on
it (R1.3, R5.7): a quantised variant 1.8× faster but below the tolerance reads as refused."""

from __future__ import annotations

from pathlib import Path

from gpubench_nb.protocol.lock import LockRecord
from gpubench_nb.protocol.records import EnvironmentRecord
from gpubench_nb.report.bundles import Bundle, summary_of
from gpubench_nb.report.conditions import RunConditions
from gpubench_nb.report.decision import decision_view_of, optimisation_sentences


def _rows(
    variant: str, seconds: float, quality: float, accepted: bool, reference: float = 0.847, **more
) -> list[dict]:
    """Rows as a bundle gives them: the checks each run recorded (checks.json, R1.6)."""
    return [
        {
            "bundle": "b",
            "variant_id": variant,
            "phase": phase,
            "run_index": i,
            "elapsed_seconds": seconds * (1.1 if phase == "cold" else 1.0),
            "quality_value": quality,
            "corpus_accepted": accepted,
            "reference_value": reference,
            "meets_threshold": True,
            "within_tolerance": accepted,
            "error": None,
            **more,
        }
        for phase in ("cold", "warm")
        for i in (1, 2, 3)
    ]


def _bundle(knob: str = "quantization", rows: list[dict] | None = None, **more) -> Bundle:
    lock = {
        "declaration": {
            "knob": knob,
            "quality": {
                "metric": "macro_f1",
                "threshold": 0.2,
                "tolerance": 0.1 if rows else 0.01,
                "reference_variant": "q0",
            },
            "variants": [{"id": "q0", knob: "none"}, {"id": "q8", knob: "int8_dynamic"}],
        }
    }
    rows = rows or _rows("q0", 0.9, 0.847, True, **more) + _rows("q8", 0.5, 0.812, False, **more)
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


def test_the_sentence_says_what_acceptance_decided_at_the_bound() -> None:
    """0.3 against 0.4 − 0.1 is within the tolerance by R1.5's slack (0.4 − 0.1 is
    0.30000000000000004 in floats): the run's recorded check, not a second judgement."""
    rows = _rows("q0", 0.9, 0.4, True, 0.4) + _rows("q8", 0.5, 0.3, True, 0.4)
    bundle = _bundle(rows=rows)
    assert optimisation_sentences(bundle, summary_of([bundle])) == [
        "q8 (quantization=int8_dynamic): 1.80× faster per corpus than q0 (warm medians); "
        "accepted: macro_f1 0.300 ≥ 0.400 − 0.1 (reference q0, R1.3, R5.7)."
    ]


def test_no_speed_ratio_stands_beside_a_withheld_verdict() -> None:
    """Under heavy load with free threads the verdict is withheld (R2.5): the optimisation
    sentence gives the two medians, labelled as no verdict, never "1.80× faster"."""
    busy = RunConditions(8.5, 8.5, 2, (), None, threads="2 torch thread(s)", threads_fixed=False)
    bundle = _bundle(conditions=busy)
    view = decision_view_of([bundle])
    assert view.check.withheld
    (said,) = [s for s in view.sentences if s.startswith("q8 (quantization=int8_dynamic)")]
    assert "×" not in said and "faster" not in said and "slower" not in said
    assert "warm median 500 ms, q0's 900 ms (no speed verdict: withheld" in said

"""Tokens per second and off-label answers in the report, where the backend counted them."""

from __future__ import annotations

from gpubench_nb.protocol.results_schema import empty_row
from gpubench_nb.report.render import token_table


def _row(phase: str, elapsed: float | None, tokens: int | None, off: int | None) -> dict:
    row = empty_row()
    row.update(experiment_id="e", variant_id="b8", phase=phase, run_index=1, expected_ids=10)
    row.update(elapsed_seconds=elapsed, tokens_processed=tokens, off_label_answers=off)
    return row


def test_median_tokens_per_second_and_off_label_counts_per_variant_and_phase() -> None:
    rows = [
        _row("load", 3.0, None, None),
        _row("warm", 2.0, 1000, 3),
        _row("warm", 4.0, 1000, 3),
        _row("warm", 1.0, 1000, 4),
        _row("warm", None, 1000, None),  # a failed run enters no statistic (R3.6)
    ]
    table = token_table(rows)
    assert list(table.index) == [("e", "b8", "warm")]
    assert table.loc[("e", "b8", "warm"), "tokens/s (median)"] == "500 tokens/s"  # formats.rate
    assert table.loc[("e", "b8", "warm"), "off-label answers per run"] == "3, 4"


def test_a_sentence_when_no_backend_counted_tokens() -> None:
    assert "per text only" in token_table([_row("warm", 2.0, None, None)])

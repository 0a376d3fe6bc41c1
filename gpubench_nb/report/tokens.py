"""Tokens per second and off-label answers, where the backend counted them (hf, causal_lm)."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pandas as pd

from gpubench_nb import formats
from gpubench_nb.protocol.records import MEASURED_PHASES
from gpubench_nb.report.stats import rows_to_frame, shown


def _number(value: Any) -> float:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.nan
    return float(value)


def token_table(rows: Any) -> pd.DataFrame | str:
    """Per (bundle, variant, phase) of measured passes: median tokens processed per second
    (run.json's ``tokens_processed`` / elapsed; prompt + text tokens without padding, plus
    generated tokens) and the off-label answers of each run (generate, R1.5). A sentence when
    no run counted tokens."""
    frame = rows_to_frame(rows)
    if "tokens_processed" not in frame.columns or frame["tokens_processed"].isna().all():
        return "No backend of these bundles counted tokens: throughput is per text only."
    records = []
    keys = ["bundle", "variant", "phase"]
    measured = frame[frame["phase"].isin(MEASURED_PHASES)]
    for (bundle, variant, phase), part in measured.groupby(
        ["bundle", "variant_id", "phase"], sort=False
    ):
        rates = [
            _number(t) / _number(e)
            for t, e, failed in zip(
                part["tokens_processed"], part["elapsed_seconds"], part["failed"], strict=True
            )
            if not failed and _number(t) > 0 and _number(e) > 0
        ]
        off = sorted(
            {int(v) for v in part.get("off_label_answers", []) if not math.isnan(_number(v))}
        )
        records.append(
            {
                "bundle": bundle,
                "variant": variant,
                "phase": phase,
                "tokens/s (median)": formats.rate(statistics.median(rates), "tokens/s")
                if rates
                else None,
                "off-label answers per run": ", ".join(map(str, off)) if off else None,
            }
        )
    return shown(pd.DataFrame.from_records(records).set_index(keys))

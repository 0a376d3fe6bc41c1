"""Tokens per second and off-label answers, where the backend counted them (hf, causal_lm)."""

from __future__ import annotations

import pandas as pd

from gpubench_nb import formats
from gpubench_nb.protocol.records import MEASURED_PHASES
from gpubench_nb.report.stats import Rows, Summary, shown, summarise


def token_table(rows: Rows | Summary) -> pd.DataFrame | str:
    """Per (bundle, variant, phase) of measured passes: median tokens processed per second
    (run.json's ``tokens_processed`` / elapsed; prompt + text tokens without padding, plus
    generated tokens) and the off-label answers of each run (generate, R1.5). A sentence when
    no run counted tokens."""
    phases = [p for p in summarise(rows).phases if p.phase in MEASURED_PHASES]
    if not any(r.get("tokens_processed") is not None for p in phases for r in p.rows):
        return "No backend of these bundles counted tokens: throughput is per text only."
    records = [
        {
            "bundle": p.bundle,
            "variant": p.variant_id,
            "phase": p.phase,
            "tokens/s (median)": formats.rate(p.tokens_per_second, "tokens/s")
            if p.tokens_per_second
            else None,
            "off-label answers per run": ", ".join(map(str, p.off_label)) or None,
        }
        for p in phases
    ]
    return shown(pd.DataFrame.from_records(records).set_index(["bundle", "variant", "phase"]))

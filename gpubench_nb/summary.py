"""The one-screen summary printed at the end of `gpubench-nb run` (R3.5: median and min–max)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PHASE_ORDER = ("load", "cold", "warm")


def summary_text(rows: Sequence[dict[str, Any]], bundle_dir: Path, report: Path | None) -> str:
    """Per variant and phase: n, failures, median and min–max elapsed; acceptance per variant."""
    lines = [
        f"bundle: {bundle_dir}",
        f"{'variant':<10}{'phase':<7}{'n':>3}{'failed':>8}{'median s':>12}{'min–max s':>24}",
    ]
    variants = list(dict.fromkeys(row["variant_id"] for row in rows))
    for variant in variants:
        mine = [row for row in rows if row["variant_id"] == variant]
        for phase in PHASE_ORDER:
            phase_rows = [row for row in mine if row["phase"] == phase]
            if not phase_rows:
                continue
            times = [
                row["elapsed_seconds"] for row in phase_rows if row["elapsed_seconds"] is not None
            ]
            failed = len(phase_rows) - len(times)
            if times:
                spread = f"{min(times):.6f}–{max(times):.6f}"
                median = f"{statistics.median(times):.6f}"
            else:
                spread, median = "—", "—"
            lines.append(
                f"{variant:<10}{phase:<7}{len(phase_rows):>3}{failed:>8}{median:>12}{spread:>24}"
            )
        measured = [row for row in mine if row["phase"] in ("cold", "warm")]
        verdict = (
            "accepted"
            if measured and all(row["corpus_accepted"] for row in measured)
            else "NOT accepted"
        )
        lines.append(
            f"{variant:<10}{verdict} ({sum(bool(r['corpus_accepted']) for r in measured)}"
            f"/{len(measured)} measured runs accepted, R1.5)"
        )
    lines.append(f"report: {report}" if report else "report: not rendered")
    return "\n".join(lines)

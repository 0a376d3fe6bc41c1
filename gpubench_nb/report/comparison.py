"""`gpubench-nb report`: one report over finished bundles, written outside every bundle (R5.6)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpubench_nb.protocol.bundle import comparison_report_path
from gpubench_nb.protocol.outputs import check_output
from gpubench_nb.protocol.writer import refuse_if_written
from gpubench_nb.report.render import render_report


def render_comparison(
    bundle_dirs: Sequence[str | Path],
    out: str | Path | None = None,
    *,
    allow_mismatch: bool = False,
    ledger: str | Path | None = None,
) -> Path:
    """Render 90_report over ``bundle_dirs`` into ``out`` (default: beside the first bundle),
    refused before any kernel starts by the output guard (R5.6) or a bundle still being written."""
    bundles = [Path(b) for b in bundle_dirs]
    default = comparison_report_path(bundles)
    html = Path(out) if out else default
    ledgers = [Path(ledger)] if ledger and Path(ledger).is_file() else []  # else refused on read
    check_output(
        html,
        option="--out",
        inputs=[*bundles, *ledgers],
        instead=f"use the default {default} (a bundle's own report.html is written by "
        "`gpubench-nb run`)",
    )
    for bundle in bundles:  # a `run` still writing one: refused, never read half-made (R5.6)
        refuse_if_written(bundle)
    return render_report(bundles, html, allow_mismatch=allow_mismatch, ledger=ledger)

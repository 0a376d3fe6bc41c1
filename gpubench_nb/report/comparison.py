"""`gpubench-nb report`: one report over finished bundles, written outside every bundle (R5.6)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpubench_nb.errors import BundleError
from gpubench_nb.protocol.bundle import comparison_report_path, sealed_bundle_holding
from gpubench_nb.protocol.outputs import check_output_file
from gpubench_nb.report.render import render_report


def render_comparison(
    bundle_dirs: Sequence[str | Path],
    out: str | Path | None = None,
    *,
    allow_mismatch: bool = False,
    ledger: str | Path | None = None,
) -> Path:
    """Render 90_report over ``bundle_dirs`` into ``out`` (default: beside the first bundle,
    report-<names>.html), refused before any kernel starts when ``out`` is no place for it."""
    bundles = [Path(b) for b in bundle_dirs]
    html = report_destination(bundles, out)
    return render_report(bundles, html, allow_mismatch=allow_mismatch, ledger=ledger)


def report_destination(bundles: list[Path], out: str | Path | None) -> Path:
    """``out`` (or the default), refused inside a finished bundle, inside a bundle the report
    reads, or over an existing input (R5.6)."""
    default = comparison_report_path(bundles)
    html = Path(out) if out else default
    sealed = sealed_bundle_holding(html)
    if sealed is not None:
        raise BundleError(
            f"--out {html} is inside the finished bundle {sealed}, whose manifest would then "
            f"fail check-bundle; write the report elsewhere (the default is {default}); a "
            "bundle's own report.html is written by "
            "`gpubench-nb run`",
            rule="R5.6",
        )
    inside = next((b for b in bundles if html.resolve().is_relative_to(b.resolve())), None)
    if inside is not None:
        raise BundleError(
            f"--out {html} is inside the bundle {inside} that the report reads; write the report "
            f"elsewhere (the default is {default})",
            rule="R5.6",
        )
    check_output_file(html, option="--out", inputs=[], instead=f"use the default {default}")
    return html

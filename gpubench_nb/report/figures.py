"""The report's figures: raw runs, median and min–max per phase facet; memory side by side."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from gpubench_nb.report.stats import (
    MEASURED_PHASES,
    MEMORY_COLUMNS,
    PHASES,
    memory_summary,
    rows_to_frame,
)
from gpubench_nb.report.verdict import OUTLIER_K, outlier_indices

# Above this max/min ratio within one facet, the axis is logarithmic: one slow run must not
# flatten the others against zero.
LOG_SPAN_RATIO = 10.0
_OUTLIER_COLOUR = "#ff7f0e"

# Figures are built without pyplot: nothing is registered globally, nothing shows twice.
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")
_READING_COLOURS = dict(
    zip(MEMORY_COLUMNS, ("#9ecae1", "#3182bd", "#fdae6b", "#e6550d"), strict=True)
)
_MIB = 2**20


def _ordered(values: Sequence[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def _runs_figure(
    frame: pd.DataFrame, column: str, phases: Sequence[str], ylabel: str, title: str
) -> Figure | None:
    """One facet per phase (R3.2); every run a point, the median a tick, min–max a line (R3.5)."""
    phases = [p for p in phases if p in set(frame["phase"])]
    if not phases:
        return None
    bundles = _ordered(frame["bundle"])
    variants = _ordered(frame["variant_id"])
    fig = Figure(figsize=(1.2 + 3.6 * len(phases), 4.2), layout="constrained")
    axes = fig.subplots(1, len(phases), squeeze=False)[0]
    for ax, phase in zip(axes, phases, strict=True):
        _phase_facet(ax, frame[frame["phase"] == phase], column, bundles, variants, ylabel)
        ax.set_title(phase)
    handles = _legend_handles(bundles)
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4), fontsize=8)
    fig.suptitle(title)
    return fig


def _phase_facet(
    ax: Axes,
    frame: pd.DataFrame,
    column: str,
    bundles: Sequence[str],
    variants: Sequence[str],
    ylabel: str,
) -> None:
    """One phase's runs: a tick per variant, a slot per bundle beside it, failures counted."""
    width = 0.7 / len(bundles)  # each bundle gets its own slot beside the variant's tick
    labels = []
    drawn: list[float] = []
    for i, variant in enumerate(variants):
        failed_here = 0
        for j, bundle in enumerate(bundles):
            part = frame[(frame["bundle"] == bundle) & (frame["variant_id"] == variant)]
            values, runs, failed = _timed_runs(part, column)
            failed_here += failed
            if not values:
                continue  # a failed run is listed in the failures table, never drawn (R5.8)
            drawn += values
            x = i + (j - (len(bundles) - 1) / 2) * width
            _draw_runs(ax, x, width, values, runs, _COLOURS[j % len(_COLOURS)])
        labels.append(f"{variant}\n({failed_here} failed)" if failed_here else variant)
    ax.set_xticks(range(len(variants)), labels)
    ax.set_xlim(-0.6, len(variants) - 0.4)
    _value_axis(ax, drawn, ylabel)
    ax.grid(axis="y", alpha=0.3)


def _timed_runs(part: pd.DataFrame, column: str) -> tuple[list[float], list[Any], int]:
    """(values, their run indices, failed runs): the runs that did not fail and have a value."""
    failed = part["failed"].astype(bool)
    timed = part[~failed]
    keep = [not math.isnan(v) for v in timed[column]]
    values = [float(v) for v, k in zip(timed[column], keep, strict=True) if k]
    runs = [r for r, k in zip(timed["run_index"], keep, strict=True) if k]
    return values, runs, int(failed.sum())


def _draw_runs(
    ax: Axes, x: float, width: float, values: list[float], runs: list[Any], colour: str
) -> None:
    """Every run a point, outliers ringed and named, min–max a line, the median a tick."""
    spread = [x + width * 0.3 * (k / max(len(values) - 1, 1) - 0.5) for k in range(len(values))]
    ax.scatter(spread, values, s=18, color=colour, alpha=0.75, zorder=3)
    for k in outlier_indices(values):  # kept and marked, never dropped (R3.6)
        ax.scatter(
            [spread[k]], [values[k]], s=90, marker="o", facecolors="none",
            edgecolors=_OUTLIER_COLOUR, linewidths=2, zorder=5,
        )  # fmt: skip
        ax.annotate(
            f"run {runs[k]}", (spread[k], values[k]), xytext=(6, 0),
            textcoords="offset points", fontsize=8, color=_OUTLIER_COLOUR,
        )  # fmt: skip
    ax.vlines(x, min(values), max(values), color=colour, linewidth=1.5, zorder=2)
    ax.hlines(
        statistics.median(values),
        x - width * 0.4,
        x + width * 0.4,
        color="black",
        linewidth=2.5,
        zorder=4,
    )


def _value_axis(ax: Axes, drawn: list[float], ylabel: str) -> None:
    """Logarithmic when the values span more than LOG_SPAN_RATIO, else linear from zero."""
    positive = [v for v in drawn if v > 0]
    if positive and max(positive) > LOG_SPAN_RATIO * min(positive):
        ax.set_yscale("log")
        ax.set_ylabel(f"{ylabel} (log scale: values span > {LOG_SPAN_RATIO:g}×)")
    else:
        ax.set_ylim(bottom=0)
        ax.set_ylabel(ylabel)


def _legend_handles(bundles: Sequence[str]) -> list[Line2D]:
    """The marks explained; a colour per bundle when several are compared."""
    handles = [
        Line2D([], [], marker="o", linestyle="", color="grey", label="one run"),
        Line2D([], [], color="black", linewidth=2.5, label="median"),
        Line2D([], [], color="grey", linewidth=1.5, label="min–max"),
        Line2D(
            [], [], marker="o", linestyle="", markerfacecolor="none",
            markeredgecolor=_OUTLIER_COLOUR, markeredgewidth=2, markersize=9,
            label=f"outlier: above median + {OUTLIER_K:g} × MAD (kept)",
        ),
    ]  # fmt: skip
    if len(bundles) > 1:
        handles += [
            Line2D([], [], marker="o", linestyle="", color=_COLOURS[j % len(_COLOURS)], label=b)
            for j, b in enumerate(bundles)
        ]
    return handles


def elapsed_figure(rows: Sequence[Mapping[str, Any]] | pd.DataFrame) -> Figure | None:
    """Elapsed seconds per variant, one facet per phase: load, cold, warm (R3.2, R3.5)."""
    frame = rows_to_frame(rows)
    return _runs_figure(
        frame, "elapsed_seconds", PHASES, "seconds per pass", "Elapsed time per variant and phase"
    )


def throughput_figure(rows: Sequence[Mapping[str, Any]] | pd.DataFrame) -> Figure | None:
    """Texts per second (expected_ids / elapsed_seconds) for cold and warm; load has none."""
    frame = rows_to_frame(rows)
    return _runs_figure(
        frame,
        "texts_per_second",
        MEASURED_PHASES,
        "texts per second",
        "Throughput per variant and phase (expected IDs / elapsed seconds)",
    )


def memory_figure(rows: Sequence[Mapping[str, Any]] | pd.DataFrame) -> Figure | None:
    """The four readings as bars side by side, never stacked or summed (R3.9); None on CPU."""
    summary = memory_summary(rows)
    if summary.empty:
        return None
    phases = [p for p in PHASES if p in set(summary["phase"])]
    several = summary["bundle"].nunique() > 1
    fig = Figure(figsize=(1.2 + 4.2 * len(phases), 4.4), layout="constrained")
    axes = fig.subplots(1, len(phases), squeeze=False)[0]
    bar = 0.8 / len(MEMORY_COLUMNS)
    for ax, phase in zip(axes, phases, strict=True):
        part = summary[summary["phase"] == phase].reset_index(drop=True)
        for k, name in enumerate(MEMORY_COLUMNS):
            medians = [v / _MIB for v in part[f"median_{name}"]]
            low = [(m - lo / _MIB) for m, lo in zip(medians, part[f"min_{name}"], strict=True)]
            high = [(hi / _MIB - m) for m, hi in zip(medians, part[f"max_{name}"], strict=True)]
            xs = [i + (k - 1.5) * bar for i in range(len(part))]
            ax.bar(xs, medians, width=bar, color=_READING_COLOURS[name], label=name)
            ax.errorbar(xs, medians, yerr=[low, high], fmt="none", ecolor="black", capsize=2)
        labels = [
            f"{b}\n{v}" if several else v
            for b, v in zip(part["bundle"], part["variant_id"], strict=True)
        ]
        ax.set_xticks(range(len(part)), labels, fontsize=8 if several else 10)
        ax.set_title(phase)
        ax.set_ylabel("MiB (2^20 bytes), median of runs; whiskers min–max")
        ax.set_ylim(bottom=0)
        ax.grid(axis="y", alpha=0.3)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=4, fontsize=8)
    fig.suptitle("PyTorch allocator memory: baselines and peaks, side by side (not additive)")
    return fig

"""The report's figures: raw runs, median and min–max per phase facet; memory side by side."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from gpubench_nb import formats
from gpubench_nb.protocol.records import MEASURED_PHASES, PHASES
from gpubench_nb.report.frontier import Frontier
from gpubench_nb.report.stats import (
    MEMORY_COLUMNS,
    PhaseSummary,
    Rows,
    Summary,
    memory_phases,
    summarise,
)
from gpubench_nb.report.verdict import OUTLIER_K

LOG_SPAN_RATIO = 10.0  # a facet spanning more is logarithmic: one slow run flattens no other
_OUTLIER_COLOUR = "#ff7f0e"
_GREY = "#9e9e9e"  # a refused option
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")
_READING_COLOURS = dict(
    zip(MEMORY_COLUMNS, ("#9ecae1", "#3182bd", "#fdae6b", "#e6550d"), strict=True)
)
_MIB = 2**20


def _runs_figure(
    summary: Summary, rate: bool, phases: Sequence[str], ylabel: str, title: str
) -> Figure | None:
    """One facet per phase (R3.2); every run a point, the median a tick, min–max a line (R3.5)."""
    phases = [p for p in phases if any(s.phase == p for s in summary.phases)]
    if not phases:
        return None
    bundles = list(dict.fromkeys(s.bundle for s in summary.phases))
    variants = list(dict.fromkeys(s.variant_id for s in summary.phases))
    fig, axes = _facets(phases, 3.6, 4.2, title)
    for ax, phase in zip(axes, phases, strict=True):
        _value_axis(ax, _phase_facet(ax, summary, phase, rate, bundles, variants), ylabel)
    handles = _legend_handles(bundles)
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4), fontsize=8)
    return fig


def _facets(phases: Sequence[str], width: float, height: float, title: str) -> tuple[Figure, Any]:
    """A figure built without pyplot (nothing registered globally), one facet per phase (R3.2)."""
    fig = Figure(figsize=(1.2 + width * len(phases), height), layout="constrained")
    fig.suptitle(title)
    axes = fig.subplots(1, len(phases), squeeze=False)[0]
    for ax, phase in zip(axes, phases, strict=True):
        ax.set_title(phase)
        ax.grid(axis="y", alpha=0.3)
    return fig, axes


def _phase_facet(
    ax: Axes, summary: Summary, phase: str, rate: bool, bundles: list[str], variants: list[str]
) -> list[float]:
    """One phase's runs: a tick per variant, a slot per bundle, failures counted; values drawn."""
    width = 0.7 / len(bundles)  # each bundle gets its own slot beside the variant's tick
    labels, drawn = [], []
    for i, variant in enumerate(variants):
        failed_here = 0
        for j, bundle in enumerate(bundles):
            group = summary.of(bundle, variant, phase)
            if group is None:
                continue
            failed_here += len(group.failed_runs)
            x = i + (j - (len(bundles) - 1) / 2) * width
            drawn += _draw_runs(ax, x, width, group, rate, _COLOURS[j % len(_COLOURS)])
        labels.append(f"{variant}\n({failed_here} failed)" if failed_here else variant)
    ax.set_xticks(range(len(variants)), labels)
    ax.set_xlim(-0.6, len(variants) - 0.4)
    return drawn


def _draw_runs(
    ax: Axes, x: float, width: float, group: PhaseSummary, rate: bool, colour: str
) -> list[float]:
    """Every timed run a point (a failed one is listed, never drawn, R5.8), the outliers of
    its durations ringed and named together, min–max a line, the median a tick."""
    shown = [(k, v) for k, v in enumerate(group.rates if rate else group.seconds) if v]
    if not shown:
        return []
    step = width * 0.3 / max(len(shown) - 1, 1)
    spots = {k: (x - width * 0.15 + n * step, v) for n, (k, v) in enumerate(shown)}
    ax.scatter(*zip(*spots.values(), strict=True), s=18, color=colour, alpha=0.75, zorder=3)
    ringed = [spots[k] for k in group.outliers if k in spots]  # kept and marked (R3.6)
    if ringed:
        ax.scatter(
            *zip(*ringed, strict=True), s=90, marker="o", facecolors="none",
            edgecolors=_OUTLIER_COLOUR, linewidths=2, zorder=5,
        )  # fmt: skip
        top = max(ringed, key=lambda spot: spot[1])
        runs = ", ".join(str(r) for r in group.outlier_runs)
        ax.annotate(
            f"run{'s' if len(ringed) > 1 else ''} {runs}", top, xytext=(6, 0),
            textcoords="offset points", fontsize=8, color=_OUTLIER_COLOUR,
        )  # fmt: skip
    values = [v for _, v in shown]
    ax.vlines(x, min(values), max(values), color=colour, linewidth=1.5, zorder=2)
    median = group.median_rate if rate else group.median
    ax.hlines(median, x - width * 0.4, x + width * 0.4, color="black", linewidth=2.5, zorder=4)
    return values


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
            label=f"outlier: time above median + {OUTLIER_K:g} × MAD (kept)",
        ),
    ]  # fmt: skip
    if len(bundles) > 1:
        handles += [
            Line2D([], [], marker="o", linestyle="", color=_COLOURS[j % len(_COLOURS)], label=b)
            for j, b in enumerate(bundles)
        ]
    return handles


def elapsed_figure(rows: Rows | Summary) -> Figure | None:
    """Elapsed seconds per variant, one facet per phase: load, cold, warm (R3.2, R3.5)."""
    title = "Elapsed time per variant and phase"
    return _runs_figure(summarise(rows), False, PHASES, "seconds per pass", title)


def throughput_figure(rows: Rows | Summary) -> Figure | None:
    """Texts per second (expected IDs / elapsed) for cold and warm; outliers ringed as elsewhere."""
    title = "Throughput per variant and phase (expected IDs / elapsed seconds)"
    return _runs_figure(summarise(rows), True, MEASURED_PHASES, "texts per second", title)


def memory_figure(rows: Rows | Summary) -> Figure | None:
    """The four readings as bars side by side, never stacked or summed (R3.9); None on CPU."""
    groups = memory_phases(rows)
    if not groups:
        return None
    phases = [p for p in PHASES if any(g.phase == p for g in groups)]
    several = len({g.bundle for g in groups}) > 1
    title = "PyTorch allocator memory: baselines and peaks, side by side (not additive)"
    fig, axes = _facets(phases, 4.2, 4.4, title)
    bar = 0.8 / len(MEMORY_COLUMNS)
    for ax, phase in zip(axes, phases, strict=True):
        part = [g for g in groups if g.phase == phase]
        for k, name in enumerate(MEMORY_COLUMNS):
            values = [[v / _MIB for v in g.values(name)] or [math.nan] for g in part]
            medians = [statistics.median(v) for v in values]
            low = [m - min(v) for m, v in zip(medians, values, strict=True)]
            high = [max(v) - m for m, v in zip(medians, values, strict=True)]
            xs = [i + (k - 1.5) * bar for i in range(len(part))]
            ax.bar(xs, medians, width=bar, color=_READING_COLOURS[name], label=name)
            ax.errorbar(xs, medians, yerr=[low, high], fmt="none", ecolor="black", capsize=2)
        labels = [f"{g.bundle}\n{g.variant_id}" if several else g.variant_id for g in part]
        ax.set_xticks(range(len(part)), labels, fontsize=8 if several else 10)
        ax.set_ylabel("MiB (2^20 bytes), median of runs; whiskers min–max")
        ax.set_ylim(bottom=0)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=4, fontsize=8)
    return fig


def frontier_figure(front: Frontier) -> Figure | None:
    """Every option placed and numbered as in its table (the key below it): the frontier starred
    and joined, refused ones grey crosses with their reason, never on it (R5.7)."""
    drawn = [(n, p) for n, p in enumerate(front.points, 1) if None not in (p.x, p.quality)]
    if not drawn:
        return None
    fig = Figure(figsize=(9, 4.5 + 0.16 * len(drawn)), layout="constrained")
    ax, spots, best = fig.subplots(), {}, []
    several = len({p.option.bundle for _, p in drawn}) > 1
    for n, p in drawn:
        ok, spot = p.option.accepted is True, (p.x / 100 if front.priced else p.x, p.quality)  # type: ignore[operator]
        why = "" if ok else f"; refused: {(p.option.why_not or '').split(';')[0]}"
        named = f"{n}. " + (f"{p.option.bundle}: " if several else "") + p.label + why
        ax.scatter(*spot, s=170 if p.on_frontier else 45, zorder=3, label=named,
                   color=(_COLOURS[p.on_frontier] if ok else _GREY),
                   marker="*" if p.on_frontier else "o" if ok else "x")  # fmt: skip
        spots.setdefault(spot, []).append(str(n))
        best += [spot] if p.on_frontier else []
    for spot, numbers in spots.items():
        ax.annotate(", ".join(numbers), spot, xytext=(6, 4), textcoords="offset points")
    if best:
        ax.plot(*zip(*sorted(best), strict=True), color=_COLOURS[1], linewidth=1, zorder=2)
    xs = [x for x, _ in spots if x > 0]
    if xs and max(xs) > LOG_SPAN_RATIO * min(xs):
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        ax.xaxis.set_minor_formatter(NullFormatter())
    shown = FuncFormatter(lambda v, _: formats.number(v) if front.priced else formats.seconds(v))
    ax.xaxis.set_major_formatter(shown)  # never scientific notation (formats)
    example = f" [{formats.PLACEHOLDER_MARK}]" * any(p.option.placeholder for _, p in drawn)
    unit = f"USD per accepted corpus{example} (refused: package total)" * front.priced
    ax.set(xlabel=f"{unit or 'median warm time per corpus'}, lower is better "
           f"({ax.get_xscale()} scale)",
           ylabel=f"{front.metric}, median, higher is better")  # fmt: skip
    fig.suptitle("The options: the frontier starred and joined; refused options grey, never on it")
    fig.legend(loc="outside lower center", fontsize=7, frameon=False)
    return fig

"""The report's one summary per (bundle, variant, phase): medians and ranges, never p95 (R3.5);
failed runs counted, in no statistic (R3.6, R5.8); acceptance read from protocol.quality (R1.5)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pandas as pd

from gpubench_nb.errors import ResultsError
from gpubench_nb.formats import NOT_RECORDED, number
from gpubench_nb.protocol.quality import VariantAcceptance, variant_acceptance
from gpubench_nb.protocol.records import MEASURED_PHASES, PHASES, Phase
from gpubench_nb.report.conditions import VariantConditions, over_runs
from gpubench_nb.report.verdict import outlier_indices

# baseline_allocated_bytes, baseline_reserved_bytes, peak_allocated_bytes, peak_reserved_bytes
MEMORY_COLUMNS = tuple(
    f"{w}_{k}_bytes" for w in ("baseline", "peak") for k in ("allocated", "reserved")
)
COLD_FIRST_RATIO = 1.5  # warned: a first cold run above this × the other cold runs' median (R3.7)
SPREAD_RATIO = 0.25  # warned: a (max - min) / median above this, per variant and phase (R3.5)
Rows = Sequence[Mapping[str, Any]] | pd.DataFrame


def _value(value: Any) -> Any:
    """None for not recorded: NaN (pandas' empty cell) never becomes a number (R4.3)."""
    return None if isinstance(value, float) and math.isnan(value) else value


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def spread(values: Sequence[float]) -> tuple[float, float, float] | None:
    """``(median, min, max)`` of ``values`` (R3.5: medians and ranges, never p95); None: none."""
    return (statistics.median(values), min(values), max(values)) if values else None


def failed(row: Mapping[str, Any]) -> bool:
    """No elapsed time, or the run recorded an error (OOM, crash): a failed observation."""
    return row.get("elapsed_seconds") is None or bool(row.get("error"))


@dataclass(frozen=True)
class PhaseSummary:
    """One (bundle, variant, phase) over its rows."""

    bundle: str
    variant_id: str
    phase: str
    rows: tuple[Mapping[str, Any], ...]  # every row of the group, failed ones included
    acceptance: VariantAcceptance | None  # the variant's verdict (protocol.quality, R1.5)

    # accepted or not (protocol.quality); None: acceptance not recorded (R4.3)
    verdict = property(lambda self: self.acceptance.verdict if self.acceptance else None)

    @cached_property
    def timed(self) -> tuple[Mapping[str, Any], ...]:
        return tuple(r for r in self.rows if not failed(r))

    name = property(lambda self: f"{self.bundle} / {self.variant_id}")
    runs = property(lambda self: tuple(r["run_index"] for r in self.timed))
    n = property(lambda self: len(self.seconds))
    median = property(lambda self: _median(self.seconds))
    low = property(lambda self: min(self.seconds, default=None))
    high = property(lambda self: max(self.seconds, default=None))
    failed_runs = property(lambda self: tuple(r["run_index"] for r in self.rows if failed(r)))
    # failed runs whose record says out of memory (run.json ``out_of_memory``, R5.8)
    oom_runs = property(lambda self: sum(1 for r in self.rows if r.get("out_of_memory") is True))
    outlier_runs = property(lambda self: tuple(self.runs[i] for i in self.outliers))

    @cached_property
    def seconds(self) -> tuple[float, ...]:
        return tuple(float(r["elapsed_seconds"]) for r in self.timed)

    @property
    def texts(self) -> int | None:
        """Texts per pass (the expected IDs); None for a load, which processes none."""
        if self.phase not in MEASURED_PHASES:
            return None
        found = next((r.get("expected_ids") for r in self.rows if r.get("expected_ids")), None)
        return int(found) if found else None

    @property
    def rates(self) -> tuple[float | None, ...]:
        """Texts per second of each timed run, aligned with ``seconds``."""
        texts = self.texts
        return tuple(texts / s if texts and s > 0 else None for s in self.seconds)

    median_rate = property(lambda self: _median([v for v in self.rates if v is not None]))

    @property
    def tokens_per_second(self) -> float | None:
        """Median tokens processed per second, where the backend counted them."""
        rates = [
            float(r["tokens_processed"]) / s
            for r, s in zip(self.timed, self.seconds, strict=True)
            if r.get("tokens_processed") and s > 0
        ]
        return _median(rates)

    @property
    def off_label(self) -> list[int]:
        counts = [r.get("off_label_answers") for r in self.rows]
        return sorted({int(n) for n in counts if n is not None})

    def median_of(self, column: str) -> float | None:
        """The median of a column over the timed runs that recorded it (energy, memory)."""
        return _median(self.values(column))

    @property
    def optimisation_seconds(self) -> dict[str, float]:
        """Each optimisation step's median seconds over the runs that recorded it (R3.2)."""
        steps = [r.get("optimisation") or {} for r in self.timed]
        names = dict.fromkeys(n for step in steps for n in step if n.endswith("_seconds"))
        found = {
            n.removesuffix("_seconds"): [s[n] for s in steps if s.get(n) is not None] for n in names
        }
        return {name: statistics.median(values) for name, values in found.items() if values}

    def values(self, column: str) -> list[float]:
        return [float(r[column]) for r in self.timed if r.get(column) is not None]

    @cached_property
    def outliers(self) -> tuple[int, ...]:
        """Positions in ``seconds`` above the variant's fence: THE outlier marks (R3.6)."""
        return tuple(outlier_indices(self.seconds))

    # what each timed run's record saw around it, aligned with ``seconds`` (R2.5)
    conditions = property(lambda self: tuple(r.get("conditions") for r in self.timed))

    @property
    def machine(self) -> VariantConditions | None:
        """The conditions over the timed runs whose record holds them; None: none does."""
        runs = [c for c in self.conditions if c is not None]
        return over_runs(self.bundle, self.variant_id, runs) if runs else None

    def warnings(self) -> list[str]:
        """A slow first cold run (COLD_FIRST_RATIO, R3.7) and a wide spread (SPREAD_RATIO)."""
        found = []
        if self.phase == Phase.COLD and 1 in self.runs and self.n > 1:
            value = self.seconds[self.runs.index(1)]
            ref = statistics.median(
                s for s, r in zip(self.seconds, self.runs, strict=True) if r != 1
            )
            if ref > 0 and value > COLD_FIRST_RATIO * ref:
                found.append(
                    f"{self.name}: cold run 1 took {value:.4g} s, {value / ref:.2f}× the median "
                    f"of the other cold runs ({ref:.4g} s; warning above {COLD_FIRST_RATIO}×). "
                    "It is kept, not dropped (R3.6); first runs are compared in fresh processes "
                    "(R3.7)."
                )
        if self.n >= 2:
            spread = (self.high - self.low) / self.median if self.median else math.inf  # type: ignore[operator]
            if spread > SPREAD_RATIO:
                found.append(
                    f"{self.name} / {self.phase}: (max − min) / median = {spread:.2f} over "
                    f"{self.n} runs (warning above {SPREAD_RATIO}); read the range, not only "
                    "the median (R3.5)."
                )
        return found


@dataclass(frozen=True)
class Summary:
    """Every row of the bundles read, and its summary per (bundle, variant, phase)."""

    rows: tuple[Mapping[str, Any], ...]
    phases: tuple[PhaseSummary, ...]

    def of(self, bundle: str, variant: str, phase: str) -> PhaseSummary | None:
        found = [
            p for p in self.phases if (p.bundle, p.variant_id, p.phase) == (bundle, variant, phase)
        ]
        return found[0] if found else None

    def variants(self) -> list[tuple[str, str]]:
        """(bundle, variant) pairs, in the order read."""
        return list(dict.fromkeys((p.bundle, p.variant_id) for p in self.phases))

    def measured(self, bundle: str, variant: str) -> list[Mapping[str, Any]]:
        """Every row of the variant's measured passes (cold, warm), failed ones included."""
        phases = [self.of(bundle, variant, phase) for phase in MEASURED_PHASES]
        return [r for p in phases if p for r in p.rows]

    def quality(self, bundle: str, variant: str) -> tuple[float, float, float] | None:
        """``spread`` of the declared metric over the variant's measured runs (R1.5)."""
        runs = self.measured(bundle, variant)
        return spread(
            [float(r["quality_value"]) for r in runs if r.get("quality_value") is not None]
        )

    def reference_value(self, bundle: str) -> float | None:
        """The reference value the bundle's runs were judged against (checks.json, R1.3)."""
        found = (r.get("reference_value") for r in self.rows if r["bundle"] == bundle)
        return next((float(v) for v in found if v is not None), None)

    def acceptance(self, bundle: str, variant: str) -> VariantAcceptance | None:
        """protocol.quality's verdict on the variant (the same on each of its phases, R1.5)."""
        found = [p for p in self.phases if (p.bundle, p.variant_id) == (bundle, variant)]
        return found[0].acceptance if found else None


def summarise(rows: Rows | Summary) -> Summary:
    """The one summary of ``rows``: first-seen order, phases in R3.2's order, acceptance (R1.5)."""
    if isinstance(rows, Summary):
        return rows
    frame = isinstance(rows, pd.DataFrame)  # its empty cells are NaN: not recorded (R4.3)
    records = rows.to_dict(orient="records") if frame else rows
    clean = tuple(
        {
            **{k: v if k == "elapsed_seconds" and not frame else _value(v) for k, v in r.items()},
            "bundle": r.get("bundle") or r.get("experiment_id") or "",
        }
        for r in records
    )
    for r in clean:  # a time that is not a number is neither a time nor "not recorded" (R3.6)
        if r.get("elapsed_seconds") is not None and not math.isfinite(r["elapsed_seconds"]):
            where = f"{r['bundle']} / {r['variant_id']} / {r['phase']} run {r['run_index']}"
            raise ResultsError(
                f"{where}: elapsed_seconds {r['elapsed_seconds']!r}: no time", rule="R3.6"
            )
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for row in clean:
        groups.setdefault((row["bundle"], str(row["variant_id"]), row["phase"]), []).append(row)
    verdicts = {
        bundle: variant_acceptance([r for r in clean if r["bundle"] == bundle])
        for bundle in dict.fromkeys(r["bundle"] for r in clean)
    }
    order = {p: i for i, p in enumerate(PHASES)}
    firsts = {key[:2]: i for i, key in reversed(list(enumerate(groups)))}
    keys = sorted(groups, key=lambda k: (firsts[k[:2]], order.get(k[2], len(order)), k[2]))
    phases = tuple(
        PhaseSummary(b, v, p, tuple(groups[(b, v, p)]), verdicts[b].get(v)) for b, v, p in keys
    )
    return Summary(clean, phases)


def anchor_warnings(rows: Rows | Summary) -> list[str]:
    """Sentences for slow first cold runs and wide spreads, every group in order."""
    return [w for p in summarise(rows).phases for w in p.warnings()]


def clock_warnings(rows: Rows | Summary) -> list[str]:
    """Runs throttled or well below the GPU's top clock in their timed pass (NVML, run.json)."""
    return [
        f"{r['bundle']} / {r['variant_id']} / {r['phase']} run {r['run_index']}: "
        f"{r['gpu_clock_flags']}. The time is kept (R3.6); it was measured at a lower clock (R2.5)."
        for r in summarise(rows).rows
        if r.get("gpu_clock_flags")
    ]


def memory_phases(rows: Rows | Summary) -> list[PhaseSummary]:
    """The groups with a memory reading, none shown as zero on CPU (R4.3); never summed (R3.9)."""
    return [p for p in summarise(rows).phases if any(p.values(n) for n in MEMORY_COLUMNS)]


def table(records: list[dict[str, Any]], index: Sequence[str]) -> pd.DataFrame:
    """The records as a frame indexed by ``index`` (an empty frame when there is none)."""
    frame = pd.DataFrame.from_records(records)
    return frame if frame.empty else frame.set_index(list(index))


def shown(frame: pd.DataFrame) -> pd.DataFrame:
    """For display: not recorded is a dash, never 0 or NaN (R4.3); floats in human form."""

    def cell(value: Any) -> Any:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return NOT_RECORDED
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):
            return number(value, 3)  # separators, never e-notation (3.042e+04 -> 30,421)
        return value

    return frame.astype(object).map(cell)

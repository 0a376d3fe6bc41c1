"""The report's statistics: pure functions over raw rows (median and min–max, never p95; R3.5)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from gpubench_nb.formats import number
from gpubench_nb.protocol.records import MEASURED_PHASES, PHASES, Phase
from gpubench_nb.protocol.results_schema import COLUMNS

MEMORY_COLUMNS: tuple[str, ...] = (
    "baseline_allocated_bytes",
    "baseline_reserved_bytes",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
)
# The anchors' warnings. A first cold run slower than this multiple of the median of the other
# cold runs of its variant (R3.7) ...
COLD_FIRST_RATIO = 1.5
# ... and a (max - min) / median spread above this, per variant and phase (R3.5).
SPREAD_RATIO = 0.25
NOT_RECORDED = "—"  # how an empty cell is shown: never as 0 or NaN (R4.3)


def _number(value: Any) -> float:
    """A cell as a float; NaN for not recorded (None) so it never becomes a zero (R4.3)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.nan
    return float(value)


def rows_to_frame(rows: Sequence[Mapping[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """Rows as a frame with ``bundle``, ``failed`` and ``texts_per_second`` added.

    A row is *failed* when its elapsed time is empty or its run recorded an error (OOM, crash):
    it is kept, counted and listed, but enters no statistic and no plot (R3.6, R5.8).
    """
    if isinstance(rows, pd.DataFrame) and "failed" in rows.columns:
        return rows
    records = rows.to_dict(orient="records") if isinstance(rows, pd.DataFrame) else rows
    out = []
    for row in records:
        record = dict(row)
        record.setdefault("bundle", record.get("experiment_id") or "")
        record.setdefault("error", None)
        elapsed = _number(record.get("elapsed_seconds"))
        record["failed"] = math.isnan(elapsed) or bool(record.get("error"))
        expected = _number(record.get("expected_ids"))
        record["texts_per_second"] = (
            expected / elapsed
            if record.get("phase") in MEASURED_PHASES and not record["failed"] and elapsed > 0
            else math.nan
        )
        out.append(record)
    frame = pd.DataFrame.from_records(out, columns=_frame_columns(out)).astype(object)
    for name in ("elapsed_seconds", "texts_per_second", "quality_value", *MEMORY_COLUMNS):
        if name in frame.columns:
            frame[name] = [_number(v) for v in frame[name]]
    return frame


def _frame_columns(records: list[dict[str, Any]]) -> list[str]:
    names = ["bundle", *COLUMNS, "error", "failed", "texts_per_second"]
    extra = [k for record in records for k in record if k not in names]
    return names + list(dict.fromkeys(extra))


def _groups(frame: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(bundle, variant, phase) keys: bundles and variants in first-seen order, phases R3.2."""
    bundles = list(dict.fromkeys(frame["bundle"]))
    keys = []
    for bundle in bundles:
        part = frame[frame["bundle"] == bundle]
        for variant in dict.fromkeys(part["variant_id"]):
            phases = set(part.loc[part["variant_id"] == variant, "phase"])
            keys += [(bundle, variant, p) for p in PHASES if p in phases]
            keys += [(bundle, variant, p) for p in sorted(phases - set(PHASES))]
    return keys


def _select(frame: pd.DataFrame, bundle: str, variant: str, phase: str) -> pd.DataFrame:
    mask = (
        (frame["bundle"] == bundle) & (frame["variant_id"] == variant) & (frame["phase"] == phase)
    )
    return frame[mask]


def summarise(rows: Sequence[Mapping[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """Per (bundle, variant, phase): n, n_failed, median, min, max elapsed, median texts/s,
    median energy per corpus pass in joules (empty where NVML's energy counter was not read).

    Median and min–max only: five observations do not support a p95 (R3.5). ``n`` counts the
    timed runs; failed runs are counted apart and never enter a statistic (R3.6, R5.8).
    """
    frame = rows_to_frame(rows)
    records = []
    for bundle, variant, phase in _groups(frame):
        part = _select(frame, bundle, variant, phase)
        timed = part[~part["failed"].astype(bool)]
        seconds = [float(v) for v in timed["elapsed_seconds"]]
        rates = [float(v) for v in timed["texts_per_second"] if not math.isnan(v)]
        joules = [  # energy per corpus pass, where NVML's counter was read
            float(v) for v in timed.get("energy_joules", []) if not math.isnan(_number(v))
        ]
        records.append(
            {
                "bundle": bundle,
                "variant_id": variant,
                "phase": phase,
                "n": len(seconds),
                "n_failed": int(part["failed"].astype(bool).sum()),
                "median_seconds": statistics.median(seconds) if seconds else math.nan,
                "min_seconds": min(seconds) if seconds else math.nan,
                "max_seconds": max(seconds) if seconds else math.nan,
                "median_texts_per_second": statistics.median(rates) if rates else math.nan,
                "median_energy_joules": statistics.median(joules) if joules else math.nan,
            }
        )
    columns = [
        "bundle",
        "variant_id",
        "phase",
        "n",
        "n_failed",
        "median_seconds",
        "min_seconds",
        "max_seconds",
        "median_texts_per_second",
        "median_energy_joules",
    ]
    return pd.DataFrame.from_records(records, columns=columns)


def anchor_warnings(rows: Sequence[Mapping[str, Any]] | pd.DataFrame) -> list[str]:
    """Sentences for slow first cold runs (COLD_FIRST_RATIO) and wide spreads (SPREAD_RATIO)."""
    frame = rows_to_frame(rows)
    found = []
    for bundle, variant, phase in _groups(frame):
        timed = _select(frame, bundle, variant, phase)
        timed = timed[~timed["failed"].astype(bool)]
        if phase == Phase.COLD:
            first = timed[timed["run_index"] == 1]
            others = [float(v) for v in timed.loc[timed["run_index"] != 1, "elapsed_seconds"]]
            if len(first) == 1 and others:
                value, ref = float(first["elapsed_seconds"].iloc[0]), statistics.median(others)
                if ref > 0 and value > COLD_FIRST_RATIO * ref:
                    found.append(
                        f"{bundle} / {variant}: cold run 1 took {value:.4g} s, "
                        f"{value / ref:.2f}× the median of the other cold runs ({ref:.4g} s; "
                        f"warning above {COLD_FIRST_RATIO}×). It is kept, not dropped (R3.6); "
                        "first runs are compared in fresh processes (R3.7)."
                    )
        seconds = [float(v) for v in timed["elapsed_seconds"]]
        if len(seconds) >= 2:
            median = statistics.median(seconds)
            spread = (max(seconds) - min(seconds)) / median if median > 0 else math.inf
            if spread > SPREAD_RATIO:
                found.append(
                    f"{bundle} / {variant} / {phase}: (max − min) / median = {spread:.2f} "
                    f"over {len(seconds)} runs (warning above {SPREAD_RATIO}); read the range, "
                    "not only the median (R3.5)."
                )
    return found


def clock_warnings(rows: Sequence[Mapping[str, Any]] | pd.DataFrame) -> list[str]:
    """Runs whose timed pass was throttled or ran well below the GPU's maximum clock, as
    sampled by NVML during the pass (run.json ``gpu_telemetry.flags``)."""
    frame = rows_to_frame(rows)
    if "gpu_clock_flags" not in frame.columns:
        return []
    found = []
    for row in frame.to_dict(orient="records"):
        flags = row.get("gpu_clock_flags")
        if isinstance(flags, str) and flags:
            found.append(
                f"{row['bundle']} / {row['variant_id']} / {row['phase']} run {row['run_index']}: "
                f"{flags}. The time is kept (R3.6); it was measured at a lower clock (R2.5)."
            )
    return found


def failures(rows: Sequence[Mapping[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """Every failed observation with its error and notes: listed, never a zero (R3.6, R5.8)."""
    frame = rows_to_frame(rows)
    failed = frame[frame["failed"].astype(bool)]
    columns = ["bundle", "variant_id", "phase", "run_index", "elapsed_seconds", "error", "notes"]
    out = failed[columns].copy()
    out["elapsed_seconds"] = [
        "not recorded" if math.isnan(v) else v for v in out["elapsed_seconds"]
    ]
    return out.reset_index(drop=True)


def acceptance(rows: Sequence[Mapping[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """Per measured run: the ID checks, quality vs threshold, drop vs reference, accepted (R1.5).

    ``reference_value``, ``meets_threshold`` and ``within_tolerance`` come from the run's
    checks.json when the bundle has one (columns of the same names); otherwise the threshold
    test is re-derived from the CSV and the reference comparison stays empty (not recorded).
    """
    frame = rows_to_frame(rows)
    measured = frame[frame["phase"].isin(MEASURED_PHASES)]
    records = []
    for _, row in measured.iterrows():
        value, threshold = _number(row["quality_value"]), _number(row.get("quality_threshold"))
        reference = _number(row.get("reference_value"))
        meets = row.get("meets_threshold")
        if meets is None and not (math.isnan(value) or math.isnan(threshold)):
            meets = value >= threshold
        records.append(
            {
                "bundle": row["bundle"],
                "variant_id": row["variant_id"],
                "phase": row["phase"],
                "run_index": row["run_index"],
                "ids_match": row["ids_match"],
                "format_valid": row["format_valid"],
                "quality_metric": row["quality_metric"],
                "quality_value": value,
                "quality_threshold": threshold,
                "meets_threshold": meets,
                "reference_value": reference,
                "drop_vs_reference": reference - value,  # NaN when either is not recorded
                "quality_tolerance": _number(row.get("quality_tolerance")),
                "within_tolerance": row.get("within_tolerance"),
                "corpus_accepted": row["corpus_accepted"],
                "failed": bool(row["failed"]),
            }
        )
    frame = pd.DataFrame.from_records(records, columns=_ACCEPTANCE_COLUMNS)
    # True/False/None as Python objects: a numpy bool would hide "not recorded" (R4.3).
    flags = ("ids_match", "format_valid", "meets_threshold", "within_tolerance", "corpus_accepted")
    return frame.astype({name: object for name in flags if name in frame.columns})


_ACCEPTANCE_COLUMNS = (
    "bundle",
    "variant_id",
    "phase",
    "run_index",
    "ids_match",
    "format_valid",
    "quality_metric",
    "quality_value",
    "quality_threshold",
    "meets_threshold",
    "reference_value",
    "drop_vs_reference",
    "quality_tolerance",
    "within_tolerance",
    "corpus_accepted",
    "failed",
)


def memory_summary(rows: Sequence[Mapping[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """Median, min and max of the four readings per (bundle, variant, phase), timed runs only.

    Allocated and reserved are separate columns, never added (R3.9). Groups with no reading are
    left out: on CPU nothing was recorded, and nothing is shown as zero (R4.3).
    """
    frame = rows_to_frame(rows)
    records = []
    for bundle, variant, phase in _groups(frame):
        part = _select(frame, bundle, variant, phase)
        part = part[~part["failed"].astype(bool)]
        record: dict[str, Any] = {"bundle": bundle, "variant_id": variant, "phase": phase}
        any_reading = False
        for name in MEMORY_COLUMNS:
            values = [float(v) for v in part[name] if not math.isnan(v)]
            any_reading = any_reading or bool(values)
            record[f"median_{name}"] = statistics.median(values) if values else math.nan
            record[f"min_{name}"] = min(values) if values else math.nan
            record[f"max_{name}"] = max(values) if values else math.nan
        if any_reading:
            records.append(record)
    columns = ["bundle", "variant_id", "phase"] + [
        f"{stat}_{name}" for name in MEMORY_COLUMNS for stat in ("median", "min", "max")
    ]
    return pd.DataFrame.from_records(records, columns=columns)


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

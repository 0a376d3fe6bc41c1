"""90_report: load one or many bundles, assemble the report's tables and text, render HTML.

The notebook ``notebooks/90_report.ipynb`` is a thin shell over this module. Its parameters:
``bundle_dirs`` (a list of bundle folders) and ``allow_mismatch`` (bool). With the plain
papermill CLI, ``-p`` passes a list as a *string*; :func:`parse_bundle_dirs` accepts that::

    papermill notebooks/90_report.ipynb out.ipynb -p bundle_dirs outputs/a           # one bundle
    papermill notebooks/90_report.ipynb out.ipynb -p bundle_dirs '["outputs/a", "outputs/b"]'
    papermill notebooks/90_report.ipynb out.ipynb -y 'bundle_dirs: [outputs/a, outputs/b]'

Relative folders are resolved against the kernel's working directory (where papermill runs).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

import gpubench_nb
from gpubench_nb import economics, results
from gpubench_nb.atomic import write_text_atomic
from gpubench_nb.errors import BundleError
from gpubench_nb.report_figures import elapsed_figure, memory_figure, throughput_figure
from gpubench_nb.report_stats import (
    COLD_FIRST_RATIO,
    MEMORY_COLUMNS,
    SPREAD_RATIO,
    acceptance,
    anchor_warnings,
    failures,
    memory_summary,
    read_csv_rows,
    rows_to_frame,
    summarise,
)

__all__ = [
    "COLD_FIRST_RATIO",
    "COMPARED_FIELDS",
    "SPREAD_RATIO",
    "Bundle",
    "acceptance_table",
    "comparability_problems",
    "economics_markdown",
    "economics_table",
    "elapsed_figure",
    "failures_table",
    "header_table",
    "load_bundles",
    "memory_figure",
    "memory_note",
    "memory_table",
    "not_accepted_markdown",
    "parse_bundle_dirs",
    "render_report",
    "rows_frame",
    "summarise",
    "summary_table",
    "throughput_figure",
    "title_markdown",
    "warnings_markdown",
]

NOTEBOOK = Path(gpubench_nb.__file__).resolve().parent.parent / "notebooks" / "90_report.ipynb"
# R2.1: bundles are merged only when these are equal (or the user says otherwise, visibly).
COMPARED_FIELDS: tuple[str, ...] = (
    "corpus_revision",
    "model_revision",
    "tokenizer_revision",
    "timer_scope",
)
_NOT_RECORDED = "—"


@dataclass(frozen=True)
class Bundle:
    """One bundle as the report reads it: its files, parsed, and its rows, typed (R5.6)."""

    path: Path
    label: str
    lock: Mapping[str, Any]
    environment: Mapping[str, Any]
    economics: Mapping[str, Any] | None
    rows: list[dict[str, Any]] = field(hash=False)

    def declared(self, *keys: str) -> Any:
        """A value of the frozen declaration by key path, or None (lock absent or older)."""
        node: Any = self.lock.get("declaration") or {}
        for key in keys:
            node = node.get(key) if isinstance(node, Mapping) else None
        return node

    def compared(self, name: str) -> str | None:
        """A COMPARED_FIELDS value: lock fingerprints first, else the CSV's one value."""
        if name == "timer_scope":
            return self.declared("timing", "scope")
        value = (self.lock.get("fingerprints") or {}).get(name)
        if value is None:
            seen = sorted({str(r[name]) for r in self.rows if r.get(name) is not None})
            value = " | ".join(seen) or None
        return value


def parse_bundle_dirs(value: str | os.PathLike[str] | Sequence[Any]) -> list[str]:
    """Bundle folders from a list, one path, or a list written as text (papermill ``-p``)."""
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise BundleError(
                f"bundle_dirs: cannot parse {value!r} as a list ({exc}); fix: "
                "-p bundle_dirs '[\"outputs/a\", \"outputs/b\"]'"
            ) from None
    if isinstance(value, str | os.PathLike):
        value = [value]
    if not isinstance(value, Sequence) or not value:
        raise BundleError(f"bundle_dirs: expected one or more bundle folders, got {value!r}")
    return [os.fspath(v) for v in value]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as exc:
        raise BundleError(f"{path}: unreadable JSON ({exc}); fix: restore it from the bundle") from None


def _read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        raise BundleError(
            f"{path}: no resultats-bruts.csv; fix: run `gpubench-nb run` for this experiment "
            "first, the report reads the bundle's raw rows",
            rule="R5.6",
        )
    reader = getattr(results, "read_rows", None)  # the shared reader once it exists
    return list(reader(path)) if reader is not None else read_csv_rows(path)


def _with_run_files(bundle_dir: Path, row: dict[str, Any]) -> dict[str, Any]:
    """Add run.json's error and truncation and checks.json's reference comparison to a row."""
    run_dir = bundle_dir / "runs" / str(row["variant_id"]) / f"{row['phase']}-{row['run_index']}"
    run = _read_json(run_dir / "run.json") or {}
    checks = _read_json(run_dir / "checks.json") or {}
    return {
        **row,
        "error": run.get("error"),
        "truncated_texts": run.get("truncated_texts"),
        "dropped_tokens": run.get("dropped_tokens"),
        "reference_value": checks.get("reference_value"),
        "meets_threshold": checks.get("meets_threshold"),
        "within_tolerance": checks.get("within_tolerance"),
    }


def _label(path: Path, lock: Mapping[str, Any], rows: list[dict[str, Any]]) -> str:
    experiment = lock.get("experiment_id") or (rows[0]["experiment_id"] if rows else path.name)
    gpus = sorted({r["gpu_model"] for r in rows if r.get("gpu_model")})
    devices = sorted({r["device"] for r in rows if r.get("device")})
    return f"{experiment} · {' + '.join(gpus) or ' + '.join(devices) or 'device not recorded'}"


def load_bundles(
    bundle_dirs: str | Sequence[Any], *, allow_mismatch: bool = False
) -> list[Bundle]:
    """Read each bundle; refuse unlike bundles, naming the differing field (R2.1)."""
    bundles = []
    for raw in parse_bundle_dirs(bundle_dirs):
        path = Path(raw)
        if not path.is_dir():
            raise BundleError(f"{path}: not a bundle folder; fix: pass outputs/<experiment_id>")
        lock = _read_json(path / "protocol.lock.json") or {}
        rows = [_with_run_files(path, r) for r in _read_rows(path / "resultats-bruts.csv")]
        bundles.append((path, lock, rows))
    labels = [_label(path, lock, rows) for path, lock, rows in bundles]
    # Two bundles of one experiment on one GPU model are told apart by their folder.
    labels = [
        f"{label} · {path.name}" if labels.count(label) > 1 else label
        for label, (path, _, _) in zip(labels, bundles, strict=True)
    ]
    loaded = [
        Bundle(
            path=path,
            label=label,
            lock=lock,
            environment=_read_json(path / "environment.json") or {},
            economics=_read_json(path / "economics.json"),
            rows=[{**r, "bundle": label} for r in rows],
        )
        for label, (path, lock, rows) in zip(labels, bundles, strict=True)
    ]
    problems = comparability_problems(loaded)
    if problems and not allow_mismatch:
        raise BundleError(
            f"bundles cannot be merged: {'; '.join(problems)}. Fix: compare bundles of the same "
            "corpus, model, tokenizer and timer scope, or pass allow_mismatch=True (CLI "
            "--allow-mismatch); the report then prints the difference",
            rule="R2.1",
        )
    return loaded


def comparability_problems(bundles: Sequence[Bundle]) -> list[str]:
    """One sentence per COMPARED_FIELDS entry on which the bundles differ (R2.1)."""
    problems = []
    for name in COMPARED_FIELDS:
        values = [b.compared(name) for b in bundles]
        if len(set(values)) > 1:
            listing = ", ".join(f"{b.path} has {v!r}" for b, v in zip(bundles, values, strict=True))
            problems.append(f"{name} differs ({listing})")
    return problems


def rows_frame(bundles: Sequence[Bundle]) -> pd.DataFrame:
    """Every raw row of every bundle, labelled, with ``failed`` and ``texts_per_second``."""
    return rows_to_frame([row for bundle in bundles for row in bundle.rows])


def _shown(frame: pd.DataFrame) -> pd.DataFrame:
    """For display: not recorded shows as a dash, never as 0 or NaN (R4.3); 4 significant digits."""

    def cell(value: Any) -> Any:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return _NOT_RECORDED
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):
            return f"{value:.4g}"
        return value

    return frame.astype(object).map(cell)


def _distinct(bundle: Bundle, name: str) -> str | None:
    values = list(dict.fromkeys(str(r[name]) for r in bundle.rows if r.get(name) is not None))
    return ", ".join(values) or None


def _truncation(bundle: Bundle) -> str:
    """Per variant, the largest truncation of a pass (R2.3); run.json holds the counts."""
    parts = []
    for variant in dict.fromkeys(r["variant_id"] for r in bundle.rows):
        runs = [r for r in bundle.rows if r["variant_id"] == variant and r["phase"] != "load"]
        texts = [r["truncated_texts"] for r in runs if r.get("truncated_texts") is not None]
        tokens = [r["dropped_tokens"] for r in runs if r.get("dropped_tokens") is not None]
        shown = f"{max(texts)} texts, {max(tokens) if tokens else '?'} tokens" if texts else None
        parts.append(f"{variant}: {shown or 'not recorded'}")
    return "; ".join(parts)


def header_table(bundles: Sequence[Bundle]) -> pd.DataFrame:
    """Protocol and environment, one column per bundle (R1.1, R2.3, R2.4, R3.1, R3.4)."""
    columns = {}
    for b in bundles:
        env, prints = b.environment, b.lock.get("fingerprints") or {}
        columns[b.label] = {
            "bundle folder": str(b.path),
            "experiment_id": b.lock.get("experiment_id") or _distinct(b, "experiment_id"),
            "knob (the one varied setting, R2.1)": b.declared("knob"),
            "corpus revision": b.compared("corpus_revision"),
            "model revision": b.compared("model_revision"),
            "tokenizer revision": b.compared("tokenizer_revision"),
            "code revision": env.get("code_revision"),
            "seed": b.declared("seed") or _distinct(b, "seed"),
            "GPU model (used)": _distinct(b, "gpu_model") or env.get("gpu_model"),
            "GPUs used": _distinct(b, "gpu_count") or env.get("gpu_count"),
            "GPUs visible (not necessarily used, R2.5)": env.get("visible_gpu_count"),
            "device": _distinct(b, "device") or env.get("device"),
            "driver": _distinct(b, "driver_version") or env.get("driver_version"),
            "CUDA/ROCm runtime": _distinct(b, "runtime_version") or env.get("runtime_version"),
            "torch": _distinct(b, "torch_version") or env.get("torch_version"),
            "Python": _distinct(b, "python_version") or env.get("python_version"),
            "CPU": env.get("cpu_model"),
            "precision, context": f"{_distinct(b, 'precision')}, {_distinct(b, 'context')}",
            "timer scope (R3.1)": b.compared("timer_scope"),
            "warm-up iterations": b.declared("timing", "warmup_iterations")
            or _distinct(b, "warmup_iterations"),
            "repeats": b.declared("timing", "repeats"),
            "order (R3.4)": b.declared("timing", "order"),
            "order seed": b.declared("timing", "order_seed"),
            "truncation per pass (R2.3)": _truncation(b),
        }
    frame = pd.DataFrame(columns)
    frame.index.name = "field"
    return _shown(frame)


def title_markdown(bundles: Sequence[Bundle]) -> str:
    """The report's title, its bundles, and the R2.1 mismatch banner when one was allowed."""
    names = ", ".join(dict.fromkeys(str(b.lock.get("experiment_id") or b.label) for b in bundles))
    lines = [f"# gpubench-nb report: {names}", ""]
    lines += [f"- **{b.label}**: `{b.path}`" for b in bundles]
    problems = comparability_problems(bundles)
    if problems:
        lines += [
            "",
            "> **Merged despite differences, on explicit request (allow_mismatch=True, R2.1):** "
            + "; ".join(problems)
            + ". These bundles did not measure the same work; their times are not comparable.",
        ]
    return "\n".join(lines)


def warnings_markdown(rows: pd.DataFrame) -> str:
    """The anchors' warnings as a list, or a sentence saying there is none."""
    found = anchor_warnings(rows)
    rule = (
        f"(first cold run > {COLD_FIRST_RATIO}× the median of the other cold runs; "
        f"(max − min) / median > {SPREAD_RATIO})"
    )
    if not found:
        return f"No warning {rule}."
    return f"Warnings {rule}:\n\n" + "\n".join(f"- {w}" for w in found)


def summary_table(rows: pd.DataFrame) -> pd.DataFrame:
    """n, failed, median, min and max elapsed seconds, median texts/s; no p95 (R3.5)."""
    table = summarise(rows).set_index(["bundle", "variant_id", "phase"])
    return _shown(table)


def memory_note(rows: pd.DataFrame) -> str:
    """What the memory readings cover and do not cover (R3.9); which bundles recorded none."""
    frame = rows_to_frame(rows)
    recorded = set(memory_summary(frame)["bundle"])
    lines = []
    if recorded:
        lines.append(
            "Readings of PyTorch's caching allocator on the measured device, per phase: the "
            "baselines before the phase and the absolute peaks during it (R3.8). `allocated` is "
            "contained in `reserved`: adding them counts memory twice, so they are drawn side "
            "by side, never stacked. The two peaks may occur at different moments: their "
            "difference is not the cache at any one moment. Allocations of other processes and "
            "outside PyTorch's allocator (CUDA context, libraries' workspaces) are not covered "
            "(R3.9). Failed runs are not drawn."
        )
    for bundle in dict.fromkeys(frame["bundle"]):
        if bundle not in recorded:
            lines.append(
                f"**{bundle}**: memory was not recorded (no CUDA device was measured, so the four "
                "memory cells are empty, R4.3); nothing is plotted and nothing is shown as zero."
            )
    return "\n\n".join(lines)


def memory_table(rows: pd.DataFrame) -> pd.DataFrame | None:
    """Median (min–max) of each reading in MiB (2^20 bytes); None when nothing was recorded."""
    summary = memory_summary(rows)
    if summary.empty:
        return None
    table = summary[["bundle", "variant_id", "phase"]].copy()
    for name in MEMORY_COLUMNS:
        table[name.replace("_bytes", "_MiB median (min–max)")] = [
            _NOT_RECORDED
            if math.isnan(m)
            else f"{m / 2**20:.1f} ({lo / 2**20:.1f}–{hi / 2**20:.1f})"
            for m, lo, hi in zip(
                summary[f"median_{name}"], summary[f"min_{name}"], summary[f"max_{name}"], strict=True
            )
        ]
    return table.set_index(["bundle", "variant_id", "phase"])


def acceptance_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per measured run: checks, quality vs threshold, drop vs reference, accepted (R1.5)."""
    table = acceptance(rows).drop(columns=["failed"])
    return _shown(table.set_index(["bundle", "variant_id", "phase", "run_index"]))


def failures_table(rows: pd.DataFrame) -> pd.DataFrame | str:
    """Failed observations with their error and notes (R3.6, R5.8); a sentence when none."""
    table = failures(rows)
    if table.empty:
        return "No failed observation: every run has a recorded elapsed time and no error."
    return _shown(table.set_index(["bundle", "variant_id", "phase", "run_index"]))


def _usd(cents: Any) -> str:
    """Integer cents as dollars, without floats (R4.2)."""
    if cents is None:
        return _NOT_RECORDED
    whole, part = divmod(int(cents), 100)
    return f"{whole:,}.{part:02d}"


def economics_table(bundles: Sequence[Bundle]) -> pd.DataFrame | None:
    """Per bundle and offer: the package total and the cost per accepted corpus per variant."""
    records = []
    for b in bundles:
        for offer in (b.economics or {}).get("offers") or []:
            record = {
                "bundle": b.label,
                "offer": offer.get("offer_id"),
                "declared offer": offer.get("declared"),
                "offer GPU": offer.get("gpu_model"),
                "days": offer.get("days"),
                "lots": offer.get("lots"),
                "package total (USD)": _usd(offer.get("package_total_usd_minor")),
            }
            for cell in offer.get("variants") or []:
                cost = cell.get("cost_per_accepted_usd_minor")
                record[f"{cell.get('variant_id')}: USD per accepted corpus"] = (
                    _usd(cost) if cost is not None else "none (not accepted or not measured)"
                )
            records.append(record)
    if not records:
        return None
    return _shown(pd.DataFrame.from_records(records).set_index(["bundle", "offer"]))


def economics_markdown(bundles: Sequence[Bundle]) -> str:
    """The unit of work and what is and is not computed, per bundle (R5.3, R5.4, R5.5)."""
    lines = []
    for b in bundles:
        data = b.economics
        if not data:
            lines.append(f"**{b.label}**: no economics.json in the bundle: no package is priced.")
            continue
        lines.append(f"**{b.label}**: {data.get('note') or ''}")
        if data.get("unit_of_work"):
            lines.append(f"Unit of work (R5.4): {data['unit_of_work']}.")
        if not data.get("offers"):
            lines.append("No offer was priced (no pricing section declared, R5.5).")
    return "\n\n".join(lines)


def _variant_status(bundle: Bundle) -> dict[str, tuple[bool | None, str | None]]:
    """variant -> (accepted, reason): economics.json's verdict, else re-derived from the rows."""
    facts = (bundle.economics or {}).get("variants")
    if facts:
        return {f["variant_id"]: (f.get("accepted"), f.get("reason")) for f in facts}
    out = {}
    for variant, entry in economics.variant_acceptance(bundle.rows).items():
        verdict = {1: True, 0: False}.get(entry["accepted_unique_corpora"])
        reason = None
        if verdict is False:
            reason = f"{entry['measured_runs'] - entry['accepted_runs']} of {entry['measured_runs']} measured runs not accepted"
        out[variant] = (verdict, reason)
    return out


def not_accepted_markdown(bundles: Sequence[Bundle], rows: pd.DataFrame) -> str:
    """A visible sentence for each variant faster than the fastest accepted one but not accepted.

    R5.7: a faster configuration that was not accepted does not reach the same goal. Speed is
    the median warm elapsed time (cold when no warm run was timed).
    """
    summary = summarise(rows)
    lines = []
    for b in bundles:
        status = _variant_status(b)
        mine = summary[summary["bundle"] == b.label]
        speed = {}
        for phase in ("cold", "warm"):  # warm overrides cold where both were timed
            part = mine[(mine["phase"] == phase) & (mine["n"] > 0)]
            speed.update(zip(part["variant_id"], part["median_seconds"], strict=True))
        accepted = {v: s for v, s in speed.items() if status.get(v, (None,))[0] is True}
        best = min(accepted, key=accepted.get) if accepted else None
        for variant, (verdict, reason) in status.items():
            if verdict is True:
                continue
            why = f" ({reason})" if reason else ""
            state = "not accepted" if verdict is False else "acceptance not recorded"
            if best is not None and variant in speed and speed[variant] < accepted[best]:
                lines.append(
                    f"- **{b.label} / {variant} was faster but {state}**{why}: median "
                    f"{speed[variant]:.4g} s against {accepted[best]:.4g} s for {best}, the "
                    "fastest accepted variant. It does not reach the same goal and has no cost "
                    "per accepted corpus (R5.7)."
                )
            else:
                lines.append(f"- {b.label} / {variant}: {state}{why}; no cost per result (R5.7).")
        if best is None:
            lines.append(f"- {b.label}: no variant was accepted, so no cost per result exists (R5.5).")
    return "\n".join(lines) or "Every variant was accepted."


def render_report(
    bundle_dirs: Sequence[str | os.PathLike[str]], out_html: str | os.PathLike[str], *,
    allow_mismatch: bool = False,
) -> Path:
    """Execute 90_report.ipynb over ``bundle_dirs`` and write a self-contained HTML file.

    The executed notebook is kept beside the HTML, in ``notebooks/`` (R5.6). Unlike bundles
    are refused before any kernel starts (R2.1).
    """
    import nbformat
    import papermill
    from nbconvert import HTMLExporter

    dirs = [str(Path(d).resolve()) for d in parse_bundle_dirs(bundle_dirs)]
    load_bundles(dirs, allow_mismatch=allow_mismatch)
    out_html = Path(out_html).resolve()
    name = "90_report.ipynb" if out_html.name == "report.html" else f"90_report-{out_html.stem}.ipynb"
    executed = out_html.parent / "notebooks" / name
    executed.parent.mkdir(parents=True, exist_ok=True)
    partial = executed.with_name(f".{executed.stem}.partial.ipynb")
    try:
        papermill.execute_notebook(
            str(NOTEBOOK), str(partial),
            parameters={"bundle_dirs": dirs, "allow_mismatch": bool(allow_mismatch)},
            kernel_name="python3", cwd=str(NOTEBOOK.parent.parent),
            progress_bar=False, log_output=False,
        )
    except papermill.PapermillExecutionError as exc:
        os.replace(partial, executed)  # keep the failed notebook for the reader, then raise
        raise BundleError(
            f"{NOTEBOOK.name} failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue}; "
            f"the executed notebook is kept at {executed}"
        ) from None
    os.replace(partial, executed)
    notebook = nbformat.read(executed, as_version=4)
    exporter = HTMLExporter(
        exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True,
        embed_images=True,
    )
    html, _ = exporter.from_notebook_node(notebook, resources={"metadata": {"name": "gpubench-nb report"}})
    write_text_atomic(out_html, html)
    return out_html

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

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from gpubench_nb import formats
from gpubench_nb.atomic import write_text_atomic
from gpubench_nb.errors import BundleError
from gpubench_nb.kernel import REPORT_STEP, notebook_path, papermill_module, papermill_options
from gpubench_nb.protocol.bundle import REPORT_NAME
from gpubench_nb.protocol.records import Phase
from gpubench_nb.report.bundles import (
    COMPARED_FIELDS,
    Bundle,
    comparability_problems,
    load_bundles,
    parse_bundle_dirs,
    rows_frame,
)
from gpubench_nb.report.conditions import conditions_banner, variant_conditions
from gpubench_nb.report.decision import (
    DecisionView,
    decision_frame,
    decision_html,
    decision_view,
    decision_view_of,
)
from gpubench_nb.report.economics import (
    break_even_markdown,
    economics_markdown,
    economics_table,
    ledger_markdown,
    not_accepted_markdown,
)
from gpubench_nb.report.escape import md_code, md_text
from gpubench_nb.report.stats import (
    COLD_FIRST_RATIO,
    MEASURED_PHASES,
    MEMORY_COLUMNS,
    NOT_RECORDED,
    SPREAD_RATIO,
    acceptance,
    anchor_warnings,
    clock_warnings,
    failures,
    memory_summary,
    rows_to_frame,
    shown,
    summarise,
)
from gpubench_nb.report.tokens import token_table
from gpubench_nb.report.verdict import OUTLIER_K, outlier_indices

if TYPE_CHECKING:  # at run time, from report.figures on first use: see __getattr__ below
    from gpubench_nb.report.figures import elapsed_figure, memory_figure, throughput_figure

__all__ = [
    "COLD_FIRST_RATIO",
    "COMPARED_FIELDS",
    "SPREAD_RATIO",
    "Bundle",
    "acceptance_table",
    "DecisionView",
    "break_even_markdown",
    "conditions_banner",
    "conditions_table",
    "decision_frame",
    "decision_html",
    "decision_view",
    "decision_view_of",
    "comparability_problems",
    "display_setup",
    "economics_markdown",
    "economics_table",
    "elapsed_figure",
    "failures_table",
    "header_table",
    "ledger_markdown",
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
    "token_table",
    "warnings_markdown",
]

NOTEBOOK_NAME = f"{REPORT_STEP}.ipynb"
# The figures need matplotlib, which only the report's kernel uses: `run` and `report` import
# this module to start that kernel, and load figures.py only when a cell asks.
_FIGURES = ("elapsed_figure", "memory_figure", "throughput_figure")


def __getattr__(name: str) -> Any:
    """``elapsed_figure``, ``memory_figure``, ``throughput_figure``: from report.figures, on
    first use (PEP 562)."""
    if name in _FIGURES:
        from gpubench_nb.report import figures

        return getattr(figures, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_ACCEPTANCE_LABELS = {
    "ids_match": "IDs match",
    "format_valid": "format valid",
    "quality_value": "quality",
    "meets_threshold": "≥ threshold",
    "reference_value": "reference",
    "drop_vs_reference": "drop vs reference",
    "within_tolerance": "drop ≤ tolerance",
    "corpus_accepted": "corpus accepted",
}
# Index levels in words, for every detail table.
_INDEX_LABELS = {"variant_id": "variant", "run_index": "run"}
# nbconvert's lab template loads require.js, MathJax and Mermaid from a CDN; the report needs
# none of them, and a file forwarded by e-mail or opened offline must not fetch anything.
_SELF_CONTAINED = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block data_png scoped -%}
<div class="jp-RenderedImage jp-OutputArea-output {{ extra_class }}">
<img src="data:image/png;base64,{{ output.data['image/png'] | escape_html }}"
 alt="{{ (cell | get_metadata('alt')) or 'a figure of this report' | escape_html }}">
</div>
{%- endblock data_png -%}
"""  # the lab template has no alt text; each figure cell carries its own in metadata "alt"


def display_setup() -> None:
    """Show every row and the whole of every cell: pandas cuts both by default (R3.6)."""
    pd.set_option("display.max_rows", None)
    pd.set_option("display.max_columns", None)
    pd.set_option("display.max_colwidth", None)
    pd.set_option("display.width", None)


def _distinct(bundle: Bundle, name: str) -> str | None:
    values = list(dict.fromkeys(str(r[name]) for r in bundle.rows if r.get(name) is not None))
    return ", ".join(values) or None


def _truncation(bundle: Bundle) -> dict[str, str]:
    """Per variant, the largest truncation of one pass (R2.3); run.json holds the counts."""
    out = {}
    for variant in dict.fromkeys(r["variant_id"] for r in bundle.rows):
        runs = [r for r in bundle.rows if r["variant_id"] == variant and r["phase"] != Phase.LOAD]
        texts = [r["truncated_texts"] for r in runs if r.get("truncated_texts") is not None]
        tokens = [r["dropped_tokens"] for r in runs if r.get("dropped_tokens") is not None]
        out[f"truncation, {variant} (R2.3)"] = (
            f"{max(texts)} texts cut, {max(tokens) if tokens else '?'} tokens dropped"
            if texts
            else NOT_RECORDED
        )
    return out


def _short(revision: str | None) -> str | None:
    """The first 16 hex digits; the full value stays in protocol.lock.json."""
    return revision if revision is None or len(revision) <= 16 else f"{revision[:16]}…"


def _quality_rule(bundle: Bundle) -> str | None:
    quality = bundle.declared("quality") or {}
    if not quality:
        return None
    return (
        f"{quality.get('metric')} ≥ {quality.get('threshold')}; drop ≤ "
        f"{quality.get('tolerance')} vs {quality.get('reference_variant') or 'the reference'}"
    )


def header_table(bundles: Sequence[Bundle]) -> pd.DataFrame:
    """Protocol and environment, one column per bundle (R1.1, R2.3, R2.4, R3.1, R3.4)."""
    columns = {}
    for b in bundles:
        env = b.environment
        columns[b.label] = {
            "bundle folder": str(b.path),
            "experiment_id": b.lock.get("experiment_id") or _distinct(b, "experiment_id"),
            "knob (the one varied setting, R2.1)": b.declared("knob"),
            "corpus revision": _short(b.compared("corpus_revision")),
            "model revision": _short(b.compared("model_revision")),
            "tokenizer revision": _short(b.compared("tokenizer_revision")),
            "code revision": env.get("code_revision"),
            "quality rule (R1.3)": _quality_rule(b),
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
            "repeats": _repeats(b),
            "order (R3.4)": b.declared("timing", "order"),
            "order seed": b.declared("timing", "order_seed"),
            **_truncation(b),
        }
    frame = pd.DataFrame(columns)
    frame.index.name = "field (revisions: first 16 hex digits, full in protocol.lock.json)"
    return shown(frame)


def _repeats(b: Bundle) -> Any:
    """The declared repeats, with the declared reason when fewer than R3.4's five."""
    repeats, reason = b.declared("timing", "repeats"), b.declared("timing", "repeats_reason")
    return f"{repeats}: fewer than the 5 of R3.4, because: {reason}" if reason else repeats


def title_markdown(bundles: Sequence[Bundle]) -> str:
    """The report's title, its bundles, and the R2.1 mismatch banner when one was allowed."""
    names = ", ".join(
        dict.fromkeys(md_text(b.lock.get("experiment_id") or b.label) for b in bundles)
    )
    lines = [f"# gpubench-nb report: {names}", ""]
    lines += [
        f"- **{md_text(b.label)}**: {md_code(b.path)}"
        + ("" if b.rows else " (no row in resultats-bruts.csv yet)")
        for b in bundles
    ]
    lines += truncation_banner(bundles)
    problems = comparability_problems(bundles)
    if problems:
        lines += [
            "",
            "> **Merged despite differences, on explicit request (allow_mismatch=True, R2.1):** "
            + "; ".join(md_text(p) for p in problems)
            + ". These bundles did not measure the same work; their times are not comparable.",
        ]
    return "\n".join(lines)


def truncation_banner(bundles: Sequence[Bundle]) -> list[str]:
    """A banner when one model on one corpus ran at different contexts and some of them cut
    texts (R2.3): shorter texts are less work, so those times and qualities are of different
    work. Empty when no such merge."""
    groups: dict[tuple[Any, Any], dict[Any, int]] = {}
    for b in bundles:
        for row in b.rows:
            if row.get("phase") == "load" or row.get("context") is None:
                continue
            key = (row.get("model_revision"), row.get("corpus_revision"))
            cut = groups.setdefault(key, {})
            texts = row.get("truncated_texts") or 0
            cut[row["context"]] = max(cut.get(row["context"], 0), int(texts))
    lines = []
    for cut in groups.values():
        if len(cut) > 1 and any(cut.values()):
            shown = "; ".join(
                f"context {md_text(c)}: "
                + (f"up to {formats.count(n)} texts cut per pass" if n else "no text cut")
                for c, n in sorted(cut.items(), key=lambda item: str(item[0]))
            )
            lines += [
                "",
                "> **Different contexts, some truncating (R2.3):** the same model on the same "
                f"corpus ran at {len(cut)} contexts ({shown}). A cut text is less work and a "
                "different input: these rows did not do the same work, so their times and "
                "quality are not comparable as they stand.",
            ]
    return lines


def warnings_markdown(rows: pd.DataFrame) -> str:
    """The anchors' warnings as a list, or a sentence saying there is none."""
    found = anchor_warnings(rows) + clock_warnings(rows)
    rule = (
        f"(first cold run > {COLD_FIRST_RATIO}× the median of the other cold runs; "
        f"(max − min) / median > {SPREAD_RATIO}; a GPU throttled or well below its maximum "
        "clock during the timed pass, as sampled by NVML)"
    )
    if not found:
        return f"No warning {rule}."
    return f"Warnings {rule}:\n\n" + "\n".join(f"- {md_text(w)}" for w in found)


def summary_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per bundle, variant and phase: runs, median (min–max) per pass, per text and texts/s,
    in units with 3 significant digits; outliers marked, never dropped (R3.5, R3.6)."""
    frame = rows_to_frame(rows)
    records = []
    for s in summarise(frame).itertuples(index=False):
        part = frame[
            (frame["bundle"] == s.bundle)
            & (frame["variant_id"] == s.variant_id)
            & (frame["phase"] == s.phase)
            & ~frame["failed"].astype(bool)
        ]
        values = [float(v) for v in part["elapsed_seconds"]]
        runs = list(part["run_index"])
        marked = [f"run {runs[i]} ({formats.seconds(values[i])})" for i in outlier_indices(values)]
        texts = next((float(v) for v in part["expected_ids"] if v), None)
        per_text = s.median_seconds / texts if texts and s.phase in MEASURED_PHASES else None
        records.append(
            {
                "bundle": s.bundle,
                "variant": s.variant_id,
                "phase": s.phase,
                "timed runs": s.n,
                "failed runs": s.n_failed,
                "median per pass": formats.seconds(s.median_seconds),
                "min – max": f"{formats.seconds(s.min_seconds)} – {formats.seconds(s.max_seconds)}"
                if s.n
                else NOT_RECORDED,
                "median per text": formats.seconds(per_text),
                "texts/s (median)": formats.rate(s.median_texts_per_second),
                f"outliers (above median + {OUTLIER_K:g} × MAD; kept)": ", ".join(marked) or "none",
            }
        )
    table = pd.DataFrame.from_records(records)
    return table if table.empty else table.set_index(["bundle", "variant", "phase"])


def conditions_table(rows: pd.DataFrame) -> pd.DataFrame | str:
    """Per bundle, variant and phase: the machine's load and other busy processes during its
    runs, as each run.json recorded them (R2.5); a sentence when none did."""
    records = [
        {"bundle": c.bundle, "variant": c.variant_id, "phase": phase, "machine": c.text()}
        for phase in MEASURED_PHASES  # a cold run's load row shares its run.json
        for c in variant_conditions(rows_to_frame(rows).to_dict(orient="records"), (phase,))
    ]
    if not records:
        return "No run recorded the machine's conditions."
    order = {phase: i for i, phase in enumerate(MEASURED_PHASES)}
    records.sort(key=lambda r: order[r["phase"]])
    table = pd.DataFrame.from_records(records).set_index(["bundle", "variant", "phase"])
    return table.sort_index(level=["bundle", "variant"], sort_remaining=False)


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
                f"**{md_text(bundle)}**: memory was not recorded (no CUDA device was measured, so "
                "the four memory cells are empty, R4.3); nothing is plotted and nothing is shown "
                "as zero."
            )
    return "\n\n".join(lines)


def memory_table(rows: pd.DataFrame) -> pd.DataFrame | None:
    """Median (min–max) of each reading in MiB (2^20 bytes); None when nothing was recorded."""
    summary = memory_summary(rows)
    if summary.empty:
        return None
    table = summary[["bundle", "variant_id", "phase"]].copy().rename(columns=_INDEX_LABELS)
    for name in MEMORY_COLUMNS:
        words = name.replace("_bytes", "").replace("_", " ")
        table[f"{words}, MiB: median (min–max)"] = [
            NOT_RECORDED
            if math.isnan(m)
            else f"{m / 2**20:.1f} ({lo / 2**20:.1f}–{hi / 2**20:.1f})"
            for m, lo, hi in zip(
                summary[f"median_{name}"],
                summary[f"min_{name}"],
                summary[f"max_{name}"],
                strict=True,
            )
        ]
    return table.set_index(["bundle", "variant", "phase"])


def acceptance_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per measured run: checks, quality vs threshold, drop vs reference, accepted (R1.5)."""
    # The metric, threshold and tolerance are declared once: they are in the header (R1.3).
    table = acceptance(rows).drop(
        columns=["failed", "quality_metric", "quality_threshold", "quality_tolerance"]
    )
    table = table.rename(columns={**_ACCEPTANCE_LABELS, **_INDEX_LABELS})
    return shown(table.set_index(["bundle", "variant", "phase", "run"]))


def failures_table(rows: pd.DataFrame) -> pd.DataFrame | str:
    """Failed observations with their error and notes (R3.6, R5.8); a sentence when none."""
    table = failures(rows)
    if table.empty:
        return "No failed observation: every run has a recorded elapsed time and no error."
    table = table.rename(columns={**_INDEX_LABELS, "elapsed_seconds": "elapsed"})
    return shown(table.set_index(["bundle", "variant", "phase", "run"]))


def executed_notebook(out_html: str | os.PathLike[str]) -> Path:
    """Where the executed 90_report behind ``out_html`` is kept: the record of what made the
    HTML, in ``notebooks/`` beside it (a bundle's own, R5.6), open it to rerun a cell."""
    out_html = Path(out_html).resolve()
    name = NOTEBOOK_NAME if out_html.name == REPORT_NAME else f"{REPORT_STEP}-{out_html.stem}.ipynb"
    return out_html.parent / "notebooks" / name


def render_report(
    bundle_dirs: Sequence[str | os.PathLike[str]],
    out_html: str | os.PathLike[str],
    *,
    allow_mismatch: bool = False,
    ledger: str | os.PathLike[str] | None = None,
) -> Path:
    """Execute 90_report.ipynb over ``bundle_dirs`` and write a self-contained HTML file.

    The executed notebook is kept beside the HTML, in ``notebooks/`` (R5.6). Unlike bundles
    are refused before any kernel starts (R2.1).
    """
    papermill = papermill_module()  # first: nbconvert would load the unused grammar
    import jinja2
    from nbconvert import HTMLExporter

    dirs = [str(Path(d).resolve()) for d in parse_bundle_dirs(bundle_dirs)]
    load_bundles(dirs, allow_mismatch=allow_mismatch)
    ledger_path = str(Path(ledger).resolve()) if ledger is not None else ""
    if ledger_path:
        ledger_markdown(ledger_path)  # an unusable ledger is refused before any kernel starts
    out_html = Path(out_html).resolve()
    executed = executed_notebook(out_html)
    executed.parent.mkdir(parents=True, exist_ok=True)
    partial = executed.with_name(f".{executed.stem}.partial.ipynb")
    try:
        notebook = papermill.execute_notebook(
            str(notebook_path(NOTEBOOK_NAME)),
            str(partial),
            parameters={
                "bundle_dirs": dirs,
                "allow_mismatch": bool(allow_mismatch),
                "ledger": ledger_path,
            },
            kernel_name="python3",
            cwd=str(Path.cwd()),  # never the installed package's folder
            progress_bar=False,
            log_output=False,
            # Written once, when done (or failed): saving the growing notebook after each of
            # its ~35 cells cost ~0.6 s of JSON for a file nobody reads until then.
            request_save_on_cell_execute=False,
            **papermill_options(),  # IPC transport: no TCP warning from ipykernel
        )
        os.replace(partial, executed)
    except papermill.PapermillExecutionError as exc:
        os.replace(partial, executed)  # keep the failed notebook for the reader, then raise
        raise BundleError(
            f"{NOTEBOOK_NAME} failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue}; "
            f"the executed notebook is kept at {executed}; no report.html was written"
        ) from None
    finally:
        partial.unlink(missing_ok=True)  # a kernel that never started leaves no stray file
    # papermill's notebook, already in memory, is the one it wrote: not read back
    exporter = HTMLExporter(
        extra_loaders=[jinja2.DictLoader({"gpubench_report.html.j2": _SELF_CONTAINED})],
        template_file="gpubench_report.html.j2",
        exclude_input=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
        embed_images=True,
    )
    html, _ = exporter.from_notebook_node(
        notebook, resources={"metadata": {"name": "gpubench-nb report"}}
    )
    write_text_atomic(out_html, html)
    return out_html

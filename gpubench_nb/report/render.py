"""90_report's tables, text and HTML page (costs: report.economics); the notebook is a shell."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench_nb import formats
from gpubench_nb.atomic import write_text_atomic
from gpubench_nb.economics.reprice import verify_bundle
from gpubench_nb.errors import BundleError
from gpubench_nb.formats import NOT_RECORDED
from gpubench_nb.kernel import REPORT_STEP, notebook_path, papermill_module, papermill_options
from gpubench_nb.protocol.bundle import MANIFEST_NAME, REPORT_NAME, comparison_report_path
from gpubench_nb.protocol.experiment_rules import MIN_REPEATS
from gpubench_nb.protocol.outputs import check_output
from gpubench_nb.protocol.records import MEASURED_PHASES
from gpubench_nb.protocol.writer import refuse_if_written
from gpubench_nb.report.bundles import (  # the notebook reads every function from here
    Bundle,
    comparability_problems,
    load_bundles,
    parse_bundle_dirs,
)
from gpubench_nb.report.bundles import summary_of as summary_of
from gpubench_nb.report.conditions import VariantConditions
from gpubench_nb.report.decision import decision_frame as decision_frame
from gpubench_nb.report.decision import decision_html as decision_html
from gpubench_nb.report.decision import decision_view_of as decision_view_of
from gpubench_nb.report.decision import quality_text
from gpubench_nb.report.economics import ledger_markdown
from gpubench_nb.report.escape import md_code, md_text
from gpubench_nb.report.stats import (
    COLD_FIRST_RATIO,
    MEMORY_COLUMNS,
    SPREAD_RATIO,
    PhaseSummary,
    Rows,
    Summary,
    anchor_warnings,
    clock_warnings,
    failed,
    memory_phases,
    shown,
    spread,
    summarise,
    table,
)
from gpubench_nb.report.verdict import OUTLIER_K

NOTEBOOK_NAME = f"{REPORT_STEP}.ipynb"
_ACCEPTANCE_LABELS = {
    "ids_match": "IDs match",
    "format_valid": "format valid",
    "meets_threshold": "≥ threshold",
    "within_tolerance": "drop ≤ tolerance",
}
# nbconvert's lab template loads require.js, MathJax and Mermaid from a CDN; the report needs
# none of them, and a file forwarded by e-mail or opened offline must not fetch anything.
_SELF_CONTAINED = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""  # figures are HTML images with their alt text (report.figures.ReportFigure)


def display_setup() -> None:
    """Show every row and the whole of every cell: pandas cuts both by default (R3.6)."""
    for name in ("max_rows", "max_columns", "max_colwidth", "width"):
        pd.set_option(f"display.{name}", None)


def _distinct(bundle: Bundle, name: str) -> str | None:
    values = list(dict.fromkeys(str(r[name]) for r in bundle.rows if r.get(name) is not None))
    return ", ".join(values) or None


def _short(revision: str | None) -> str | None:
    """The first 16 hex digits; the full value stays in protocol.lock.json."""
    return revision if revision is None or len(revision) <= 16 else f"{revision[:16]}…"


# (header label, CSV column): the rows' distinct values, else environment.json's
_RECORDED = (("GPU model (used)", "gpu_model"), ("GPUs used", "gpu_count"), ("device", "device"),
             ("driver", "driver_version"), ("CUDA/ROCm runtime", "runtime_version"),
             ("torch", "torch_version"), ("Python", "python_version"))  # fmt: skip


_REVISIONS = ("corpus", "model", "tokenizer")


def header_table(bundles: Sequence[Bundle]) -> pd.DataFrame:
    """Protocol and environment, one column per bundle (R1.1, R2.3, R2.4, R3.1, R3.4)."""
    columns = {}
    for b in bundles:
        env, quality = b.environment, b.declared("quality") or {}
        repeats, reason = b.declared("timing", "repeats"), b.declared("timing", "repeats_reason")
        columns[b.label] = {
            "bundle folder": str(b.path),
            "experiment_id": b.lock.experiment_id or _distinct(b, "experiment_id"),
            "knob (the one varied setting, R2.1)": b.declared("knob"),
            **{f"{n} revision": _short(b.compared(f"{n}_revision")) for n in _REVISIONS},
            "code revision": env.code_revision,
            "quality rule (R1.3)": f"{quality.get('metric')} ≥ {quality.get('threshold')}; drop ≤ "
            f"{quality.get('tolerance')} vs {quality.get('reference_variant') or 'the reference'}"
            if quality
            else None,
            "seed": b.declared("seed") or _distinct(b, "seed"),
            **{label: _distinct(b, key) or getattr(env, key) for label, key in _RECORDED},
            "GPUs visible (not necessarily used, R2.5)": env.visible_gpu_count,
            "CPU": env.cpu_model,
            "precision, context": f"{_distinct(b, 'precision')}, {_distinct(b, 'context')}",
            "timer scope (R3.1)": b.compared("timer_scope"),
            "warm-up iterations": b.declared("timing", "warmup_iterations")
            or _distinct(b, "warmup_iterations"),
            "repeats": f"{repeats}: fewer than the {MIN_REPEATS} of R3.4, because: {reason}"
            if reason
            else repeats,
            "order (R3.4)": b.declared("timing", "order"),
            "order seed": b.declared("timing", "order_seed"),
        }
    frame = pd.DataFrame(columns)
    frame.index.name = "field (revisions: first 16 hex digits, full in protocol.lock.json)"
    return shown(frame)


def title_markdown(bundles: Sequence[Bundle]) -> str:
    """The report's title, its bundles, and the R2.1 mismatch banner when one was allowed."""
    names = ", ".join(dict.fromkeys(md_text(b.lock.experiment_id or b.label) for b in bundles))
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
    """A banner when one model on one corpus ran at contexts where some cut texts (R2.3): shorter
    texts are less work, so those numbers are not comparable."""
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


def warnings_markdown(rows: Rows | Summary) -> str:
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


def _by_phase(phases: Sequence[PhaseSummary], cells: Any) -> pd.DataFrame:
    """One row per (bundle, variant, phase) of ``phases``, ``cells(phase)`` its columns."""
    keys = [{"bundle": p.bundle, "variant": p.variant_id, "phase": p.phase} for p in phases]
    records = [{**k, **cells(p)} for k, p in zip(keys, phases, strict=True)]
    return table(records, ["bundle", "variant", "phase"])


def summary_table(rows: Rows | Summary) -> pd.DataFrame:
    """Per bundle, variant and phase: runs, median (min–max) per pass, per text and texts/s,
    in units with 3 significant digits; outliers marked, never dropped (R3.5, R3.6)."""
    return _by_phase(summarise(rows).phases, _summary_cells)


def _summary_cells(s: PhaseSummary) -> dict[str, Any]:
    return {
        "timed runs": s.n,
        "failed runs": len(s.failed_runs),
        "median per pass": formats.seconds(s.median),
        "min – max": f"{formats.seconds(s.low)} – {formats.seconds(s.high)}"
        if s.n
        else NOT_RECORDED,
        "median per text": formats.seconds(s.median / s.texts if s.texts and s.n else None),
        "texts/s (median)": formats.rate(s.median_rate),
        f"outliers (above median + {OUTLIER_K:g} × MAD; kept)": ", ".join(
            f"run {s.runs[i]} ({formats.seconds(s.seconds[i])})" for i in s.outliers
        )
        or "none",
    }


def token_table(rows: Rows | Summary) -> pd.DataFrame | str:
    """Per measured phase: median tokens/s and each run's off-label answers (R1.5); or a line."""
    phases = [p for p in summarise(rows).phases if p.phase in MEASURED_PHASES]
    if not any(r.get("tokens_processed") is not None for p in phases for r in p.rows):
        return "No backend of these bundles counted tokens: throughput is per text only."
    return shown(_by_phase(phases, _token_cells))


def _token_cells(p: PhaseSummary) -> dict[str, Any]:
    return {
        "tokens/s (median)": formats.rate(p.tokens_per_second, "tokens/s"),
        "off-label answers per run": ", ".join(map(str, p.off_label)) or None,
    }


def conditions_table(rows: Rows | Summary) -> pd.DataFrame | str:
    """Per measured phase: load, busy processes, CPU threads as run.json recorded them (R2.5)."""
    phases = [p for p in summarise(rows).phases if p.phase in MEASURED_PHASES and p.machine]
    if not phases:
        return "No run recorded the machine's conditions."
    return _by_phase(phases, lambda p: _machine_cells(p.machine))


def _machine_cells(c: VariantConditions) -> dict[str, str]:
    return {"machine": c.text(), "threads": "; ".join(c.threads) or NOT_RECORDED}


def memory_note(rows: Rows | Summary) -> str:
    """What the memory readings cover and do not cover (R3.9); which bundles recorded none."""
    summary = summarise(rows)
    recorded = {p.bundle for p in memory_phases(summary)}
    lines = [_MEMORY_NOTE] if recorded else []
    lines += [
        f"**{md_text(bundle)}**: memory was not recorded (no CUDA device was measured, so the "
        "four memory cells are empty, R4.3); nothing is plotted and nothing is shown as zero."
        for bundle in dict.fromkeys(p.bundle for p in summary.phases)
        if bundle not in recorded
    ]
    return "\n\n".join(lines)


_MEMORY_NOTE = (
    "Readings of PyTorch's caching allocator on the measured device, per phase: the baselines "
    "before the phase and the absolute peaks during it (R3.8). `allocated` is contained in "
    "`reserved`: adding them counts memory twice, so they are drawn side by side, never stacked. "
    "The two peaks may occur at different moments: their difference is not the cache at any one "
    "moment. Allocations of other processes and outside PyTorch's allocator (CUDA context, "
    "libraries' workspaces) are not covered (R3.9). Failed runs are not drawn."
)


def _mib(values: list[float]) -> str:
    found = spread([v / 2**20 for v in values])
    return f"{found[0]:.1f} ({found[1]:.1f}–{found[2]:.1f})" if found else NOT_RECORDED


def memory_table(rows: Rows | Summary) -> pd.DataFrame | None:
    """Median (min–max) of each reading in MiB (2^20 bytes); None when nothing was recorded."""
    phases = memory_phases(rows)
    return (
        _by_phase(phases, lambda p: {_MIB[n]: _mib(p.values(n)) for n in _MIB}) if phases else None
    )


_MIB = {n: f"{n[:-6].replace('_', ' ')}, MiB: median (min–max)" for n in MEMORY_COLUMNS}


def acceptance_table(rows: Rows | Summary) -> pd.DataFrame:
    """Per bundle and variant: protocol.quality's verdict, checks, quality median (min–max) against
    threshold and reference, failing runs (R1.5, R1.6)."""
    records = []
    summary = summarise(rows)
    for bundle, variant in summary.variants():
        runs, acceptance = summary.measured(bundle, variant), summary.acceptance(bundle, variant)
        if not runs:
            continue
        refused = [f"{r['phase']}-{r['run_index']}" for r in runs if not r.get("corpus_accepted")]
        records.append(
            {
                "bundle": bundle,
                "variant": variant,
                "accepted (R1.5)": acceptance.status if acceptance else NOT_RECORDED,
                "runs accepted": f"{acceptance.accepted_runs}/{acceptance.measured_runs}"
                if acceptance
                else NOT_RECORDED,
                **{label: _checked(runs, key) for key, label in _ACCEPTANCE_LABELS.items()},
                "quality: median (min–max)": quality_text(summary, bundle, variant) or NOT_RECORDED,
                "runs not accepted": ", ".join(refused) or "none",
            }
        )
    return table(records, ["bundle", "variant"])


def _checked(runs: Sequence[Mapping[str, Any]], key: str) -> str:
    """``all 10 true``, ``8/10 true`` (or not recorded) for one check over the runs."""
    values = [r.get(key) for r in runs]
    true = sum(1 for v in values if v is True)
    if all(v is None for v in values):
        return NOT_RECORDED
    return f"all {true} true" if true == len(values) else f"{true}/{len(values)} true"


def failures_table(rows: Rows | Summary) -> pd.DataFrame | str:
    """Failed observations with their error and notes (R3.6, R5.8); a sentence when none."""
    records = [
        {
            "bundle": r["bundle"],
            "variant": r["variant_id"],
            "phase": r["phase"],
            "run": r["run_index"],
            "elapsed": "not recorded" if r.get("elapsed_seconds") is None else r["elapsed_seconds"],
            "out of memory (R5.8)": bool(r.get("out_of_memory")),
            "error": r.get("error"),
            "notes": r.get("notes"),
        }
        for r in summarise(rows).rows
        if failed(r)
    ]
    if not records:
        return "No failed observation: every run has a recorded elapsed time and no error."
    return shown(table(records, ["bundle", "variant", "phase", "run"]))


def executed_notebook(out_html: str | os.PathLike[str]) -> Path:
    """Where the executed 90_report behind ``out_html`` is kept: ``notebooks/`` beside it (R5.6)."""
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
    """Execute 90_report.ipynb over ``bundle_dirs`` into a self-contained HTML file, the
    executed notebook kept beside it (R5.6); unlike bundles refused before any kernel (R2.1)."""
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
            request_save_on_cell_execute=False,  # written once: per cell cost ~0.6 s of JSON
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
    exporter = HTMLExporter(
        extra_loaders=[jinja2.DictLoader({"gpubench_report.html.j2": _SELF_CONTAINED})],
        template_file="gpubench_report.html.j2",
        exclude_input=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
        embed_images=True,
    )
    page, _ = exporter.from_notebook_node(
        notebook, resources={"metadata": {"name": "gpubench-nb report"}}
    )
    write_text_atomic(out_html, page)
    return out_html


def render_comparison(
    bundle_dirs: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str] | None = None,
    *,
    allow_mismatch: bool = False,
    ledger: str | os.PathLike[str] | None = None,
) -> Path:
    """`gpubench-nb report`: 90_report over ``bundle_dirs`` into ``out`` (default: beside the first
    bundle), refused before any kernel by the output guard or a bundle being written (R5.6)."""
    bundles = [Path(b) for b in bundle_dirs]
    default = comparison_report_path(bundles)
    target = Path(out) if out else default
    ledgers = [Path(ledger)] if ledger and Path(ledger).is_file() else []  # else refused on read
    check_output(
        target,
        option="--out",
        inputs=[*bundles, *ledgers],
        instead=f"use the default {default} (a bundle's own report.html is written by "
        "`gpubench-nb run`)",
    )
    for bundle in bundles:  # a `run` still writing one: refused, never read half-made (R5.6)
        refuse_if_written(bundle)
        sealed = (bundle / MANIFEST_NAME).is_file()  # a finished bundle: check-bundle first
        if sealed and (problems := verify_bundle(bundle)):
            raise BundleError(
                f"{bundle}: check-bundle refuses it, so its numbers are not what was sealed: "
                f"{'; '.join(problems[:3])}. Fix: restore it from a copy, or run it again",
                rule="R5.6",
            )
    return render_report(bundles, target, allow_mismatch=allow_mismatch, ledger=ledger)

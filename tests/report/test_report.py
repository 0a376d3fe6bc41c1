"""Tests for the report: worked medians and ranges, R2.1 refusal, failures, HTML in Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from matplotlib.collections import PathCollection

from gpubench_nb.errors import BundleError, EconomicsError, ResultsError
from gpubench_nb.protocol.results import COLUMNS
from gpubench_nb.report import economics as costs
from gpubench_nb.report import figures
from gpubench_nb.report import render as report
from gpubench_nb.report.stats import COLD_FIRST_RATIO, anchor_warnings, memory_phases, summarise
from tests.support import economics
from tests.support.golden import LEDGER, MIB, OOM, write_bundle

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture
def gpu_bundle(tmp_path: Path) -> Path:
    return write_bundle(tmp_path, "gpu", gpu=True)


@pytest.fixture
def cpu_bundle(tmp_path: Path) -> Path:
    return write_bundle(tmp_path, "cpu", gpu=False, scale=4.0)


def _group(rows, variant: str, phase: str):
    summary = summarise(rows)
    return summary.of(summary.phases[0].bundle, variant, phase)


def test_rows_keep_empty_cells_as_not_recorded(cpu_bundle: Path) -> None:
    rows = report.load_bundles([cpu_bundle])[0].rows
    assert len(rows) == 45
    load = rows[0]
    assert load["phase"] == "load" and load["expected_ids"] is None  # R4.3: empty, not 0
    assert load["peak_allocated_bytes"] is None and load["gpu_count"] == 0
    assert rows[5]["ids_match"] is True and rows[5]["elapsed_seconds"] == pytest.approx(8.0)
    assert rows[5]["error"] is None and rows[5]["reference_value"] == 0.78  # run files joined


def test_unreadable_csv_is_refused_naming_the_cell(cpu_bundle: Path) -> None:
    path = cpu_bundle / "resultats-bruts.csv"
    path.write_text(path.read_text(encoding="utf-8").replace(",8.0,", ",8 s,", 1), encoding="utf-8")
    with pytest.raises(ResultsError, match="elapsed_seconds"):
        report.load_bundles([cpu_bundle])


def test_summarise_worked_medians_and_ranges(gpu_bundle: Path) -> None:
    rows = report.load_bundles([gpu_bundle])[0].rows
    summary = summarise(rows)
    assert [p.phase for p in summary.phases[:3]] == ["load", "cold", "warm"]  # R3.2 order
    assert [v for _, v in summary.variants()] == ["b1", "b4", "b8"]  # declared, not drawn
    assert len(summary.phases) == 9 and not hasattr(summary.phases[0], "p95")  # R3.5
    b1_cold = _group(rows, "b1", "cold")  # sorted 0.90 1.00 1.05 1.10 2.00
    assert (b1_cold.n, b1_cold.failed_runs) == (5, ())
    assert b1_cold.median == pytest.approx(1.05)
    assert (b1_cold.low, b1_cold.high) == (0.90, 2.00)
    b1_load = _group(rows, "b1", "load")  # sorted 0.40 0.41 0.42 0.43 0.45
    assert b1_load.median == pytest.approx(0.42)
    assert b1_load.median_rate is None  # a load processes no texts
    assert _group(rows, "b4", "warm").median_rate == pytest.approx(1000 / 0.50)
    b8_warm = _group(rows, "b8", "warm")  # the OOM run is counted apart, not a zero (R5.8)
    assert (b8_warm.n, b8_warm.failed_runs, b8_warm.oom_runs) == (4, (5,), 1)
    assert b8_warm.median == pytest.approx((0.30 + 0.31) / 2)  # 0.28 0.30 0.31 0.45
    assert (b8_warm.low, b8_warm.high) == (0.28, 0.45)
    # Median of the four per-run rates: (1000/0.30 + 1000/0.31) / 2, not 1000 / 0.305.
    assert b8_warm.median_rate == pytest.approx((1000 / 0.30 + 1000 / 0.31) / 2)
    assert b8_warm.acceptance.verdict is False  # protocol.quality's rule, read (R1.5)


def test_anchor_warnings_first_cold_run_and_spread(gpu_bundle: Path) -> None:
    found = anchor_warnings(report.load_bundles([gpu_bundle])[0].rows)
    # b1 cold run 1: 2.00 s vs median(1.00, 1.10, 0.90, 1.05) = 1.025 s -> 1.95x > 1.5x.
    # Spreads: b1 cold (2.00-0.90)/1.05 = 1.05; b8 warm (0.45-0.28)/0.305 = 0.56; others < 0.25.
    assert len(found) == 3, found
    assert "b1: cold run 1 took 2 s, 1.95×" in found[0]
    assert "b1 / cold: (max − min) / median = 1.05" in found[1]
    assert "b8 / warm: (max − min) / median = 0.56" in found[2]


def test_first_cold_run_at_exactly_the_ratio_is_not_warned(gpu_bundle: Path) -> None:
    rows = [dict(r) for r in report.load_bundles([gpu_bundle])[0].rows]
    for row in rows:
        if (row["variant_id"], row["phase"], row["run_index"]) == ("b1", "cold", 1):
            row["elapsed_seconds"] = COLD_FIRST_RATIO * 1.025  # the bound itself: not above it
    assert not any("cold run 1" in w for w in anchor_warnings(rows))


def test_failed_row_is_listed_and_not_plotted(gpu_bundle: Path) -> None:
    bundles = report.load_bundles([gpu_bundle])
    rows = report.summary_of(bundles)
    listed = report.failures_table(rows)
    assert list(listed.index) == [(bundles[0].label, "b8", "warm", 5)]
    failed = listed.iloc[0]
    assert failed["elapsed"] == "not recorded" and OOM in failed["error"]
    assert failed["out of memory (R5.8)"] == "true" and "OOM" in failed["notes"]
    fig = figures.elapsed_figure(rows)
    warm = [ax for ax in fig.axes if ax.get_title() == "warm"][0]
    scatters = [c for c in warm.collections if isinstance(c, PathCollection)]
    runs = [c for c in scatters if c.get_sizes()[0] == 18]  # one dot per run
    points = [tuple(xy) for c in runs for xy in c.get_offsets()]
    assert len(points) == 14  # 5 + 5 + 4: the OOM run is not a point
    assert min(y for _, y in points) == pytest.approx(0.28)  # nothing drawn at zero
    # b8's 0.45 s lies beyond median 0.305 + 3 × 1.4826 × MAD 0.015: ringed and named, kept
    rings = [tuple(xy) for c in scatters if c.get_sizes()[0] != 18 for xy in c.get_offsets()]
    assert [y for _, y in rings] == [pytest.approx(0.45)]
    assert [t.get_text() for t in warm.texts] == ["run 2"]
    assert warm.get_yscale() == "linear"  # 0.28-0.83 s: well within 10×
    assert [t.get_text() for t in warm.get_xticklabels()] == ["b1", "b4", "b8\n(1 failed)"]
    assert [ax.get_title() for ax in fig.axes] == ["load", "cold", "warm"]  # facets, R3.2


def test_log_axis_when_one_slow_run_spans_more_than_ten_times(gpu_bundle: Path) -> None:
    """Issue 24 §4: one slow run must not flatten the others against zero."""
    rows = [dict(r) for r in report.load_bundles([gpu_bundle])[0].rows]
    for row in rows:
        if (row["variant_id"], row["phase"], row["run_index"]) == ("b4", "warm", 3):
            row["elapsed_seconds"] = 9.0  # 32× the fastest warm run (0.28 s)
    fig = figures.elapsed_figure(rows)
    warm = [ax for ax in fig.axes if ax.get_title() == "warm"][0]
    assert warm.get_yscale() == "log" and "log scale" in warm.get_ylabel()
    assert [ax.get_yscale() for ax in fig.axes if ax.get_title() != "warm"] == ["linear"] * 2
    assert "run 3" in [t.get_text() for t in warm.texts]  # the slow run is marked
    summary = report.summary_table(rows)
    b4 = summary.loc[("demo-bow-batch · NVIDIA H100 80GB HBM3", "b4", "warm")]
    assert b4["median per pass"] == "510 ms" and b4["min – max"] == "490 ms – 9.00 s"
    assert b4["median per text"] == "510 µs" and b4["texts/s (median)"] == "1,961 texts/s"
    assert b4["outliers (above median + 3 × MAD; kept)"] == "run 3 (9.00 s)"


def test_acceptance_one_row_per_variant(gpu_bundle: Path) -> None:
    table = report.acceptance_table(report.summary_of(report.load_bundles([gpu_bundle])))
    assert [v for _, v in table.index] == ["b1", "b4", "b8"]  # not 30 rows all "true"
    b4 = table.iloc[1]
    assert (b4["accepted (R1.5)"], b4["runs accepted"], b4["IDs match"]) == (
        "accepted",
        "10/10",
        "all 10 true",
    )
    assert b4["runs not accepted"] == "none"
    b8 = table.iloc[2]
    assert (b8["accepted (R1.5)"], b8["runs accepted"], b8["IDs match"]) == (
        "not accepted",
        "0/10",
        "9/10 true",
    )
    assert b8["≥ threshold"] == "0/10 true" and b8["quality: median (min–max)"] == (
        "macro_f1 0.660 < 0.700"
    )
    assert b8["runs not accepted"].startswith("cold-1, cold-2")


def test_memory_side_by_side_and_cpu_sentence(gpu_bundle: Path, cpu_bundle: Path) -> None:
    gpu_rows = report.summary_of(report.load_bundles([gpu_bundle]))
    assert len(memory_phases(gpu_rows)) == 9
    b4_warm = _group(gpu_rows, "b4", "warm")  # peaks 100..140 MiB
    assert b4_warm.median_of("peak_allocated_bytes") == 120 * MIB
    peaks = b4_warm.values("peak_allocated_bytes")
    assert (min(peaks), max(peaks)) == (100 * MIB, 140 * MIB)
    b8_warm = _group(gpu_rows, "b8", "warm")  # runs 1-4 only: the OOM run is not a reading
    assert max(b8_warm.values("peak_allocated_bytes")) == 230 * MIB
    table = report.memory_table(gpu_rows)
    b4 = table.loc[(b4_warm.bundle, "b4", "warm")]
    assert b4["peak allocated, MiB: median (min–max)"] == "120.0 (100.0–140.0)"
    fig = figures.memory_figure(gpu_rows)
    for ax in fig.axes:  # R3.9: every bar starts at zero, four readings side by side
        bars = [p for container in ax.containers for p in getattr(container, "patches", [])]
        assert len(bars) == 4 * 3 and all(bar.get_y() == 0 for bar in bars)
        assert len({round(bar.get_x(), 6) for bar in bars}) == len(bars)
    assert "not covered" in report.memory_note(gpu_rows)
    cpu_rows = report.summary_of(report.load_bundles([cpu_bundle]))
    assert figures.memory_figure(cpu_rows) is None and report.memory_table(cpu_rows) is None
    assert "memory was not recorded" in report.memory_note(cpu_rows)


def test_refuses_unlike_bundles_naming_the_field(tmp_path: Path, gpu_bundle: Path) -> None:
    other = write_bundle(tmp_path, "other-model", gpu=True, model_revision="n" * 64)
    with pytest.raises(BundleError, match=r"R2\.1: .*model_revision differs") as caught:
        report.load_bundles([gpu_bundle, other])
    assert "corpus_revision" not in str(caught.value)
    scope = write_bundle(tmp_path, "end-to-end", gpu=True, scope="end_to_end")
    with pytest.raises(BundleError, match="timer_scope differs"):
        report.load_bundles([gpu_bundle, scope])
    merged = report.load_bundles([gpu_bundle, other], allow_mismatch=True)
    title = report.title_markdown(merged)
    assert "allow_mismatch=True" in title and "model\\_revision" in title  # as Markdown text
    assert len({b.label for b in merged}) == 2  # same experiment and GPU: told apart by folder


def test_merge_of_like_bundles_and_header(gpu_bundle: Path, cpu_bundle: Path) -> None:
    bundles = report.load_bundles([str(gpu_bundle), str(cpu_bundle)])
    labels = [b.label for b in bundles]
    assert labels == ["demo-bow-batch · NVIDIA H100 80GB HBM3", "demo-bow-batch · cpu"]
    assert "allow_mismatch" not in report.title_markdown(bundles)
    header = report.header_table(bundles)
    assert header.loc["timer scope (R3.1)", labels[0]] == "processing"
    assert header.loc["order seed", labels[1]] == 7
    assert header.loc["quality rule (R1.3)", labels[1]] == "macro_f1 ≥ 0.7; drop ≤ 0.01 vs b1"
    assert header.loc["GPUs used", labels[0]] == "1"
    assert header.loc["GPUs visible (not necessarily used, R2.5)", labels[0]] == 2
    assert header.loc["driver", labels[1]] == "—"  # not recorded on CPU, never 0
    # the truncation stands beside the variant's quality on the first table (R2.3)
    b8 = report.decision_frame(report.decision_view_of(bundles)).loc[(labels[0], "b8 (batch=8)")]
    assert b8["quality vs threshold"].endswith("; 3 texts cut, 41 tokens dropped (R2.3)")
    assert header.loc["model revision", labels[0]] == "m" * 16 + "…"  # full in the lock
    assert len(report.summary_of(bundles).phases) == 18


def test_economics_and_faster_but_not_accepted(gpu_bundle: Path) -> None:
    bundles = report.load_bundles([gpu_bundle])
    table = costs.economics_table(bundles)
    # The corpus was accepted on an H100: the B200 package shows its total, no cost (R5.7).
    offer = table.loc[(bundles[0].label, "b200-pair")]
    assert offer["package total (USD)"] == "USD 2,500.05"  # formats.usd, the one USD format
    assert offer["b4: USD per accepted corpus"] == "not measured on this hardware"
    assert offer["measured on this hardware?"].startswith("not measured on this hardware")
    h100 = table.loc[(bundles[0].label, "h100-example")]
    assert h100["b4: USD per accepted corpus"] == "USD 1,234.56"
    assert h100["b8: USD per accepted corpus"].startswith("none")
    text = " ".join(report.decision_view_of(bundles).sentences)
    # b8's median (warm 0.305 s) beats b4's (0.50 s), the fastest accepted: R5.7 says so.
    assert "b8 was faster (median 305 ms) but not accepted (macro_f1 0.660 below the " in text
    assert "run failed: out of memory (1 of 10 runs)): it does not reach the same goal" in text


def test_reads_economics_json_as_written_by_economics(tmp_path: Path, gpu_bundle: Path) -> None:
    offers = tmp_path / "offers.yaml"
    offers.write_text(
        "offers:\n  - id: one\n    provider: test\n    gpu_model: H100\n    gpus_per_lot: 1\n"
        "    package_price_usd_minor: {3: 100, 7: 4200, 30: 9000}\n",
        encoding="utf-8",
    )
    pricing = SimpleNamespace(offers=offers, offer="one", days=7, lots=2, gpus=None)
    economics.write_bundle_economics(gpu_bundle, pricing)  # replaces the golden economics.json
    bundles = report.load_bundles([gpu_bundle])
    row = costs.economics_table(bundles).loc[(bundles[0].label, "one")]
    assert row["package total (USD)"] == "USD 84.00" and row["lots"] == 2  # 4200 x 2 lots (R5.1)
    assert row["b1: USD per accepted corpus"] == "USD 84.00"  # one accepted corpus, not five (R5.3)
    assert row["b8: USD per accepted corpus"].startswith("none")
    text = " ".join(report.decision_view_of(bundles).sentences)
    assert text.count("was faster (median") == 1 and "b8 was faster" in text


def test_break_even_thresholds_as_economics_computes_them(tmp_path: Path, gpu_bundle: Path) -> None:
    offers = tmp_path / "offers.yaml"
    offers.write_text(
        "offers:\n"
        "  - id: one\n    provider: test\n    gpu_model: H100\n    gpus_per_lot: 1\n"
        "    package_price_usd_minor: {3: 100, 7: 4200, 30: 9000}\n"
        "  - id: two\n    provider: test\n    gpu_model: B200\n    gpus_per_lot: 2\n"
        "    package_price_usd_minor: {3: 100, 7: 10000, 30: 9000}\n",
        encoding="utf-8",
    )
    pricing = SimpleNamespace(offers=offers, offer="one", days=7, lots=2, gpus=None)
    economics.write_bundle_economics(gpu_bundle, pricing)
    text = costs.break_even_markdown(report.load_bundles([gpu_bundle]))
    # By hand, totals 8400 and 20000 cents: two needs n with 20000 / n < 8400, so n = 3
    # (20000 / 2 = 10000 is not below 8400). The corpus was accepted on an H100: only "one"
    # measured a corpus, so "two" has no cost per result for "one" to beat (R5.7).
    assert (
        "- two's package (USD 200.00) costs less per accepted corpus than one's single measured "
        "corpus (USD 84.00) once two delivers **3** accepted corpora (a threshold, not a "
        "forecast)."
    ) in text
    assert text.count("costs less per accepted corpus") == 1


def test_break_even_ignores_a_reference_that_measured_nothing(gpu_bundle: Path) -> None:
    # The golden economics.json lists both directions; b200-pair's GPU never ran this corpus.
    text = costs.break_even_markdown(report.load_bundles([gpu_bundle]))
    assert "once b200-pair delivers **3** accepted corpora" in text
    assert "once h100-example delivers" not in text


def test_break_even_says_why_there_is_none(tmp_path: Path, gpu_bundle: Path) -> None:
    economics.write_bundle_economics(gpu_bundle, None)  # no pricing section declared
    text = costs.break_even_markdown(report.load_bundles([gpu_bundle]))
    assert "no pricing section declared" in text


def test_header_only_csv_gives_an_empty_report_not_an_error(cpu_bundle: Path) -> None:
    (cpu_bundle / "resultats-bruts.csv").write_text(",".join(COLUMNS) + "\n", encoding="utf-8")
    bundles = report.load_bundles([cpu_bundle])
    rows = report.summary_of(bundles)
    assert "no row in resultats-bruts.csv yet" in report.title_markdown(bundles)
    assert figures.elapsed_figure(rows) is None and figures.memory_figure(rows) is None
    assert report.summary_table(rows).empty and report.acceptance_table(rows).empty
    assert report.failures_table(rows).startswith("No failed observation")


def test_parse_bundle_dirs_accepts_papermill_text() -> None:
    assert report.parse_bundle_dirs("outputs/a") == ["outputs/a"]
    assert report.parse_bundle_dirs('["outputs/a", "outputs/b"]') == ["outputs/a", "outputs/b"]
    assert report.parse_bundle_dirs(("outputs/a",)) == ["outputs/a"]
    with pytest.raises(BundleError, match="bundle_dirs"):
        report.parse_bundle_dirs([])


def test_papermill_cli_list_parameter_is_parsed(repo_root: Path, tmp_path: Path) -> None:
    # The plain papermill CLI passes `-p bundle_dirs '[...]'` as text: the notebook's first
    # library call must turn it back into a list (prepare-only: no kernel is started).
    from click.testing import CliRunner
    from papermill.cli import papermill as papermill_cli

    out = tmp_path / "prepared.ipynb"
    notebook = str(repo_root / "notebooks" / "90_report.ipynb")
    argv = [notebook, str(out), "--prepare-only", "-p", "bundle_dirs", '["outputs/a", "outputs/b"]']
    result = CliRunner().invoke(papermill_cli, argv)
    assert result.exit_code == 0, result.output
    injected = [
        c
        for c in nbformat.read(out, as_version=4).cells
        if "injected-parameters" in c.metadata.get("tags", [])
    ]
    namespace: dict[str, object] = {}
    exec(injected[0].source, namespace)  # noqa: S102 - papermill's own generated assignment
    assert isinstance(namespace["bundle_dirs"], str)
    assert report.parse_bundle_dirs(namespace["bundle_dirs"]) == ["outputs/a", "outputs/b"]


def test_render_refuses_unlike_bundles_before_any_kernel(tmp_path: Path, gpu_bundle: Path) -> None:
    other = write_bundle(tmp_path, "other", gpu=True, tokenizer_revision="u" * 64)
    with pytest.raises(BundleError, match=r"R2\.1: .*tokenizer_revision differs"):
        report.render_report([gpu_bundle, other], tmp_path / "report.html")
    assert not (tmp_path / "report.html").exists() and not (tmp_path / "notebooks").exists()


@pytest.mark.slow
def test_failed_kernel_keeps_its_notebook_and_names_the_cell(
    tmp_path: Path, gpu_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken.ipynb"
    cells = [
        nbformat.v4.new_code_cell("bundle_dirs = []", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("raise RuntimeError('golden failure')"),
    ]
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(
        nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": kernelspec}), broken
    )
    monkeypatch.setattr(report, "notebook_path", lambda name: broken)
    with pytest.raises(BundleError, match="RuntimeError: golden failure"):
        report.render_report([gpu_bundle], gpu_bundle / "report.html")
    kept = gpu_bundle / "notebooks" / "90_report.ipynb"
    assert "golden failure" in kept.read_text(encoding="utf-8")  # saved before raising
    assert not (gpu_bundle / "report.html").exists()


@pytest.mark.slow
def test_report_command_leaves_sealed_bundles_intact(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from gpubench_nb.cli import main
    from gpubench_nb.protocol import bundle as layout

    gpu = write_bundle(tmp_path, "gpu", gpu=True)
    cpu = write_bundle(tmp_path, "cpu", gpu=False, scale=4.0)
    for sealed in (gpu, cpu):
        layout.write_manifest(sealed)  # as `gpubench-nb run` leaves a finished bundle
    # R5.6: writing into a finished bundle would break its manifest: refused, nothing written.
    assert main(["report", str(gpu), str(cpu), "--out", str(cpu / "sub" / "r.html")]) == 2
    err = capsys.readouterr().err
    assert "R5.6" in err and f"inside the finished bundle {cpu}" in err
    assert not (cpu / "sub").exists()
    # These hand-made bundles are not what `run` seals, so check-bundle refuses them and so does
    # `report` (R5.6): named, nothing written, the manifests untouched.
    assert main(["report", str(gpu), str(cpu)]) == 2
    assert "check-bundle refuses it" in capsys.readouterr().err
    assert layout.verify_manifest(gpu) == [] and layout.verify_manifest(cpu) == []
    assert not (tmp_path / "report-gpu+cpu.html").exists()
    for sealed in (gpu, cpu):
        (sealed / layout.MANIFEST_NAME).unlink()  # unsealed: reported as they are
    # The default path is beside the first bundle, named after both.
    assert main(["report", str(gpu), str(cpu)]) == 0
    out = tmp_path / "report-gpu+cpu.html"
    said = capsys.readouterr().out
    assert f"report written: {out}" in said and out.is_file()
    kept = tmp_path / "notebooks" / "90_report-report-gpu+cpu.ipynb"  # said, not left unexplained
    assert f"its notebook:   {kept} (what made it" in said and kept.is_file()
    assert not (gpu / layout.MANIFEST_NAME).exists()  # nothing sealed on the way


def test_notebook_is_a_thin_shell_without_outputs(repo_root: Path) -> None:
    notebook = nbformat.read(repo_root / "notebooks" / "90_report.ipynb", as_version=4)
    tagged = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and "bundle_dirs" in tagged[0].source
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code)
    assert not any(re.search(r"^\s*(def|class|for|while) ", c.source, re.M) for c in code)


def test_ledger_markdown_shows_the_count_and_what_was_left_out(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps(LEDGER), encoding="utf-8")
    text = costs.ledger_markdown(str(path))
    assert "2 distinct accepted corpora so far" in text
    assert "Distinct accepted corpora: 2" in text
    assert "`outputs/x`: another machine" in text
    assert costs.ledger_markdown("") == ""
    path.write_text("{}", encoding="utf-8")
    with pytest.raises(EconomicsError, match=r"R5\.3: .*not a ledger"):
        costs.ledger_markdown(str(path))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    gpu = write_bundle(root, "gpu", gpu=True)
    cpu = write_bundle(root, "cpu", gpu=False, scale=4.0)
    ledger = root / "ledger.json"
    ledger.write_text(json.dumps(LEDGER), encoding="utf-8")
    return report.render_report([gpu, cpu], gpu / "report.html", ledger=ledger)


@pytest.mark.slow
def test_render_report_writes_self_contained_html(rendered: Path) -> None:
    html = rendered.read_text(encoding="utf-8")
    assert (rendered.parent / "notebooks" / "90_report.ipynb").is_file()
    assert not re.search(r"""<(script|img|link)[^>]+(src|href)=["']https?:""", html)
    assert html.count('src="data:image/png;base64,') == 4  # frontier, elapsed, throughput, memory
    images = re.findall(r"<img[^>]*>", html)
    alts = [m.group(1) for tag in images if (m := re.search(r'alt="([^"]+)"', tag))]
    assert len(alts) == 4 and "No description has been provided" not in html  # accessible
    assert alts[0].startswith("The options as a frontier: each bundle and variant placed by")
    assert alts[1].startswith("Elapsed time per variant and phase, one facet per phase")
    # the plain route: nbconvert's own HTML export of the executed notebook finds every alt
    import nbformat
    from nbconvert import HTMLExporter

    kept = nbformat.read(rendered.parent / "notebooks" / "90_report.ipynb", as_version=4)
    plain, _ = HTMLExporter().from_notebook_node(kept)
    assert plain.count("<img") == 4 and "No description has been provided" not in plain
    # its table and sentence: the CPU bundle is not priced, so time orders, where the rule does
    assert 'id="frontier-table"' in html and "answers changed (first kept run)" in html
    assert '<p class="frontier-sentence">On the frontier (median warm time per corpus' in html
    assert "report.load_bundles" not in html  # inputs hidden
    assert "Traceback" not in html
    assert 'data-mime-type="application/vnd.jupyter.stderr"' not in html  # no warning printed


@pytest.mark.slow
def test_report_in_headless_chromium(rendered: Path, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (`.ci/run` installs it)")
    flags = [
        str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]  # fmt: skip
    shot = tmp_path / "report.png"
    browser = subprocess.run(
        [*flags, "--window-size=1280,6000", "--hide-scrollbars", f"--screenshot={shot}",
         "--dump-dom", rendered.as_uri()],
        capture_output=True, text=True, timeout=90, check=True,
    )  # fmt: skip
    dom = browser.stdout
    assert shot.stat().st_size > 20_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    kept = Path(str(rendered.parent / "report-screenshot.png"))
    shutil.copyfile(shot, kept)  # beside the report, for a person to look at
    assert len(re.findall(r"<img[^>]+src=\"data:image/png;base64,", dom)) == 4
    assert "Traceback" not in dom
    tables = re.findall(r"<table.*?</table>", dom, re.S)
    # decision (first), frontier, header, conditions, summary, memory, acceptance, failures,
    # economics
    assert len(tables) == 9 and 'id="decision-table"' in tables[0]
    assert 'id="frontier-table"' in tables.pop(1)
    bodies = [len(re.findall(r"<tr", t.split("<tbody>")[1])) for t in tables]
    assert bodies[0] == 6  # 2 bundles x 3 variants
    assert bodies[2] == 12  # 2 bundles x 3 variants x (cold, warm): the machine (R2.5)
    assert bodies[3] == 18  # 2 bundles x 3 variants x 3 phases
    assert bodies[5] == 6  # 2 bundles x 3 variants: one acceptance row each
    assert bodies[6] == 1  # the OOM run, listed with its note
    assert bodies[7] == 4  # 2 bundles x 2 offers
    assert "outlier: run 2 (kept, R3.6)" in tables[0] and "run 2 (450 ms)" in tables[3]
    assert "Cheapest accepted option" in dom and "Verdict withheld" in dom  # the CPU's b1 ran
    assert "heavy load" in dom and "with threads not fixed" in dom  # under heavy load (R2.5)
    assert "once b200-pair delivers" in dom and "threshold, not a forecast" in dom
    assert "out of memory" in tables[6] and "memory was not recorded" in dom
    assert "b8 was faster (median 305 ms) but not accepted" in dom
    assert "The rental ledger" in dom and "USD 617.28 per accepted corpus" in dom
    assert not re.search(r"\d\.\d+e[+-]\d", dom)  # no scientific notation anywhere


FIRST_SCREEN_PROBE = """<script>(function () {
  var t = document.getElementById("decision-table"), r = t && t.getBoundingClientRect();
  document.body.setAttribute("data-decision-probe", JSON.stringify(r ? {
    top: r.top, bottom: r.bottom, left: r.left, right: r.right,
    viewport_width: window.innerWidth, viewport_height: window.innerHeight,
    scroll_y: window.scrollY} : null));
})();</script>"""


def first_screen_probe(html_path: Path, profile: Path) -> dict | None:
    """The decision table's box in a 1400x900 headless window, measured by the browser itself."""
    html = html_path.read_text(encoding="utf-8")
    end = html.rindex("</body>")
    probe = html_path.with_name(f"{html_path.stem}-probe.html")
    probe.write_text(html[:end] + FIRST_SCREEN_PROBE + html[end:], encoding="utf-8")
    browser = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--window-size=1400,900", "--hide-scrollbars",
         "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=90, check=True,
    )  # fmt: skip
    found = re.search(r'data-decision-probe="([^"]*)"', browser.stdout)
    assert found, "the probe script did not run"
    return json.loads(found.group(1).replace("&quot;", '"'))


@pytest.mark.slow
def test_decision_table_is_visible_without_scrolling(rendered: Path, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (`.ci/run` installs it)")
    shot = rendered.parent / "report-first-screen.png"  # kept for a person to look at
    subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={tmp_path / 'shot'}", "--window-size=1400,900", "--hide-scrollbars",
         f"--screenshot={shot}", rendered.as_uri()],
        capture_output=True, text=True, timeout=90, check=True,
    )  # fmt: skip
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    box = first_screen_probe(rendered, tmp_path / "probe")
    assert box is not None, "no element with id decision-table"
    assert box["viewport_width"] == 1400 and box["scroll_y"] == 0
    # The whole table inside the first screen: below the top edge, above the fold, no
    # horizontal overflow. The viewport height is the browser's own (the window minus chrome).
    assert box["top"] >= 0 and box["left"] >= 0
    assert box["bottom"] <= min(box["viewport_height"], 900), box
    assert box["right"] <= box["viewport_width"], box
    # Issue 24 §4, §2: that first screen answers: quality against its threshold, the machine's
    # load during the warm runs, and the banner saying the variants ran under uneven load.
    html = rendered.read_text(encoding="utf-8")
    table = re.search(r'<table[^>]*id="decision-table".*?</table>', html, re.S).group(0)
    assert "quality vs threshold" in table and "machine during warm runs" in table
    assert "macro_f1 0.780 ≥ 0.700" in table and "macro_f1 0.660 &lt; 0.700" in table
    assert "load 3.10, max 3.10 (2 cores); others busy 5/5 runs (python3)" in table
    assert "810 µs per text; 1,235 texts/s" in table  # per text and texts/s beside per corpus
    assert "Measured under uneven conditions (R2.5): heavy load" in html


@pytest.mark.slow
def test_first_screen_probe_fails_when_the_table_is_below_the_fold(
    rendered: Path, tmp_path: Path
) -> None:
    """The check above can fail: push the same table down by one screen and it must see it."""
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (`.ci/run` installs it)")
    pushed = tmp_path / "pushed.html"
    html = rendered.read_text(encoding="utf-8")
    pushed.write_text(
        html.replace('<table border="1" class="dataframe" id="decision-table">',
                     '<div style="height:1000px"></div>'
                     '<table border="1" class="dataframe" id="decision-table">', 1),
        encoding="utf-8",
    )  # fmt: skip
    box = first_screen_probe(pushed, tmp_path / "probe")
    assert box is not None and box["bottom"] > box["viewport_height"]


def test_a_throttled_or_low_clock_run_is_flagged(gpu_bundle: Path) -> None:
    """A run whose timed pass NVML saw throttled (or well below the maximum clock) is named
    in the report's warnings, its time kept (issue 23 §3: the H200 ran at a median 1507 MHz
    of 1980 while environment.json said 1980)."""
    from gpubench_nb.report.render import warnings_markdown
    from gpubench_nb.report.stats import clock_warnings

    path = gpu_bundle / "runs" / "b8" / "warm-2" / "run.json"
    run = json.loads(path.read_text(encoding="utf-8"))
    run["gpu_telemetry"] = {
        "observable": True,
        "energy_joules": 41.5,
        "flags": ["low clock: median SM clock 1507 MHz is below 85% of the maximum 1980 MHz"],
    }
    path.write_text(json.dumps(run), encoding="utf-8")
    rows = report.load_bundles([gpu_bundle])[0].rows
    found = clock_warnings(rows)
    assert len(found) == 1
    assert "/ b8 / warm run 2: low clock: median SM clock 1507 MHz" in found[0]
    assert found[0] in warnings_markdown(report.summary_of(report.load_bundles([gpu_bundle])))
    assert [
        r["energy_joules"]
        for r in rows
        if r["variant_id"] == "b8" and r["phase"] == "warm" and r["run_index"] == 2
    ] == [41.5]


def test_run_conditions_show_the_clocks_sampled_during_the_pass() -> None:
    """Issue 24's per-run conditions read issue 23's gpu_telemetry: the SM clock during the
    pass, the reasons seen and the throttle flag appear beside the load."""
    from gpubench_nb.report.conditions import run_conditions

    run = {
        "gpu_telemetry": {
            "observable": True,
            "sm_clock_mhz": {"min": 1215, "median": 1507, "max": 1980},
            "max_sm_clock_mhz": 1980,
            "clock_event_reasons": ["sw_power_cap"],
            "throttled": True,
            "energy_joules": 41.5,
        }
    }
    text = run_conditions(run).text()
    assert 'sm_clock_mhz: {"max": 1980, "median": 1507, "min": 1215}' in text
    assert 'clock_event_reasons: ["sw_power_cap"]' in text and "throttled: true" in text
    assert run_conditions({"gpu_telemetry": {"observable": False}}).gpu == ()
    assert run_conditions(run).throttled  # a throttled pass withholds the verdict (R2.5)

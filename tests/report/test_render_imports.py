"""The report's figures have one home, report.figures, which the 90_report notebook imports
itself: report.render, imported by `run` and `report` to start that kernel, loads no matplotlib."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat

from gpubench_nb.report import figures, render

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "90_report.ipynb"
FIGURES = ("elapsed_figure", "throughput_figure", "memory_figure")


def test_render_imports_no_matplotlib_in_a_fresh_process() -> None:
    code = "import sys, gpubench_nb.report.render\nprint('matplotlib' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_notebook_draws_each_figure_from_report_figures() -> None:
    source = "\n".join(c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells)
    assert "from gpubench_nb.report import figures" in source
    for name in FIGURES:
        assert f"figures.{name}(summary)" in source and callable(getattr(figures, name))
        assert not hasattr(render, name)  # one home: no second name for the same figure

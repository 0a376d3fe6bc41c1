"""The notebooks stay thin shells: a tagged parameters cell, library calls, no stored outputs."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
STAGES = ("00_environment", "10_measure", "20_quality", "30_economics", "90_report", "memory_mlp")


def test_every_stage_notebook_exists() -> None:
    assert sorted(path.stem for path in NOTEBOOKS) == sorted(STAGES)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_thin_and_committed_without_outputs(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    tagged = [cell for cell in code if "parameters" in cell.metadata.get("tags", [])]
    assert len(tagged) == 1, "papermill needs exactly one cell tagged `parameters`"
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, "outputs are not committed"
        source = "\n".join(  # IPython magics are not Python
            line for line in cell.source.splitlines() if not line.lstrip().startswith("%")
        )
        tree = ast.parse(source)
        for node in ast.walk(tree):
            # Thick library, thin shells: logic lives in gpubench_nb, not in cells.
            assert not isinstance(node, ast.FunctionDef | ast.ClassDef | ast.For | ast.While)


# issue 21 §3: each notebook calls its own module of gpubench_nb.steps, side by side.
STEP_MODULES = {
    "00_environment": "environment",
    "10_measure": "measure",
    "20_quality": "quality",
    "30_economics": "economics",
    "90_report": "report",
    "memory_mlp": "memory",
}


@pytest.mark.parametrize("stage", STAGES)
def test_notebook_calls_its_step_module(stage: str) -> None:
    import importlib

    notebook = nbformat.read(NOTEBOOKS[0].parent / f"{stage}.ipynb", as_version=4)
    source = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    module = STEP_MODULES[stage]
    assert f"from gpubench_nb.steps import {module}" in source
    assert callable(importlib.import_module(f"gpubench_nb.steps.{module}").step)


def test_the_shipped_notebooks_are_the_source_folder() -> None:
    """Package data gpubench_nb.notebooks is the top-level notebooks/ folder (issue 21 §1)."""
    from gpubench_nb.kernel import STAGE_NOTEBOOKS, notebooks_dir

    assert sorted(STAGE_NOTEBOOKS) == sorted(f"{stage}.ipynb" for stage in STAGES)
    for name in STAGE_NOTEBOOKS:
        shipped = (notebooks_dir() / name).read_bytes()
        assert shipped == (NOTEBOOKS[0].parent / name).read_bytes()

"""What the benchmarks share: a copy of the demo experiment, one-cell notebooks, papermill runs.

Imported by ``run_floor.py`` and ``post_run_steps.py`` (run as scripts: this folder is first on
``sys.path``)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def copy_demo_experiment(tmp: Path) -> Path:
    """The demo YAML, its offers and corpus copied under ``tmp``; the YAML's path."""
    (tmp / "parameters").mkdir()
    for name in ("demo.yaml", "offers.yaml"):
        shutil.copy(ROOT / "parameters" / name, tmp / "parameters" / name)
    shutil.copytree(ROOT / "data" / "debian-sections", tmp / "data" / "debian-sections")
    return tmp / "parameters" / "demo.yaml"


def one_cell_notebook(path: Path, source: str) -> Path:
    """A notebook of one code cell ``source`` on the ``python3`` kernel, written to ``path``."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source)]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, path)
    return path


def papermill_seconds(notebook: Path, out: Path) -> float:
    """Wall seconds of ``notebook`` executed by papermill in a kernel started as `run` does."""
    from gpubench_nb.kernel import papermill_module, papermill_options

    papermill = papermill_module()
    start = time.perf_counter()
    papermill.execute_notebook(
        str(notebook), str(out), kernel_name="python3", progress_bar=False, **papermill_options()
    )
    return time.perf_counter() - start

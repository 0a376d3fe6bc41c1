"""No "TqdmWarning: IProgress not found" in a kernel without ipywidgets (issue 25).

transformers imports ``tqdm.auto``; in a Jupyter kernel without ipywidgets that import warned
into every executed notebook. Importing ``gpubench_nb.engine`` first keeps tqdm's console bar
(which works in a kernel) without the warning. The control cell shows that the warning is real
in this environment, so the test can fail.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import papermill
import pytest

from gpubench_nb.kernel import papermill_options

WARNING = "IProgress not found"


def _outputs(tmp_path: Path, name: str, source: str) -> str:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source)]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, path)
    papermill.execute_notebook(
        str(path),
        str(tmp_path / f"{name}-out.ipynb"),
        kernel_name="python3",
        progress_bar=False,
        **papermill_options(),
    )
    done = nbformat.read(tmp_path / f"{name}-out.ipynb", as_version=4)
    return "".join(str(o.get("text", "")) for c in done.cells for o in c.get("outputs", []))


@pytest.mark.slow
def test_a_kernel_importing_the_engine_then_transformers_prints_no_tqdm_warning(
    tmp_path: Path,
) -> None:
    quiet = _outputs(
        tmp_path,
        "engine-first",
        "import gpubench_nb.engine\nimport transformers.utils.logging\n"
        "from tqdm.auto import tqdm\nlist(tqdm(range(3), disable=True))",
    )
    assert WARNING not in quiet
    if importlib.util.find_spec("ipywidgets") is None:  # the control: the warning is real here
        assert WARNING in _outputs(tmp_path, "bare", "import transformers.utils.logging")

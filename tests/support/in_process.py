"""The stage notebooks' calls made in this process instead of a papermill kernel each.

For tests of what the pipeline writes, where a fresh kernel per run is not what is tested: a
kernel start is about 2 s on a quiet machine, far more on a busy one. The end-to-end tests
(tests/pipeline/test_pipeline.py, the concurrent runs, the wheel install, the campaigns) keep
their kernels. Each stand-in makes the call its notebook makes (gpubench_nb.steps).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpubench_nb.pipeline import orchestrate


def run_step(name: str, output: Path, parameters: dict[str, Any], timeout: int) -> None:
    """orchestrate.execute_notebook's stand-in: the notebook ``name``'s call, made here."""
    from gpubench_nb.steps import economics, environment, measure, quality

    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("{}", encoding="utf-8")  # stands for the executed notebook
    experiment, bundle = parameters["experiment"], parameters["bundle_dir"]
    if name == "10_measure.ipynb":
        run = (parameters["variant_id"], parameters["phase"], parameters["run_index"])
        measure.step(experiment, *run, bundle)
    elif name == "00_environment.ipynb":
        environment.step(experiment, bundle)
    elif name == "20_quality.ipynb":
        quality.step(experiment, bundle)
    elif name == "30_economics.ipynb":
        economics.step(experiment, bundle, parameters.get("pricing"))


def fake_report(bundle_dir: Path) -> Path:
    path = bundle_dir / "report.html"
    path.write_text("<html>report</html>\n", encoding="utf-8")
    return path


@contextlib.contextmanager
def steps_in_process(*, real_report: bool = False) -> Iterator[None]:
    """run_experiment's notebooks as in-process calls; the report (90_report, one kernel) is
    rendered for real with ``real_report``, else stood in for by :func:`fake_report`."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(orchestrate, "execute_notebook", run_step)
        if not real_report:
            patch.setattr(orchestrate, "_render_report", fake_report)
        yield

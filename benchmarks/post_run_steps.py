"""The fixed cost of the steps after the runs, each side by side with its floor (issue 25).

After the scheduled runs, ``gpubench-nb run`` executes 20_quality and 30_economics in fresh
kernels, then 90_report and its HTML export; ``gpubench-nb report`` does the last of these in a
fresh process. Their cost does not depend on how many runs there were, so it is paid in full by
every demo. On a finished bundle of the demo experiment (bow, 1,000 texts, 30 runs), made in a
temporary folder by the real pipeline (or copied with ``--bundle``), interleaved ``--repeats``
times each (ABBA), in this process as ``gpubench-nb run`` does it:

    empty          papermill, one cell ``pass``: a kernel started and stopped
    quality floor  papermill, one cell ``import pandas, yaml`` (it reads YAML, shows a table)
    20_quality     the step's notebook, as the pipeline runs it
    30_economics   the step's notebook (its floor is the quality floor: the same imports)
    report floor   papermill of ``%matplotlib inline; import pandas, matplotlib.pyplot`` and
                   its HTML export (the imports a report with figures and tables cannot avoid)
    report         render_report: 90_report.ipynb and the export to report.html

and, in fresh processes, ``gpubench-nb report BUNDLE`` against a fresh process doing the report
floor. Then where each difference goes: the kernel's own time per cell (papermill's metadata),
the rest (kernel start and stop, the parent's saves), and a fresh interpreter timing each
step's imports apart from its work, with the heavy packages it loaded. No assertion: a ratio on
a shared machine is a reading, not a test.

    python benchmarks/post_run_steps.py [--repeats 3] [--bundle outputs/demo-bow-batch]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from demo_kernels import copy_demo_experiment, one_cell_notebook, papermill_seconds  # noqa: E402

HEAVY = ("pandas", "matplotlib", "scipy", "sklearn", "nbconvert", "papermill", "jsonschema")
QUALITY_FLOOR = "import pandas, yaml"
REPORT_FLOOR = "%matplotlib inline\nimport pandas, matplotlib.pyplot"

# In a fresh interpreter: one step's imports timed apart from its work (argv: step, yaml, bundle).
_STEP_BREAKDOWN = r"""
import json, sys, time
step, experiment, bundle = sys.argv[1:4]
t0 = time.perf_counter()
if step == "report":
    import IPython.display, matplotlib_inline.backend_inline  # what %matplotlib inline loads
t1 = time.perf_counter()
import importlib
module = importlib.import_module(f"gpubench_nb.steps.{step}")
t2 = time.perf_counter()
if step == "report":
    from gpubench_nb.report import figures, render
    bundles, rows = module.step([bundle])
    t3 = time.perf_counter()
    render.decision_html(render.decision_view_of(bundles))
    for name in ("elapsed_figure", "throughput_figure", "memory_figure"):
        getattr(figures, name)(rows)
else:
    module.step(experiment, bundle)
t4 = time.perf_counter()
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[4].split(",")))
spent = {"IPython display": t1 - t0, "import the step": t2 - t1, "the step's work": t4 - t2}
if step == "report":
    spent["  of which load bundles"] = t3 - t2
    spent["  of which decision table, figures (no PNG)"] = t4 - t3
print(json.dumps({"spent": spent, "heavy": heavy}))
"""

# In a fresh interpreter: `gpubench-nb report`'s stages, read from a profile of the command's
# own call so that nothing is imported in another order than the command's (argv: bundle, out).
_REPORT_BREAKDOWN = r"""
import cProfile, json, pstats, sys, time
t0 = time.perf_counter()
import gpubench_nb.report.render as comparison  # what the CLI imports for `report`
spent = {"import the report's modules": time.perf_counter() - t0}
profile = cProfile.Profile()
start = time.perf_counter()
profile.runcall(comparison.render_comparison, [sys.argv[1]], sys.argv[2])
spent["render the report (all, profiled)"] = time.perf_counter() - start
stages = {  # (file ending, function): label; cumulative seconds, nested where they nest
    ("papermill/__init__.py", "<module>"): "import papermill",
    ("nbconvert/__init__.py", "<module>"): "import nbconvert",
    ("nbformat/__init__.py", "<module>"): "  of which nbformat (jsonschema)",
    ("rfc3987_syntax/syntax_helpers.py", "<module>"): "  of which the unused IRI grammar",
    ("report/bundles.py", "load_bundles"): "load bundles (refusal before any kernel)",
    ("papermill/execute.py", "execute_notebook"): "90_report kernel (papermill)",
    ("papermill/iorw.py", "write_ipynb"): "  of which writing the notebook",
    ("nbformat/__init__.py", "read"): "read the executed notebook back",
    ("nbconvert/exporters/html.py", "from_notebook_node"): "HTML export",
}
found = pstats.Stats(profile).stats.items()
for (ending, name), label in stages.items():
    seconds = [row[3] for (path, _, function), row in found if function == name
               and path.endswith(ending)]
    if seconds:
        spent[label] = sum(seconds)
print(json.dumps(spent))
"""

# In a fresh interpreter: the floor of `gpubench-nb report` (argv: floor notebook, out folder).
_REPORT_FLOOR_PROCESS = r"""
import sys
sys.modules["rfc3987_syntax"] = None  # a grammar jsonschema builds for nothing: avoidable
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from post_run_steps import _report_floor
_report_floor(Path(sys.argv[1]), Path(sys.argv[2]))
"""


def _papermill(notebook: Path, out: Path) -> None:
    papermill_seconds(notebook, out)


def _report_floor(notebook: Path, out: Path) -> None:
    """The floor notebook executed, then exported to HTML as the report is."""
    import nbformat
    from nbconvert import HTMLExporter

    _papermill(notebook, out / "floor-report.ipynb")
    html, _ = HTMLExporter(exclude_input=True).from_notebook_node(
        nbformat.read(out / "floor-report.ipynb", as_version=4)
    )
    (out / "floor-report.html").write_text(html, encoding="utf-8")


def _prepare(tmp: Path, bundle: Path | None) -> tuple[Path, Path]:
    """A finished, unsealed bundle of a copy of the demo experiment: (experiment, bundle)."""
    from gpubench_nb.protocol import bundle as layout
    from gpubench_nb.protocol.experiment import load_experiment

    experiment = copy_demo_experiment(tmp)
    exp = load_experiment(experiment)
    target = layout.bundle_dir_for(tmp / "outputs", exp.experiment_id)
    if bundle is not None:
        shutil.copytree(bundle, target)
    else:  # the real chain: build the model, 30 runs, quality, economics, report
        from gpubench_nb.engine.backends import build_model
        from gpubench_nb.pipeline.orchestrate import run_experiment

        print("making the demo bundle (30 runs, about 2-3 minutes on 2 cores)...", flush=True)
        build_model(exp)
        run_experiment(experiment, output_dir=tmp / "outputs")
    # A notebook step never writes into a sealed bundle (R5.6): time the steps on it unsealed.
    (target / layout.MANIFEST_NAME).unlink(missing_ok=True)
    return experiment, target


def _cells(executed: Path) -> tuple[float, list[tuple[float, str]]]:
    """papermill's duration of the whole notebook and of each code cell (last source line)."""
    nb = json.loads(executed.read_text(encoding="utf-8"))
    cells = [
        (c["metadata"]["papermill"].get("duration") or 0.0, "".join(c["source"]).splitlines()[-1])
        for c in nb["cells"]
        if c["cell_type"] == "code"
    ]
    return nb["metadata"]["papermill"].get("duration") or 0.0, cells


def _fresh(code: str, *argv: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code, *argv],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bundle", type=Path, help="a finished demo bundle to copy (faster)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from gpubench_nb.pipeline.orchestrate import execute_notebook
    from gpubench_nb.report.render import render_report

    with tempfile.TemporaryDirectory(prefix="gpubench-post-run-") as name:
        tmp = Path(name)
        cwd = os.getcwd()
        os.chdir(tmp)  # the kernels' working folder, as for a user in their project
        try:
            experiment, bundle = _prepare(tmp, args.bundle and args.bundle.resolve())
            params = {"experiment": str(experiment), "bundle_dir": str(bundle)}
            empty = one_cell_notebook(tmp / "empty.ipynb", "pass")
            quality_floor = one_cell_notebook(tmp / "quality-floor.ipynb", QUALITY_FLOOR)
            report_floor = one_cell_notebook(tmp / "report-floor.ipynb", REPORT_FLOOR)
            executed = tmp / "executed"
            steps = {
                "empty": lambda: _papermill(empty, tmp / "out-empty.ipynb"),
                "quality floor": lambda: _papermill(quality_floor, tmp / "out-qf.ipynb"),
                "20_quality": lambda: execute_notebook(
                    "20_quality.ipynb", executed / "20_quality.ipynb", params, 600
                ),
                "30_economics": lambda: execute_notebook(
                    "30_economics.ipynb", executed / "30_economics.ipynb", params, 600
                ),
                "report floor": lambda: _report_floor(report_floor, tmp),
                "report": lambda: render_report([bundle], bundle / "report.html"),
                "report command floor": lambda: subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        _REPORT_FLOOR_PROCESS,
                        str(report_floor),
                        str(tmp),
                        str(Path(__file__).parent),
                    ],
                    check=True,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                ),  # fmt: skip
                "report command": lambda: subprocess.run(
                    [
                        str(Path(sys.executable).with_name("gpubench-nb")),
                        "report",
                        str(bundle),
                        "--out",
                        str(tmp / "report-command.html"),
                    ],
                    check=True,
                    capture_output=True,
                ),  # fmt: skip
            }
            for what in steps:
                steps[what]()  # one untimed pass of each: files cached, imports compiled
            times: dict[str, list[float]] = {what: [] for what in steps}
            for i in range(args.repeats):
                order = list(steps) if i % 2 == 0 else list(reversed(steps))  # ABBA
                for what in order:
                    times[what].append(_timed(steps[what]))
            cells = {
                "20_quality": _cells(executed / "20_quality.ipynb"),
                "30_economics": _cells(executed / "30_economics.ipynb"),
                "report": _cells(bundle / "notebooks" / "90_report.ipynb"),
            }
            heavy = ",".join(HEAVY)
            inside = {
                step: _fresh(_STEP_BREAKDOWN, step, str(experiment), str(bundle), heavy)
                for step in ("quality", "economics", "report")
            }
            command = _fresh(_REPORT_BREAKDOWN, str(bundle), str(tmp / "report-breakdown.html"))
        finally:
            os.chdir(cwd)
    _print(times, cells, inside, command, args.repeats)


def _print(times, cells, inside, command, repeats) -> None:
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; {repeats} each")
    print(f"{'':<24}{'median s':>10}  all (s)")
    for what, values in times.items():
        print(f"{what:<24}{med[what]:>10.2f}  {' '.join(f'{v:.2f}' for v in values)}")
    floors = {
        "20_quality": "quality floor",
        "30_economics": "quality floor",
        "report": "report floor",
        "report command": "report command floor",
    }
    print()
    for what, floor in floors.items():
        print(
            f"{what} / {floor}: {med[what] / med[floor]:.2f}x; "
            f"difference {med[what] - med[floor]:.2f} s"
        )
    total = sum(med[k] for k in ("20_quality", "30_economics", "report"))
    print(f"after the runs, in `gpubench-nb run`: {total:.2f} s (20 + 30 + report)")
    print("\nwhere it goes, inside each kernel (papermill's durations, last run):")
    for what, (duration, per_cell) in cells.items():
        spent = sum(d for d, _ in per_cell)
        print(
            f"  {what}: notebook {duration:.2f} s, cells {spent:.2f} s, kernel start/stop and "
            f"saves {med[what] - spent:.2f} s (of the median wall)"
        )
        for seconds, line in sorted(per_cell, reverse=True)[:4]:
            print(f"    {seconds:6.3f}  {line[:70]}")
    print("\neach step in a fresh interpreter, imports apart from work (s):")
    for step, found in inside.items():
        parts = ", ".join(f"{k.strip()} {v:.3f}" for k, v in found["spent"].items())
        print(f"  {step}: {parts}; heavy packages loaded: {', '.join(found['heavy']) or 'none'}")
    print("\n`gpubench-nb report`'s process, stage by stage (s):")
    for label, seconds in command.items():
        print(f"  {label:<44}{seconds:>8.3f}")


if __name__ == "__main__":
    main()

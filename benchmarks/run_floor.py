"""A scheduled run's wall time against its floor, side by side in one run (issue 25).

Every scheduled run is a fresh kernel (R3.7), so its fixed cost is paid dozens of times per
experiment. The floor is what no run can avoid: a papermill kernel started and stopped, plus
``import torch, transformers``. Interleaved, ``--repeats`` times each, on a bundle of the demo
experiment (bow, 1,000 texts) prepared in a temporary folder:

    empty   papermill, one cell ``pass``
    floor   papermill, one cell ``import torch, transformers``
    cold    `run_one` of a cold run (10_measure.ipynb), as `gpubench-nb run` does it
    warm    `run_one` of a warm run (its declared warm-up passes, then the measured one)

Then, where the difference goes: the same warm run's ``execute_run`` in a fresh ``python``
process with the stages timed (imports, declaration + corpus, lock checks, load, passes,
environment capture, writes). Prints medians and the ratios run/floor (target <= 1.3). No
assertion: a ratio on a shared machine is a reading, not a test.

    python benchmarks/run_floor.py [--repeats 3] [--variant b8]
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

TARGET = 1.3

# Run in a fresh interpreter: execute_run with its stages wrapped in timers.
_BREAKDOWN = r"""
import json, sys, time
t0 = time.perf_counter()
import torch, transformers  # the floor's imports, timed apart from ours
t1 = time.perf_counter()
import gpubench_nb.pipeline.run as run
import gpubench_nb.engine.backends  # what the run imports to load a model
t2 = time.perf_counter()
spent = {"import torch, transformers": t1 - t0, "import gpubench_nb": t2 - t1}

def timed(owner, name, label):
    inner = getattr(owner, name)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - start
    setattr(owner, name, wrapper)

import gpubench_nb.protocol.experiment as experiment
timed(run, "capture_environment", "environment capture (start)")
timed(run, "finish_environment", "environment capture (end)")
timed(run, "_load", "fingerprint + model load")
timed(run, "_passes", "warm-up + measured passes")
timed(run, "require_frozen", "lock check (declaration, corpus)")
timed(run, "write_json_atomic", "run.json writes")
import gpubench_nb.protocol.corpus as corpus
timed(corpus, "load_experiment_corpus", "corpus read + check")
timed(experiment, "load_experiment", "experiment YAML read + check")
import gpubench_nb.engine.measure as measure
timed(measure, "measure_pass", "passes: measure_pass total")
import gpubench_nb.engine.backends.bow as bow
t3 = time.perf_counter()
record = run.execute_run(*sys.argv[1:4], int(sys.argv[4]), sys.argv[5])
spent["execute_run (all)"] = time.perf_counter() - t3
spent["measured pass (timer)"] = record["elapsed_seconds"] or 0.0
spent["load (timer)"] = record["load_seconds"] or 0.0
spent["fingerprint"] = record["fingerprint_seconds"] or 0.0
print(json.dumps(spent))
"""


def _notebook(path: Path, source: str) -> Path:
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


def _papermill(notebook: Path, out: Path) -> float:
    import papermill

    from gpubench_nb.kernel import papermill_options

    start = time.perf_counter()
    papermill.execute_notebook(
        str(notebook), str(out), kernel_name="python3", progress_bar=False, **papermill_options()
    )
    return time.perf_counter() - start


def _prepare(tmp: Path):
    """A frozen bundle of a copy of the demo experiment (model built in tmp)."""
    from gpubench_nb.pipeline.orchestrate import prepare_bundle
    from gpubench_nb.protocol.experiment import load_experiment

    (tmp / "parameters").mkdir()
    for name in ("demo.yaml", "offers.yaml"):
        shutil.copy(ROOT / "parameters" / name, tmp / "parameters" / name)
    shutil.copytree(ROOT / "data" / "debian-sections", tmp / "data" / "debian-sections")
    exp = load_experiment(tmp / "parameters" / "demo.yaml")
    bundle = tmp / "outputs" / exp.experiment_id
    _, fingerprints = prepare_bundle(exp, bundle)
    return exp, bundle, fingerprints


def _scheduled(exp, bundle: Path, fingerprints, variant: str, phase: str, index: int) -> float:
    from gpubench_nb.pipeline.orchestrate import run_one
    from gpubench_nb.pipeline.schedule import ScheduledRun

    run = ScheduledRun(position=index, variant_id=variant, phase=phase, run_index=index)
    start = time.perf_counter()
    rows = run_one(exp, bundle, fingerprints, run, timeout=600)
    wall = time.perf_counter() - start
    if any(r.get("elapsed_seconds") in (None, "") for r in rows):
        raise SystemExit(f"the {phase} run failed: {rows[-1].get('notes')}")
    return wall


def _breakdown(exp, bundle: Path, variant: str, index: int) -> dict[str, float]:
    argv = [str(exp.source), variant, "warm", str(index), str(bundle)]
    out = subprocess.run(
        [sys.executable, "-c", _BREAKDOWN, *argv],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variant", default="b8")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="gpubench-floor-") as name:
        tmp = Path(name)
        exp, bundle, fingerprints = _prepare(tmp)
        empty = _notebook(tmp / "empty.ipynb", "pass")
        floor = _notebook(tmp / "floor.ipynb", "import torch, transformers")
        times: dict[str, list[float]] = {"empty": [], "floor": [], "cold": [], "warm": []}
        for i in range(1, args.repeats + 1):
            order = ["empty", "floor", "cold", "warm"]
            if i % 2 == 0:
                order.reverse()  # ABBA: drift of the machine falls on neither side
            for what in order:
                if what in ("empty", "floor"):
                    nb = empty if what == "empty" else floor
                    times[what].append(_papermill(nb, tmp / f"out-{what}-{i}.ipynb"))
                else:
                    times[what].append(_scheduled(exp, bundle, fingerprints, args.variant, what, i))
        spent = _breakdown(exp, bundle, args.variant, args.repeats + 1)
    med = {k: statistics.median(v) for k, v in times.items()}
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.2f}; {args.repeats} of each")
    print(f"{'':<28}{'median s':>10}  all (s)")
    for what, values in times.items():
        print(f"{what:<28}{med[what]:>10.2f}  {' '.join(f'{v:.2f}' for v in values)}")
    for what in ("cold", "warm"):
        ratio = med[what] / med["floor"]
        mark = "ok" if ratio <= TARGET else f"above the {TARGET}x target"
        print(
            f"{what} run / floor: {ratio:.2f}x ({mark}); "
            f"difference {med[what] - med['floor']:.2f} s"
        )
    print("\nwhere a warm run's time goes (one warm run, fresh python process, seconds):")
    for label, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
        print(f"  {label:<40}{seconds:>8.3f}")


if __name__ == "__main__":
    main()

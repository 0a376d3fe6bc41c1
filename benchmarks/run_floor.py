"""A scheduled run's wall time against its floor, side by side in one run (issue 25).

Every scheduled run is a fresh kernel (R3.7), so its fixed cost is paid dozens of times per
experiment. The floor is what no run can avoid: a papermill kernel started and stopped, plus
``import torch, transformers``. Interleaved, ``--repeats`` times each, on a bundle of the demo
experiment (bow, 1,000 texts) prepared in a temporary folder:

    empty        papermill, one cell ``pass``
    floor        papermill, one cell ``import torch, transformers`` (the issue's floor)
    torch floor  papermill, one cell ``import torch`` (a bow run needs no transformers)
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
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from demo_kernels import copy_demo_experiment, one_cell_notebook, papermill_seconds  # noqa: E402

TARGET = 1.3
# The papermill notebooks timed beside the runs: "floor" is issue 25's (an empty kernel plus
# `import torch, transformers`); "torch floor" is what a bow run cannot avoid since it reads its
# shipped WordPiece files without transformers (TextTokenizer plain route).
FLOORS = {
    "empty": "pass",
    "floor": "import torch, transformers",
    "torch floor": "import torch",
}

# Run in a fresh interpreter: execute_run with its stages wrapped in timers.
_BREAKDOWN = r"""
import json, sys, time
clocks = (time.perf_counter, time.process_time)  # wall, and this process's CPU
t0 = [c() for c in clocks]
import torch  # every run's import, timed apart from ours
t1 = [c() for c in clocks]
import gpubench_nb.pipeline.run as run
import gpubench_nb.engine.backends  # what the run imports to load a model
t2 = [c() for c in clocks]
spent = {
    "import torch": [b - a for a, b in zip(t0, t1)],
    "import gpubench_nb": [b - a for a, b in zip(t1, t2)],
}
calls = {}

def timed(owner, name, label):
    inner = getattr(owner, name, None)
    if inner is None:  # a stage this version of the code does not have
        return
    def wrapper(*args, **kwargs):
        start = [c() for c in clocks]
        try:
            return inner(*args, **kwargs)
        finally:
            total = spent.setdefault(label, [0.0, 0.0])
            for i, c in enumerate(clocks):
                total[i] += c() - start[i]
            calls[label] = calls.get(label, 0) + 1
    setattr(owner, name, wrapper)

import gpubench_nb.protocol.experiment as experiment
import gpubench_nb.protocol.corpus as corpus
import gpubench_nb.engine.measure as measure
from gpubench_nb.engine.backends.bow import BowBackend
timed(run, "capture_environment", "environment capture (start)")
timed(run, "finish_environment", "environment capture (end)")
timed(run, "_load", "imports + fingerprint + model load")
timed(run, "_passes", "warm-up + measured passes")
timed(run, "require_frozen", "lock check (declaration, corpus)")
timed(run, "write_json_atomic", "run.json writes")  # before typed records (issue 21)
timed(run, "write_run", "run.json writes")
timed(corpus, "load_experiment_corpus", "corpus read + check")
timed(experiment, "load_experiment", "experiment YAML read + check")
timed(BowBackend, "tokenize", "  of which tokenisation")
timed(BowBackend, "batches", "  of which batch building")
timed(measure, "_settle", "  of which gc before each timer")
start = [c() for c in clocks]
record = run.execute_run(*sys.argv[1:4], int(sys.argv[4]), sys.argv[5])
spent["execute_run (all)"] = [c() - s for c, s in zip(clocks, start)]
spent["  of which backend imports (import_seconds)"] = [record["import_seconds"] or 0.0, None]
spent["  of which fingerprints (fingerprint_seconds)"] = [
    record["fingerprint_seconds"] or 0.0, None]
spent["  of which load (timer)"] = [record["load_seconds"] or 0.0, None]
spent["measured pass (timer)"] = [record["elapsed_seconds"] or 0.0, None]
transformers = "transformers" in sys.modules
print(json.dumps({"spent": spent, "calls": calls, "transformers": transformers}))
"""


def _prepare(tmp: Path):
    """A frozen bundle of a copy of the demo experiment (model built in tmp)."""
    from gpubench_nb.pipeline.orchestrate import prepare_bundle
    from gpubench_nb.protocol.experiment import load_experiment

    exp = load_experiment(copy_demo_experiment(tmp))
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


def _breakdown(exp, bundle: Path, variant: str, index: int) -> dict:
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
        cells = {
            name: one_cell_notebook(tmp / f"{name}.ipynb", code) for name, code in FLOORS.items()
        }
        times: dict[str, list[float]] = {name: [] for name in [*FLOORS, "cold", "warm"]}
        for i in range(1, args.repeats + 1):
            order = list(times)
            if i % 2 == 0:
                order.reverse()  # ABBA: drift of the machine falls on neither side
            for what in order:
                if what in cells:
                    times[what].append(
                        papermill_seconds(cells[what], tmp / f"out-{what}-{i}.ipynb")
                    )
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
        for floor in ("floor", "torch floor"):
            ratio = med[what] / med[floor]
            mark = "ok" if ratio <= TARGET else f"above the {TARGET}x target"
            print(
                f"{what} run / {floor}: {ratio:.2f}x ({mark}); "
                f"difference {med[what] - med[floor]:.2f} s"
            )
    used = "imports" if spent.get("transformers") else "does not import"
    print(f"(this backend's run {used} transformers)")
    print(
        "\nwhere a warm run's time goes (one warm run of the same variant in a fresh python "
        "process; wall s, and CPU s of this process, which other users' load disturbs less):"
    )
    calls = spent["calls"]
    for label, (wall, cpu) in spent["spent"].items():
        if wall is None:
            continue
        cpu_text = "" if cpu is None else f"{cpu:>8.3f}"
        count = f"  x{calls[label]}" if calls.get(label, 1) > 1 else ""
        print(f"  {label:<44}{wall:>8.3f}{cpu_text}{count}")


if __name__ == "__main__":
    main()

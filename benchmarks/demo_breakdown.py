"""Where the seconds of `make demo` from a clean clone go: install, build-model, the kernels of
the environment step, each of the 30 runs, quality, economics, the report, the seal.

Clones the checkout (its committed HEAD; ``--source`` another repository, e.g. the one to
compare with, side by side under the same load), runs
``make demo`` there with a timestamp, and reads the times each step left behind: the install
stamp's mtime, the built model's metadata, papermill's start and end in every executed
notebook, report.html and MANIFEST.sha256. Prints one line per step with its seconds and
share, and the machine's load (/proc/loadavg) before and after. No assertion: a time on a
shared machine is a reading, not a test.

    python benchmarks/demo_breakdown.py [--torch 'torch==2.13.0'] [--keep DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = Path("outputs") / "demo-bow-batch"


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text(encoding="utf-8").strip()
    except OSError:
        return "not readable"


def _utc(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _papermill(notebook: Path) -> tuple[float, float]:
    meta = json.loads(notebook.read_text(encoding="utf-8"))["metadata"].get("papermill", {})
    return _utc(meta["start_time"]), _utc(meta["end_time"])


def breakdown(clone: Path, started: float, ended: float) -> list[tuple[str, float]]:
    """(step, seconds) in the order the demo ran them, from what each step left behind."""
    bundle = clone / BUNDLE
    notebooks = bundle / "notebooks"
    installed = (clone / ".venv" / ".installed").stat().st_mtime
    built = (clone / "models" / "demo-bow" / "gpubench_model.json").stat().st_mtime
    env = _papermill(notebooks / "00_environment.ipynb")
    runs = sorted(_papermill(p) for p in (notebooks / "10_measure").glob("*.ipynb"))
    quality = _papermill(notebooks / "20_quality.ipynb")
    economics = _papermill(notebooks / "30_economics.ipynb")
    report = (bundle / "report.html").stat().st_mtime
    kernels = sum(end - start for start, end in runs)
    steps = [
        ("install (venv, torch, package, kernelspec)", installed - started),
        ("build-model (a process: imports, corpus, training)", built - installed),
        ("run: start, checks, lock, until 00_environment", env[0] - built),
        ("00_environment kernel", env[1] - env[0]),
        (f"{len(runs)} run kernels (papermill start to end)", kernels),
        ("between the runs (the parent: rows, schedule)", runs[-1][1] - runs[0][0] - kernels),
        ("gap before the first run", runs[0][0] - env[1]),
        ("after the runs until 20_quality", quality[0] - runs[-1][1]),
        ("20_quality kernel", quality[1] - quality[0]),
        ("30_economics kernel", economics[1] - economics[0]),
        ("90_report kernel and HTML export", report - economics[1]),
        ("seal and summary", ended - report),
    ]
    return steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", default="torch==2.13.0", help="the Makefile's TORCH")
    parser.add_argument("--keep", type=Path, help="clone here (kept) instead of a temp folder")
    parser.add_argument("--source", default=str(ROOT), help="the repository cloned (its HEAD)")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="demo-breakdown-"))
    clone = folder / "clone"
    subprocess.run(["git", "clone", "-q", args.source, str(clone)], check=True)
    print(f"load before: {_load()}", flush=True)
    started = time.time()
    make = subprocess.Popen(
        ["make", "demo", f"TORCH={args.torch}"],
        cwd=clone,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = [(time.time(), line.rstrip()) for line in make.stdout or ()]
    ended = time.time()
    print(f"load after:  {_load()}")
    if make.wait():
        print(*(line for _, line in lines[-40:]), sep="\n", file=sys.stderr)
        return make.returncode
    # make echoes each command as it starts it: the install's own steps
    commands = [
        (t, line)
        for t, line in lines
        if line.startswith((".venv/bin/", "python3 -m", "PYTHONW", "touch"))
    ]
    for (t, line), (after, _) in zip(commands, [*commands[1:], (ended, "")], strict=True):
        print(f"{after - t:7.1f} s  make: {line[:90]}")
    for step, seconds in breakdown(clone, started, ended):
        print(f"{seconds:7.1f} s  {100 * seconds / (ended - started):5.1f} %  {step}")
    print(f"{ended - started:7.1f} s  total `make demo` from a clean clone ({clone})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

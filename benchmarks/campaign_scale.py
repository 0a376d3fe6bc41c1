"""A campaign's own cost as targets grow, on a real three-node Slurm: submit, poll, merge.

Starts the tests' cluster (``tests/support/slurm_cluster.THREE_NODES``: n1 in partition ``a``,
n2 and n3 in ``b``; as root, with Debian's slurm-wlm and munge, ``GPUBENCH_TEST_SLURM=1``),
runs one real short bow target (1 cold + 1 warm run, one repeat with its reason declared) to a
sealed bundle, then campaigns of ``--sizes`` targets alternating ``a`` and ``b``. Their jobs
stand in for that bow run: each sleeps ``--job-seconds`` on its node, then copies the sealed
bundle into its target's folder. The campaign cannot tell (it reads the bundle, check-bundle
verifies it, the report merges it), so what is timed is the campaign's own work: submitting
(submitit's pickle + ``sbatch``), polling (``job_state``: ``sacct``, ``scontrol``, ``squeue``),
recording (campaign.json) and the merged report. Prints, per size, the wall time, the seconds
per target of each part and the Slurm commands run; then what 1,000 targets would cost.

    GPUBENCH_TEST_SLURM=1 .venv/bin/python benchmarks/campaign_scale.py [--sizes 10 25 50]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpubench_nb.pipeline.campaign import jobs, run, slurm, view  # noqa: E402
from tests.support import slurm_cluster  # noqa: E402
from tests.support.experiments import DATA_DIR, campaign_experiment  # noqa: E402


@dataclass
class StandInJob:
    """What runs on the node in place of the bow run: a pause, then the sealed bundle copied.
    Defined in __main__, so cloudpickle ships it by value: the node needs no copy of this file."""

    experiment: str
    lock: str
    bundle_dir: str
    pricing: dict[str, Any]
    run_timeout_seconds: int
    gpus: int | None = None
    template: ClassVar[str] = ""  # set before the campaign runs, pickled with the class
    seconds: ClassVar[float] = 0.0

    def __call__(self) -> dict[str, Any]:
        time.sleep(self.seconds)
        shutil.copytree(self.template, self.bundle_dir)
        return {"bundle_dir": self.bundle_dir, "rows": 3, "failed": 0}


class Meter:
    """Seconds and calls per part of the campaign's work, by wrapping the functions it calls."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()

    def wrap(self, owner: Any, name: str, part: str) -> None:
        inner = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds[part] += time.perf_counter() - start
                self.calls[part] += 1

        setattr(owner, name, timed)

    def wrap_tools(self) -> None:
        inner = slurm._run

        def counted(command: list[str]) -> tuple[int, str, str]:
            start = time.perf_counter()
            try:
                return inner(command)
            finally:
                self.seconds[f"tool {command[0]}"] += time.perf_counter() - start
                self.calls[f"tool {command[0]}"] += 1

        slurm._run = counted


def _campaign(folder: Path, campaign_id: str, size: int) -> Path:
    targets = [
        {
            "id": f"t{i:04d}",
            "offer": {"id": "h100-example", "days": 7, "lots": 1},
            "slurm": {
                "partition": "ab"[i % 2],
                "gpus": 0,
                "time_limit_minutes": 30,
                "exclusive": False,
            },
        }
        for i in range(size)
    ]
    data = {
        "campaign_id": campaign_id,
        "experiment": "experiment.yaml",
        "offers": str(REPO / "parameters" / "offers.yaml"),
        "targets": targets,
    }
    path = folder / f"campaign-{campaign_id}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 25, 50])
    parser.add_argument("--job-seconds", type=float, default=3.0)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="campaign-scale-"))
    folder, out = root / "study", root / "study" / "outputs"
    campaign_experiment(
        folder, "scale", DATA_DIR, "campaign overhead benchmark, one cold + one warm"
    )
    with slurm_cluster.running(root / "slurm", slurm_cluster.THREE_NODES) as cluster:
        os.environ.update(SLURM_CONF=str(cluster.conf))
        start = time.perf_counter()
        template = _campaign(folder, "template", 1)
        run.run_campaign(template, output_dir=out, echo=lambda _: None)
        real = time.perf_counter() - start
        sealed = out / "template" / "t0000"
        print(f"one real short bow target (cold + warm, 1 repeat): {real:.1f} s on n1")
        StandInJob.template, StandInJob.seconds = str(sealed), args.job_seconds
        jobs.TargetJob = StandInJob  # the campaign submits the stand-in
        meter = Meter()
        meter.wrap(run._Runner, "submit", "submit")
        meter.wrap(run._Runner, "_wait_slurm", "wait")
        meter.wrap(run._Runner, "needs_job", "reconcile")
        meter.wrap(run, "write_state", "record")
        meter.wrap(view, "campaign_report", "merge")
        meter.wrap_tools()
        rows = []
        for size in args.sizes:
            meter.seconds.clear()
            meter.calls.clear()
            campaign_id = f"scale{size}"
            shutil.copytree(out / "template" / "frozen", out / campaign_id / "frozen")
            path = _campaign(folder, campaign_id, size)
            start = time.perf_counter()
            result = run.run_campaign(path, output_dir=out, echo=lambda _: None)
            wall = time.perf_counter() - start
            assert result.report_path is not None and not result.failed, result.states
            rows.append((size, wall, dict(meter.seconds), dict(meter.calls)))
            print(f"{size} targets: {wall:.1f} s, report {result.report_path}")
        load = Path("/proc/loadavg").read_text().split()[:3]
    _print(rows, args.job_seconds, load)
    shutil.rmtree(root, ignore_errors=True)


def _print(rows: list[tuple[int, float, dict[str, float], dict[str, int]]], job: float,
           load: list[str]) -> None:  # fmt: skip
    print(f"\nload average at the end: {' '.join(load)}; stand-in job: {job:.0f} s")
    print("targets  wall s  submit s/t  wait s/t  poll s/t  record s/t  merge s/t  "
          "sbatch  sacct  scontrol  squeue  sinfo  saves")  # fmt: skip
    for size, wall, seconds, calls in rows:
        polled = sum(v for k, v in seconds.items() if k.startswith("tool "))
        print(
            f"{size:7d}  {wall:6.1f}  {seconds.get('submit', 0) / size:10.3f}  "
            f"{seconds.get('wait', 0) / size:8.3f}  {polled / size:8.3f}  "
            f"{seconds.get('record', 0) / size:10.3f}  {seconds.get('merge', 0) / size:9.3f}  "
            f"{calls.get('submit', 0):6d}  {calls.get('tool sacct', 0):5d}  "
            f"{calls.get('tool scontrol', 0):8d}  {calls.get('tool squeue', 0):6d}  "
            f"{calls.get('tool sinfo', 0):5d}  {calls.get('record', 0):5d}"
        )
    size, wall, seconds, calls = rows[-1]
    controller = calls.get("submit", 0) + calls.get("tool scontrol", 0)
    controller += calls.get("tool squeue", 0) + calls.get("tool sinfo", 0)
    print(
        f"\nat {size} targets: {controller} controller calls ({controller / size:.1f} per "
        f"target: 1 sbatch, the rest scontrol while waiting), {calls.get('record', 0)} "
        f"campaign.json writes. The wait polls one job at a time (one scontrol, plus one sacct "
        f"that needs no controller, every 2 s), so its calls grow with the campaign's wall "
        f"time, not with its targets: 1,000 targets = 1,000 sbatch + wall time / 2 s scontrol "
        f"(a 10-hour campaign: ~18,000) + one scontrol per target found running at start."
    )


if __name__ == "__main__":
    main()

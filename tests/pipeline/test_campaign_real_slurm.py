"""A campaign on a real single-node Slurm (issue 26): CPU-only target, scancel, resume, failure.

The cluster (``slurm_cluster.py``) has no accounting, like many clusters seen from a user
account: ``sacct`` fails and the campaign must read the job's end from ``scontrol``/``squeue``.
Round 1 submits two CPU-only targets (``gpus: 0``, no ``--gres``): ``main`` measures a tiny
``bow`` experiment (one cold + one warm run) whose warm run hangs (``GPUBENCH_FAULT``) so that
it is interrupted *mid-run*: first by the time-limit warning (USR2, ``scancel --signal=USR2``;
submitit requeues the job, which resumes), then by ``scancel`` (SIGTERM); ``broken`` has a
setup line that exits 1. Round 2
resumes ``main``: the cold run is not redone, the interrupted warm run is redone (it was never
a row, R3.6) and its row says why. Runs only under ``CI=true`` or ``GPUBENCH_TEST_SLURM=1``
(it starts system daemons); skips where a real Slurm cannot be started (not root, no packages),
except under ``CI=true``, where it fails instead.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("submitit", reason="campaigns need submitit: pip install '.[slurm]'")

from gpubench_nb.cli import main
from gpubench_nb.pipeline.campaign.state import verification
from gpubench_nb.pipeline.campaign.view import campaign_status, status_table
from gpubench_nb.protocol.records import read_environment
from gpubench_nb.protocol.results import read_rows
from tests.support import slurm_cluster
from tests.support.experiments import campaign_experiment

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
ROUND_TIMEOUT_SECONDS = 420


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[slurm_cluster.Cluster]:
    with slurm_cluster.running(tmp_path_factory.mktemp("slurm")) as started:
        yield started  # every daemon stops, whatever the tests did


def _study(folder: Path, data_dir: Path) -> Path:
    """A 40-text bow experiment, 1 variant x (1 cold + 1 warm), and a campaign of two targets."""
    campaign_experiment(folder, "slurmcamp", data_dir, "real-Slurm test, one cold and one warm run")
    cpu = {"partition": slurm_cluster.PARTITION, "gpus": 0, "time_limit_minutes": 30}
    cpu["exclusive"] = False  # both jobs fit on the 2-CPU node at once
    campaign = {
        "campaign_id": "onslurm",
        "experiment": "experiment.yaml",
        "offers": str(REPO / "parameters" / "offers.yaml"),
        "targets": [
            {"id": "main", "offer": {"id": "h100-example", "days": 7, "lots": 1}, "slurm": cpu},
            {
                "id": "broken",
                "offer": {"id": "h200-example", "days": 7, "lots": 1},
                "slurm": {**cpu, "setup": ["echo preparing", "false  # a module that fails"]},
            },
        ],
    }
    path = folder / "campaign-onslurm.yaml"
    path.write_text(yaml.safe_dump(campaign, sort_keys=False), encoding="utf-8")
    return path


def _rerun_started(run_json: Path, first_pid: int) -> bool:
    """The warm run started again, in another kernel (the requeued job resumed)."""
    try:
        return json.loads(run_json.read_text(encoding="utf-8"))["pid"] != first_pid
    except (OSError, ValueError, KeyError):
        return False


def _running(cluster: slurm_cluster.Cluster, job_id: str) -> bool:
    done = cluster.run("squeue", "-h", "-j", job_id, "-t", "all", "-o", "%T", check=False)
    return done.stdout.strip() in ("RUNNING", "COMPLETING", "SIGNALING")


def _state(out: Path) -> dict[str, Any]:
    return json.loads((out / "onslurm" / "campaign.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def rounds(
    cluster: slurm_cluster.Cluster, tmp_path_factory: pytest.TempPathFactory, data_dir: Path
) -> Iterator[dict[str, Any]]:
    started = time.monotonic()
    folder = tmp_path_factory.mktemp("slurm-study")
    campaign = _study(folder, data_dir)
    out = folder / "outputs"
    # Round 1: the warm run hangs in its measured pass, so it is in progress when cancelled.
    env = {**cluster.env, "GPUBENCH_FAULT": "hang@batch:1@phase:warm"}
    command = [sys.executable, "-m", "gpubench_nb.cli", "campaign", "run", str(campaign)]
    process = subprocess.Popen(
        [*command, "--output-dir", str(out)],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        warm = out / "onslurm" / "main" / "runs" / "b4" / "warm-1" / "run.json"
        deadline = time.monotonic() + ROUND_TIMEOUT_SECONDS
        while not warm.exists():
            assert process.poll() is None, (process.communicate(), cluster.logs())
            assert time.monotonic() < deadline, f"the warm run never started\n{cluster.logs()}"
            time.sleep(0.2)
        csv_before = (out / "onslurm" / "main" / "resultats-bruts.csv").read_text("utf-8")
        first_job = _state(out)["targets"]["main"]["job_id"]
        # The time-limit warning (USR2, as `--signal=USR2@120` sends it): the job records the
        # interruption and submitit requeues it; the same job id runs again and resumes.
        first_pid = json.loads(warm.read_text(encoding="utf-8"))["pid"]
        cluster.run("scancel", "--signal=USR2", first_job)
        while not _rerun_started(warm, first_pid):
            assert process.poll() is None, (process.communicate(), cluster.logs())
            assert time.monotonic() < deadline, f"the requeued job never resumed\n{cluster.logs()}"
            time.sleep(0.2)
        csv_requeued = (out / "onslurm" / "main" / "resultats-bruts.csv").read_text("utf-8")
        cancelled_at = time.monotonic()
        cluster.run("scancel", first_job)
        while _running(cluster, first_job) and time.monotonic() < deadline:
            time.sleep(0.2)
        job_ended = time.monotonic()  # Slurm kills what is left after KillWait (30 s)
        stdout, stderr = process.communicate(timeout=ROUND_TIMEOUT_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
    state_one = _state(out)
    status_one = campaign_status(campaign, output_dir=out)
    # Round 2: resume `main` only (the broken setup would fail again), no fault any more.
    args = ["campaign", "run", str(campaign), "--output-dir", str(out), "--targets", "main"]
    code_two = main(args)
    yield {
        "campaign": campaign,
        "out": out,
        "bundle": out / "onslurm" / "main",
        "returncode_one": process.returncode,
        "stdout_one": stdout,
        "stderr_one": stderr,
        "csv_before": csv_before,
        "csv_requeued": csv_requeued,
        "first_job": first_job,
        "state_one": state_one,
        "status_one": status_one,
        "returncode_two": code_two,
        "state_two": _state(out),
        "stop_seconds": job_ended - cancelled_at,
        "cluster": cluster,
    }
    print(f"\nreal-Slurm campaign: {time.monotonic() - started:.0f} s in all")


def test_a_cpu_only_target_is_submitted_without_gres_or_wckey(rounds: dict[str, Any]) -> None:
    entry = rounds["state_one"]["targets"]["main"]
    assert entry["target"]["gpus"] == 0 and entry["target"]["gres"] is None
    script = Path(entry["sbatch_script"]).read_text(encoding="utf-8")
    assert f"#SBATCH --partition={slurm_cluster.PARTITION}" in script
    assert "--gres" not in script and "--wckey" not in script
    environment = read_environment(rounds["bundle"])
    slurm = environment.slurm  # R2.4: the bundle names the job it was measured in
    assert slurm is not None and slurm.job_id == rounds["first_job"]
    assert (slurm.partition, slurm.node_list) == (slurm_cluster.PARTITION, slurm_cluster.NODE)
    assert slurm.cpus_allocated is not None and slurm.cpus_allocated >= 1
    assert (slurm.gpus_allocated, slurm.gpus_requested) == (0, 0)  # no GPU requested
    assert environment.gpu_count == 0
    assert "no GPU requested" in read_rows(rounds["bundle"] / "resultats-bruts.csv")[0]["notes"]


def test_scancel_mid_run_discards_the_run_and_the_resume_redoes_only_it(
    rounds: dict[str, Any],
) -> None:
    assert rounds["returncode_one"] == 1, rounds["stderr_one"]
    main_one = rounds["state_one"]["targets"]["main"]
    assert main_one["state"] == "failed"
    # without accounting the end is read from scontrol: the real state, not UNKNOWN forever
    assert "CANCELLED" in main_one["error"] and "scontrol" in main_one["error"]
    assert "(SIGUSR2 during b4/warm-1; SIGTERM during b4/warm-1)" in main_one["error"]
    # USR2 (time limit): recorded, then requeued by submitit, same job; SIGTERM (scancel)
    assert [(e["run"], e["signal"], e["slurm_job_id"]) for e in main_one["interruptions"]] == [
        ("b4/warm-1", "SIGUSR2", rounds["first_job"]),
        ("b4/warm-1", "SIGTERM", rounds["first_job"]),
    ]
    err_log = Path(main_one["logs"]["stderr"]).read_text(encoding="utf-8")
    assert "gpubench: interrupted by SIGUSR2" in err_log and "requeu" in err_log.lower()
    assert "gpubench: interrupted by SIGTERM" in err_log  # our handler ran, not Slurm's SIGKILL
    # submitit's own SIGTERM bypass may log in the requeued (USR2) step; after scancel's
    # CANCELLED, the SIGTERM is ours, never submitit's
    assert "Bypassing signal SIGTERM" not in err_log.rsplit("CANCELLED AT", 1)[-1]
    # neither interrupted attempt left a row: the CSV holds only the cold run's two rows
    before = Path(rounds["out"] / "before.csv")
    before.write_text(rounds["csv_before"], encoding="utf-8")
    kept = read_rows(before)
    assert [r["phase"] for r in kept] == ["load", "cold"]
    assert rounds["csv_requeued"] == rounds["csv_before"]  # the requeued job redid nothing
    # round 2: completed, the cold run kept as it was, the warm run redone and explained
    assert rounds["returncode_two"] == 1  # `broken` is still failed: no merged report
    main_two = rounds["state_two"]["targets"]["main"]
    assert main_two["state"] == "completed" and main_two["attempts"] == 2
    assert len(main_two["history"][0]["interruptions"]) == 2
    rows = read_rows(rounds["bundle"] / "resultats-bruts.csv")
    assert sorted(r["phase"] for r in rows) == ["cold", "load", "warm"]
    timed = {r["phase"]: r for r in rows}
    for row in kept:
        assert timed[row["phase"]]["elapsed_seconds"] == row["elapsed_seconds"]
    warm = timed["warm"]
    assert warm["elapsed_seconds"] is not None  # a measurement, not a failed observation
    assert "R3.6: 2 earlier attempts of this run interrupted by SIGUSR2 at" in warm["notes"]
    assert ", SIGTERM at" in warm["notes"]
    assert f"Slurm job {rounds['first_job']}" in warm["notes"]
    schedule = json.loads((rounds["bundle"] / "schedule.json").read_text(encoding="utf-8"))
    assert [r.get("interrupted") for r in schedule["runs"]] == [None, 2]
    record = json.loads((rounds["bundle"] / "runs/b4/warm-1/run.json").read_text("utf-8"))
    assert record["environment"]["slurm"]["job_id"] == main_two["job_id"]  # the redone run
    lock = rounds["state_two"]["lock_sha256"]
    assert verification(rounds["bundle"], lock) == "verified"


def test_the_resumed_job_log_counts_runs_over_the_whole_schedule(rounds: dict[str, Any]) -> None:
    main_two = rounds["state_two"]["targets"]["main"]
    log = Path(main_two["logs"]["stdout"]).read_text(encoding="utf-8")
    assert "run 2/2: b4/warm-1" in log and "finished run 2/2: b4/warm-1" in log
    assert "run 1/1" not in log and "run 3/2" not in log


def test_a_failing_setup_line_says_its_exit_code_and_log(rounds: dict[str, Any]) -> None:
    broken = rounds["state_one"]["targets"]["broken"]
    assert broken["state"] == "failed"
    error = broken["error"]
    assert "FAILED, exit code 1" in error and "killed" not in error
    assert "its own commands failed" in error
    assert "gpubench: setup line 2 failed with exit code 1: false  # a module that fails" in error
    assert Path(broken["logs"]["stderr"]).is_file()  # the log is kept
    row = {r["target"]: r for r in rounds["status_one"]}["broken"]
    assert row["state"] == "failed" and "exit code 1" in row["error"]
    table = status_table(rounds["status_one"])
    assert "broken: Slurm job" in table and "setup line 2 failed" in table


def test_waiting_prints_no_accounting_warning_per_poll(rounds: dict[str, Any]) -> None:
    output = rounds["stdout_one"] + rounds["stderr_one"]
    assert "Bypassing sacct error" not in output
    print(f"\njob ended {rounds['stop_seconds']:.1f} s after scancel (KillWait is 30 s)")

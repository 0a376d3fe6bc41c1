"""A campaign end to end with submitit's local and debug executors (no cluster) (issue 15).

One tiny experiment (40 eval texts, the real `bow` model, 1 variant, 1 cold + 1 warm run) and a
campaign of two local targets and one manual target, run from a clean copy of the repository:
round 1 kills t1's job after its first run and lets t2 finish; t3's bundle is made "on another
box" with `run --protocol` from a copied lock and copied back; round 2 resumes t1 and merges
the three bundles. Later tests reuse the finished campaign (a failing target, Slurm submission
through a fake `sbatch`) without running another kernel.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("submitit", reason="campaigns need submitit: pip install '.[slurm]'")

from gpubench_nb.cli import main
from gpubench_nb.pipeline.campaign import slurm
from gpubench_nb.pipeline.campaign.run import run_campaign
from gpubench_nb.pipeline.campaign.state import verification
from gpubench_nb.pipeline.campaign.view import campaign_status, status_table
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.lock import build_lock
from gpubench_nb.protocol.results import read_rows
from tests.support.experiments import campaign_experiment
from tests.support.in_process import steps_in_process

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def _experiment(folder: Path, data_dir: Path, offers: Path) -> Path:
    pricing = {"offers": str(offers), "offer": "h200-example", "days": 30, "lots": 1}
    return campaign_experiment(
        folder, "camp", data_dir, "test campaign, two targets", pricing=pricing
    )


def _campaign(folder: Path, offers: Path, extra: list[dict] | None = None) -> Path:
    targets = [
        {"id": "t1", "offer": {"id": "h100-example", "days": 7, "lots": 1}, "local": {"gpus": 0}},
        {"id": "t2", "offer": {"id": "b200-example", "days": 3, "lots": 1}, "local": {"gpus": 0}},
        {"id": "t3", "offer": {"id": "h200-example", "days": 7, "lots": 1}, "manual": {}},
        *(extra or []),
    ]
    data = {
        "campaign_id": "twobox",
        "experiment": "experiment.yaml",
        "offers": str(offers),
        "targets": targets,
    }
    path = folder / ("campaign-twobox.yaml" if extra is None else "campaign-more.yaml")
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _clean_clone(destination: Path) -> Path:
    """The repository as a clone of this working tree has it: tracked + new unignored files."""
    try:
        listing = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"no git checkout to copy a clean clone from: {exc}")
    for name in filter(None, listing.split("\0")):
        source = REPO / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination


def _state(out: Path) -> dict[str, Any]:
    return json.loads((out / "twobox" / "campaign.json").read_text(encoding="utf-8"))


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("campaign")
    clone = _clean_clone(root / "clone")
    offers = clone / "parameters" / "offers.yaml"
    folder = root / "study"
    experiment = _experiment(folder, data_dir, offers)
    return {
        "root": root,
        "clone": clone,
        "offers": offers,
        "folder": folder,
        "experiment": experiment,
        "campaign": _campaign(folder, offers),
        "out": root / "outputs",
    }


def _job_log(out: Path, target: str) -> str:
    """The job's stdout log so far, "" while the campaign has not named it yet."""
    try:
        path = Path(_state(out)["targets"][target]["logs"]["stdout"])
        return path.read_text(encoding="utf-8")
    except (OSError, KeyError, TypeError, ValueError):
        return ""


@pytest.fixture(scope="module")
def round_one(study: dict[str, Path]) -> dict[str, Any]:
    """`campaign run` from the clean clone; t1's job is killed -9 after its first run."""
    if not Path("/proc/self/task").is_dir():
        pytest.skip("finding the job's process needs Linux /proc")
    out = study["out"]
    env = {**os.environ, "PYTHONPATH": str(study["clone"])}
    command = [sys.executable, "-m", "gpubench_nb.cli", "campaign", "run", str(study["campaign"])]
    process = subprocess.Popen(
        [*command, "--output-dir", str(out)],
        cwd=study["clone"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    csv_path = out / "twobox" / "t1" / "resultats-bruts.csv"
    deadline = time.monotonic() + 900
    while not (csv_path.exists() and len(csv_path.read_text().splitlines()) >= 3):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "t1 never finished its first run"
        time.sleep(0.2)
    # The job appends the row, then logs "finished run 1/2": wait for that line too, so that the
    # kill lands after it (under load the two can be a moment apart).
    while "finished run 1/2" not in _job_log(out, "t1"):
        assert time.monotonic() < deadline, "t1's job never logged the end of its first run"
        time.sleep(0.05)
    before = csv_path.read_text(encoding="utf-8")
    schedule = json.loads((csv_path.parent / "schedule.json").read_text(encoding="utf-8"))
    controller = int(_state(out)["targets"]["t1"]["job_id"])
    tasks = _children(controller)
    assert tasks, "the local job's task process was not found"
    for task in tasks:  # pre-emption without warning: the job dies mid-schedule
        os.kill(task, signal.SIGKILL)
    stdout, stderr = process.communicate(timeout=900)
    return {
        "returncode": process.returncode,
        "stdout": stdout,
        "stderr": stderr,
        "csv_before": before,
        "schedule_before": schedule,
        "state": _state(out),
    }


@pytest.fixture(scope="module")
def manual_bundle(study: dict[str, Path], round_one: dict[str, Any]) -> Path:
    """t3 "on another box": copied experiment files + copied lock, `run --protocol`, rsync."""
    box = study["root"] / "box"
    shutil.copytree(study["folder"], box, ignore=shutil.ignore_patterns("campaign-*.yaml"))
    frozen = study["out"] / "twobox" / "frozen" / "protocol.lock.json"
    shutil.copy2(frozen, box / "protocol.lock.json")
    args = ["run", str(box / "experiment.yaml"), "--protocol", str(box / "protocol.lock.json")]
    with steps_in_process():  # the lock and the merge are tested here; t1 and t2 ran kernels
        assert main([*args, "--output-dir", str(box / "outputs")]) == 0
    bundle = study["out"] / "twobox" / "t3"
    shutil.copytree(box / "outputs" / "camp", bundle)  # rsync -a box:outputs/camp/ .../t3/
    return bundle


@pytest.fixture(scope="module")
def round_two(study: dict[str, Path], manual_bundle: Path) -> dict[str, Any]:
    """`campaign run` again: resumes t1 only, finds t2 and t3 done, writes the merged report."""
    code = main(["campaign", "run", str(study["campaign"]), "--output-dir", str(study["out"])])
    return {"returncode": code, "state": _state(study["out"])}


def test_a_killed_job_is_a_recorded_failure_and_the_other_target_finishes(
    round_one: dict[str, Any], study: dict[str, Path]
) -> None:
    assert round_one["returncode"] == 1  # some target failed: resumable, not bad input
    targets = round_one["state"]["targets"]
    t1, t2 = targets["t1"], targets["t2"]
    assert t1["state"] == "failed" and "ended without a result" in t1["error"]
    assert "killed, or it crashed" in t1["error"]  # a local job: no scheduler to say more
    log = Path(t1["logs"]["stdout"]).read_text(encoding="utf-8")  # its log is kept
    assert "run 1/2: b4/cold-1" in log and "done:" not in log
    assert "finished run 1/2: b4/cold-1" in log and "run 2/1" not in log
    assert "CUDA_VISIBLE_DEVICES=''" in log  # local gpus: 0 -> no GPU visible to the job
    # local targets run one after the other: t2 was submitted once t1's job had ended
    assert t2["submitted_utc"] >= t1["finished_utc"]
    assert t2["state"] == "completed" and t2["attempts"] == 1
    assert verification(study["out"] / "twobox" / "t2", round_one["state"]["lock_sha256"]) == (
        "verified"
    )
    assert targets["t3"]["state"] == "manual"
    assert "--protocol protocol.lock.json" in round_one["stdout"]  # what to run on the box
    assert not (study["out"] / "twobox" / "report.html").exists()  # no decision on 2 of 3


def test_resume_finishes_the_killed_target_and_redoes_no_finished_run(
    round_one: dict[str, Any], round_two: dict[str, Any], study: dict[str, Path]
) -> None:
    assert round_two["returncode"] == 0
    t1 = round_two["state"]["targets"]["t1"]
    assert t1["state"] == "completed" and t1["attempts"] == 2
    assert t1["history"][0]["state"] == "failed"  # the killed attempt stays on record
    assert t1["job_id"] != t1["history"][0]["job_id"]
    # the resumed job counts over the whole schedule: not "run 1/1" then "run 2/1" (issue 26 §6)
    log = Path(t1["logs"]["stdout"]).read_text(encoding="utf-8")
    assert "run 2/2: b4/warm-1" in log and "finished run 2/2: b4/warm-1" in log
    assert "run 1/1" not in log and "run 2/1" not in log
    bundle = study["out"] / "twobox" / "t1"
    rows = read_rows(bundle / "resultats-bruts.csv")
    assert sorted(r["phase"] for r in rows) == ["cold", "load", "warm"]  # one row per run
    earlier = study["root"] / "t1-before-the-kill.csv"
    earlier.write_text(round_one["csv_before"], encoding="utf-8")
    kept = read_rows(earlier)
    assert [r["phase"] for r in kept] == ["load", "cold"]  # what t1 had done when it was killed
    timed = {(r["phase"], r["run_index"]): r["elapsed_seconds"] for r in rows}
    for row in kept:  # those runs were not redone: the same observations, kept
        assert timed[(row["phase"], row["run_index"])] == row["elapsed_seconds"]
    schedule = json.loads((bundle / "schedule.json").read_text(encoding="utf-8"))
    [cold_pid] = [r["pid"] for r in schedule["runs"] if r["phase"] == "cold"]
    cold_record = json.loads((bundle / "runs" / "b4" / "cold-1" / "run.json").read_text())
    assert cold_pid == cold_record["pid"] is not None  # the kernel that ran it, not a rerun
    # The snapshot taken at the kill may predate the schedule's rewrite after that run (the
    # row is appended first): where it already named the PID, it is the same one.
    before = [r["pid"] for r in round_one["schedule_before"]["runs"] if r["phase"] == "cold"]
    assert before in ([cold_pid], [None])
    assert all(r["status"] == "done" for r in schedule["runs"])


def test_every_bundle_keeps_the_one_frozen_lock_and_its_target_offer(
    round_two: dict[str, Any], study: dict[str, Path]
) -> None:
    campaign_dir = study["out"] / "twobox"
    lock = (campaign_dir / "frozen" / "protocol.lock.json").read_bytes()
    assert not (campaign_dir / "protocol.lock.json").exists()  # the campaign is no bundle
    for target in ("t1", "t2", "t3"):
        assert (campaign_dir / target / "protocol.lock.json").read_bytes() == lock, target
    priced = {
        t: json.loads((campaign_dir / t / "economics.json").read_text(encoding="utf-8"))["pricing"]
        for t in ("t1", "t2", "t3")
    }
    assert (priced["t1"]["offer"], priced["t1"]["days"]) == ("h100-example", 7)
    assert (priced["t2"]["offer"], priced["t2"]["days"]) == ("b200-example", 3)
    # the manual box priced with its YAML's own (unfrozen) pricing section
    assert (priced["t3"]["offer"], priced["t3"]["days"]) == ("h200-example", 30)


def test_status_and_the_merged_report(round_two: dict[str, Any], study: dict[str, Path]) -> None:
    rows = {r["target"]: r for r in campaign_status(study["campaign"], output_dir=study["out"])}
    assert [rows[t]["bundle"] for t in ("t1", "t2", "t3")] == ["verified"] * 3
    assert [rows[t]["runs"] for t in ("t1", "t2", "t3")] == ["2/2"] * 3
    assert rows["t1"]["job"] == round_two["state"]["targets"]["t1"]["job_id"]
    assert rows["t3"]["state"] == "completed" and rows["t3"]["job"] == "-"
    report = study["out"] / "twobox" / "report.html"
    html = report.read_text(encoding="utf-8")
    for target in ("t1", "t2", "t3"):
        assert f"camp · cpu · {target}" in html  # three bundles, one merged report
    assert "mismatch" not in html.lower()  # like bundles: no --allow-mismatch needed (R2.1)


def test_a_failing_target_is_recorded_without_losing_the_others(
    round_two: dict[str, Any], study: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    campaign_dir = study["out"] / "twobox"
    other = build_lock(
        load_experiment(study["experiment"]), {"corpus_revision": "0" * 64}
    )  # a bundle frozen under another protocol: the job must refuse it (R1.3)
    (campaign_dir / "t4").mkdir()
    (campaign_dir / "t4" / "protocol.lock.json").write_text(json.dumps(other), encoding="utf-8")
    t4 = {"id": "t4", "offer": {"id": "h100-example", "days": 7, "lots": 1}, "local": {"gpus": 0}}
    campaign = _campaign(study["folder"], study["offers"], extra=[t4])
    args = ["campaign", "run", str(campaign), "--output-dir", str(study["out"])]
    assert main([*args, "--local-executor", "debug"]) == 1
    state = _state(study["out"])["targets"]
    assert state["t4"]["state"] == "failed"
    assert "R1.3" in state["t4"]["error"] and "changed since this bundle" in state["t4"]["error"]
    assert [state[t]["state"] for t in ("t1", "t2", "t3")] == ["completed"] * 3
    lock_sha = _state(study["out"])["lock_sha256"]
    assert [verification(campaign_dir / t, lock_sha) for t in ("t1", "t2", "t3")] == [
        "verified"
    ] * 3
    capsys.readouterr()
    assert main(["campaign", "report", str(campaign), "--output-dir", str(study["out"])]) == 2
    err = capsys.readouterr().err
    assert "t4: NOT this campaign's protocol" in err and "--partial" in err
    assert main(["campaign", "status", str(campaign), "--output-dir", str(study["out"])]) == 0
    out = capsys.readouterr().out
    assert "t4: gpubench_nb.errors.ProtocolError" in out or "t4: R1.3" in out


def test_run_protocol_refuses_a_box_with_another_declaration(
    round_two: dict[str, Any], study: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    box = study["root"] / "box2"
    shutil.copytree(study["folder"], box, ignore=shutil.ignore_patterns("campaign-*.yaml"))
    text = (box / "experiment.yaml").read_text(encoding="utf-8")
    (box / "experiment.yaml").write_text(text.replace("repeats: 1", "repeats: 2"), "utf-8")
    lock = study["out"] / "twobox" / "frozen" / "protocol.lock.json"
    args = ["run", str(box / "experiment.yaml"), "--protocol", str(lock)]
    assert main([*args, "--output-dir", str(box / "outputs")]) == 2
    err = capsys.readouterr().err
    assert "R1.3" in err and "declaration.timing.repeats: 1 -> 2" in err
    assert not (box / "outputs" / "camp" / "protocol.lock.json").exists()


def test_a_slurm_target_is_submitted_through_sbatch_once(
    study: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fake `srun`/`sbatch` on PATH: submitit writes the real sbatch file and submits it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "sbatch-calls.txt"
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "sbatch").write_text(
        f'#!/bin/sh\necho "$@" >> {calls}\n'
        f'echo "Submitted batch job $((4241 + $(wc -l < {calls})))"\n'
    )
    for tool in ("srun", "sbatch"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    node = {
        "id": "h100-node",
        "offer": {"id": "h100-example", "days": 7, "lots": 1},
        "slurm": {
            "partition": "gpu-h100",
            "gpus": 1,
            "time_limit_minutes": 90,
            "setup": ["module load cuda/12.4"],
        },
    }
    data = yaml.safe_load(study["campaign"].read_text(encoding="utf-8"))
    data.update(campaign_id="cluster", targets=[node])
    campaign = study["folder"] / "campaign-cluster.yaml"
    campaign.write_text(yaml.safe_dump(data), encoding="utf-8")
    first = run_campaign(campaign, output_dir=study["out"], wait=False, echo=lambda _: None)
    assert first.states == {"h100-node": "submitted"}
    state = json.loads((first.campaign_dir / "campaign.json").read_text(encoding="utf-8"))
    entry = state["targets"]["h100-node"]
    assert entry["job_id"] == "4242" and entry["executor"] == "slurm"
    script = Path(entry["sbatch_script"]).read_text(encoding="utf-8").splitlines()
    for line in (
        "#SBATCH --partition=gpu-h100",
        "#SBATCH --gres=gpu:1",
        "#SBATCH --time=90",
        "#SBATCH --exclusive",
        "{ module load cuda/12.4",  # checked: a failing setup line stops the job (issue 26)
    ):
        assert line in script, line
    # no sacct here: the job's state is unknown, so it is never submitted a second time
    again = run_campaign(campaign, output_dir=study["out"], wait=False, echo=lambda _: None)
    assert again.states == {"h100-node": "submitted"}
    assert len(calls.read_text().splitlines()) == 1
    row = campaign_status(campaign, output_dir=study["out"])[0]
    assert row["job"] == "4242" and row["state"].startswith("submitted (Slurm: UNKNOWN")
    assert row["runs"] == "0/?" and row["bundle"] == "no bundle yet"
    # the user knows the job is gone: --resubmit submits again and keeps the first attempt
    run_campaign(campaign, output_dir=study["out"], wait=False, resubmit=["h100-node"], echo=print)
    entry = json.loads((first.campaign_dir / "campaign.json").read_text())["targets"]["h100-node"]
    assert (entry["job_id"], entry["attempts"]) == ("4243", 2)
    assert entry["history"][0]["job_id"] == "4242"
    # 4243 failed on its node: submitit's result file holds the trace; it is recorded, resubmitted
    trace = (
        'Traceback (most recent call last):\n  File "/x.py", line 1, in <module>\n    f()\n'
        "gpubench_nb.errors.ProtocolError: R1.3: the protocol changed\n"
    )
    folder = first.campaign_dir / "jobs" / "h100-node"
    with open(folder / "4243_0_result.pkl", "wb") as handle:
        pickle.dump(("error", trace), handle)
    assert campaign_status(campaign, output_dir=study["out"])[0]["state"] == "failed"
    run_campaign(campaign, output_dir=study["out"], wait=False, echo=print)
    # 4244: Slurm's accounting says the node failed, and there is no result: resubmitted
    sacct = '#!/bin/sh\nprintf "JobID|State|NodeList\\n4244|NODE_FAIL|g1\\n"\n'
    (bin_dir / "sacct").write_text(sacct)
    (bin_dir / "sacct").chmod(0o755)
    run_campaign(campaign, output_dir=study["out"], wait=False, echo=print)
    entry = json.loads((first.campaign_dir / "campaign.json").read_text())["targets"]["h100-node"]
    assert entry["job_id"] == "4245" and entry["attempts"] == 4
    errors = {h["job_id"]: h["error"] for h in entry["history"]}
    assert errors["4243"] == "gpubench_nb.errors.ProtocolError: R1.3: the protocol changed"
    assert errors["4244"].startswith("Slurm job 4244 ended without a result: NODE_FAIL (sacct)")
    assert "stopped from outside" in errors["4244"]
    assert len(calls.read_text().splitlines()) == 4


def _cpu_node_campaign(
    study: dict[str, Path], bin_dir: Path, tools: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """Stand-in Slurm ``tools`` first on PATH; the study's campaign with one CPU target."""
    for name, text in tools.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    node = {
        "id": "cpu-node",
        "offer": {"id": "h100-example", "days": 7, "lots": 1},
        "slurm": {"partition": "debug", "gpus": 0, "time_limit_minutes": 30},
    }
    data = yaml.safe_load(study["campaign"].read_text(encoding="utf-8"))
    return {**data, "targets": [node]}


def test_without_accounting_a_failed_slurm_job_is_seen_to_end_with_its_reason(
    study: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No sacct (accounting off): scontrol knows the job FAILED; its exit code and .err tail
    reach campaign status and campaign.json, and it is resubmitted (issue 26 §3, §4)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "sbatch-calls.txt"
    tools = {
        "srun": "#!/bin/sh\nexit 0\n",
        "sbatch": f'#!/bin/sh\necho "$@" >> {calls}\n'
        f'echo "Submitted batch job $((600 + $(wc -l < {calls})))"\n',
        "sacct": "#!/bin/sh\necho 'Slurm accounting storage is disabled' >&2\nexit 1\n",
        "scontrol": '#!/bin/sh\necho "JobId=$4 JobState=FAILED Reason=NonZeroExitCode '
        'ExitCode=2:0"\n',
    }
    data = _cpu_node_campaign(study, bin_dir, tools, monkeypatch)
    data.update(campaign_id="noacct")
    campaign = study["folder"] / "campaign-noacct.yaml"
    campaign.write_text(yaml.safe_dump(data), encoding="utf-8")
    first = run_campaign(campaign, output_dir=study["out"], wait=False, echo=lambda _: None)
    entry = json.loads((first.campaign_dir / "campaign.json").read_text())["targets"]["cpu-node"]
    assert entry["job_id"] == "601"
    Path(entry["logs"]["stderr"]).parent.mkdir(parents=True, exist_ok=True)
    Path(entry["logs"]["stderr"]).write_text(
        "slurmstepd: error: execve(): /shared/venv/bin/python: No such file or directory\n"
        "srun: error: gpubench-node: task 0: Exited with exit code 2\n"
    )
    [row] = campaign_status(campaign, output_dir=study["out"])  # before campaign run knows
    assert row["state"] == "failed (Slurm: FAILED, exit code 2 (reason NonZeroExitCode; scontrol))"
    assert "execve(): /shared/venv/bin/python: No such file" in row["error"]
    assert "Bypassing" not in row["error"]
    # wait=True: without sacct the wait used to last forever (`Slurm: UNKNOWN`); now it ends
    again = run_campaign(
        campaign, output_dir=study["out"], wait=True, poll_seconds=0.1, echo=lambda _: None
    )
    state = json.loads((first.campaign_dir / "campaign.json").read_text())["targets"]["cpu-node"]
    [earlier] = state["history"]
    assert earlier["job_id"] == "601" and earlier["state"] == "failed"
    assert "FAILED, exit code 2" in earlier["error"] and "killed" not in earlier["error"]
    assert "Exited with exit code 2" in earlier["error"]
    assert again.states == {"cpu-node": "failed"} and state["job_id"] == "602"
    assert "#SBATCH --gres" not in Path(state["sbatch_script"]).read_text()


def test_a_controller_that_does_not_answer_is_waited_for_never_failed_nor_resubmitted(
    study: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """slurmctld down (restarting): `run --no-wait` and `status` say "controller unreachable"
    and what to do; the job is neither failed nor submitted twice; back, it is seen again."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "sbatch-calls.txt"
    down = "echo 'slurm_load_jobs error: Unable to contact slurm controller (connect failure)' >&2"
    tools = {
        "srun": "#!/bin/sh\nexit 0\n",
        "sbatch": f'#!/bin/sh\necho "$@" >> {calls}\necho "Submitted batch job 700"\n',
        "sacct": "#!/bin/sh\necho 'Slurm accounting storage is disabled' >&2\nexit 1\n",
        "scontrol": f"#!/bin/sh\n{down}\nexit 1\n",
        "squeue": f"#!/bin/sh\n{down}\nexit 1\n",
    }
    monkeypatch.setattr(slurm, "_DOWN", [])  # no answer of another test reused
    data = _cpu_node_campaign(study, bin_dir, tools, monkeypatch)
    data.update(campaign_id="ctld-down")
    campaign = study["folder"] / "campaign-ctld-down.yaml"
    campaign.write_text(yaml.safe_dump(data), encoding="utf-8")
    run_campaign(campaign, output_dir=study["out"], wait=False, echo=lambda _: None)
    said: list[str] = []
    again = run_campaign(campaign, output_dir=study["out"], wait=False, echo=said.append)
    assert again.states == {"cpu-node": "submitted"} and len(calls.read_text().splitlines()) == 1
    assert said == [
        "cpu-node: job 700: UNKNOWN (controller unreachable (scontrol: slurm_load_jobs error: "
        "Unable to contact slurm controller (connect failure)): the job is neither marked failed "
        "nor submitted again; when `scontrol ping` answers, `campaign status` or `campaign run` "
        "again (a waiting run goes on by itself))"
    ]
    [row] = campaign_status(campaign, output_dir=study["out"])
    assert row["state"] == "submitted (Slurm: UNKNOWN)"
    assert row["error"].startswith("controller unreachable (scontrol:")
    assert "cpu-node: controller unreachable" in status_table([row])
    monkeypatch.setattr(slurm, "_DOWN", [])  # back after REUSE_SECONDS
    running = "#!/bin/sh\necho 'JobId=700 JobState=RUNNING Restarts=0 BatchHost=n2'\n"
    (bin_dir / "scontrol").write_text(running)
    [row] = campaign_status(campaign, output_dir=study["out"])
    assert row["state"] == "submitted (Slurm: RUNNING (scontrol))" and row["error"] is None


def test_a_new_offer_reprices_a_finished_target_without_redoing_a_run(
    round_two: dict[str, Any], study: dict[str, Path]
) -> None:
    bundle = study["out"] / "twobox" / "t2"
    before = read_rows(bundle / "resultats-bruts.csv")
    data = yaml.safe_load(study["campaign"].read_text(encoding="utf-8"))
    data["targets"][1]["offer"]["days"] = 30  # t2 now stands for the 30-day package
    campaign = study["folder"] / "campaign-reprice.yaml"
    campaign.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    args = ["campaign", "run", str(campaign), "--output-dir", str(study["out"])]
    with steps_in_process():  # the debug executor runs the job here: its steps, too
        assert main([*args, "--targets", "t2", "--local-executor", "debug"]) == 0
    t2 = _state(study["out"])["targets"]["t2"]
    assert t2["state"] == "completed" and t2["attempts"] == 2 and t2["priced_with"]["days"] == 30
    economics = json.loads((bundle / "economics.json").read_text(encoding="utf-8"))
    assert (economics["pricing"]["offer"], economics["pricing"]["days"]) == ("b200-example", 30)
    after = read_rows(bundle / "resultats-bruts.csv")
    assert [r["elapsed_seconds"] for r in after] == [r["elapsed_seconds"] for r in before]
    assert {r["duration_days"] for r in after} == {30}  # every row's package column follows
    assert verification(bundle, _state(study["out"])["lock_sha256"]) == "verified"

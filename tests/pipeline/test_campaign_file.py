"""The campaign file (strict validation, exit 2) and a Slurm target's sbatch script, no cluster."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("submitit", reason="campaigns need submitit: pip install '.[slurm]'")

from gpubench_nb.cli import main
from gpubench_nb.errors import ProtocolError
from gpubench_nb.pipeline.campaign.file import Target, load_campaign
from gpubench_nb.pipeline.campaign.jobs import checked_setup, error_of_trace, slurm_parameters

REPO = Path(__file__).resolve().parents[2]


def sbatch_script(target: Target, folder: Path) -> str:
    """The sbatch file submitit would submit for ``target``, written without any cluster."""
    from submitit.slurm.slurm import _make_sbatch_string

    python = target.python or shlex.quote(sys.executable)
    command = f"{python} -u -m submitit.core._submit {shlex.quote(str(folder))}"
    return _make_sbatch_string(command=command, folder=folder, **slurm_parameters(target))


EXPERIMENT = REPO / "parameters" / "demo.yaml"
OFFERS = REPO / "parameters" / "offers.yaml"

SLURM_TARGET = {
    "id": "h100-node",
    "offer": {"id": "h100-example", "days": 7, "lots": 1},
    "slurm": {
        "partition": "gpu-h100",
        "account": "proj-42",
        "gpus": 2,
        "gres": "gpu:h100:2",
        "time_limit_minutes": 240,
        "sbatch": {"qos": "high", "cpus_per_task": 8},
        "setup": ["module load cuda/12.4", "source /shared/venvs/gpubench/bin/activate"],
        "python": "/shared/venvs/gpubench/bin/python",
    },
}


def write_campaign(folder: Path, targets: list[dict], **top: object) -> Path:
    data = {"campaign_id": "offers", "experiment": str(EXPERIMENT), "offers": str(OFFERS)}
    data.update(top)
    data["targets"] = targets
    path = folder / "campaign-offers.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def local_target(target_id: str, offer: str = "h100-example", **local: object) -> dict:
    return {
        "id": target_id,
        "offer": {"id": offer, "days": 7, "lots": 1},
        "local": {"gpus": 0, **local},
    }


def test_a_valid_campaign_reads_back_every_target(tmp_path: Path) -> None:
    path = write_campaign(
        tmp_path,
        [
            local_target("here"),
            SLURM_TARGET,
            {"id": "b200-box", "offer": {"id": "b200", "days": 3, "lots": 2}, "manual": {}},
        ],
    )
    campaign = load_campaign(path)
    assert campaign.campaign_id == "offers"
    assert campaign.experiment.experiment_id == "demo-bow-batch"
    here, node, box = campaign.targets
    assert (here.reach, here.gpus, here.time_limit_minutes) == ("local", 0, 24 * 60)
    assert (node.reach, node.gres, node.exclusive, node.account) == (
        "slurm",
        "gpu:h100:2",
        True,
        "proj-42",
    )
    # "b200" resolves to the only offer id starting with it (R5.2's 2-GPU lot)
    assert (box.reach, box.offer.offer, box.offer.days, box.offer.lots) == (
        "manual",
        "b200-example",
        3,
        2,
    )
    assert here.offer.pricing() == {
        "offers": str(OFFERS),
        "offer": "h100-example",
        "days": 7,
        "lots": 1,
    }


def test_every_problem_is_listed_with_the_nearest_key(tmp_path: Path) -> None:
    bad_slurm = {
        "id": "node",
        "offer": {"id": "h100-example", "days": 5, "lot": 1},
        "slurm": {
            "partition": "p",
            "gpus": 1,
            "time_limit_minutes": 60,
            "exclusiv": True,
            "gres": "gpu:4",
        },
    }
    path = write_campaign(
        tmp_path,
        [local_target("a", offer="h999"), local_target("a"), bad_slurm],
        campaign_idd="x",
    )
    with pytest.raises(ProtocolError) as caught:
        load_campaign(path)
    text = str(caught.value)
    assert "campaign_idd': unknown key" in text and "did you mean 'campaign_id'?" in text
    # the top-level typo stops validation before the targets; fix it and see the rest
    path = write_campaign(tmp_path, [local_target("a", offer="h999"), local_target("a"), bad_slurm])
    with pytest.raises(ProtocolError) as caught:
        load_campaign(path)
    text = str(caught.value)
    assert "R5.1" in text and "unknown offer 'h999'" in text
    assert "target id 'a' is used twice" in text
    assert "offer.lot': unknown key" in text and "did you mean 'lots'?" in text
    assert "offer.days': must be one of 3, 7, 30, got 5" in text
    assert "slurm.exclusiv': unknown key" in text and "did you mean 'exclusive'?" in text
    assert "'gpu:4' does not request the target's 1 whole GPU(s)" in text


def test_a_target_needs_exactly_one_reach_and_local_needs_its_gpus(tmp_path: Path) -> None:
    both = {**local_target("x"), "manual": {}}
    none = {"id": "y", "offer": {"id": "h100-example", "days": 7, "lots": 1}}
    no_gpus = {"id": "z", "offer": {"id": "h100-example", "days": 7, "lots": 1}, "local": {}}
    clash = {**SLURM_TARGET, "slurm": {**SLURM_TARGET["slurm"], "sbatch": {"partition": "q"}}}
    path = write_campaign(tmp_path, [both, none, no_gpus, clash])
    with pytest.raises(ProtocolError) as caught:
        load_campaign(path)
    text = str(caught.value)
    assert "declares 2 ways to reach it (local, manual)" in text
    assert "declares 0 ways to reach it (none)" in text
    assert "local.gpus': missing" in text and "0: CPU" in text
    assert "sbatch.partition': is set by the campaign" in text


def test_the_cli_says_what_is_wrong_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = write_campaign(tmp_path, [local_target("a")], experimnt="x.yaml")
    for action in ("run", "status", "report"):
        assert main(["campaign", action, str(path), "--output-dir", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert "experimnt': unknown key" in err and "Traceback" not in err
    assert not (tmp_path / "offers").exists()  # nothing frozen, nothing submitted


def test_the_sbatch_script_requests_whole_gpus_the_partition_and_the_setup(
    tmp_path: Path,
) -> None:
    node = load_campaign(write_campaign(tmp_path, [SLURM_TARGET])).targets[0]
    script = sbatch_script(node, tmp_path / "jobs" / "h100-node")
    lines = script.splitlines()
    for expected in (
        "#SBATCH --partition=gpu-h100",
        "#SBATCH --account=proj-42",
        "#SBATCH --gres=gpu:h100:2",
        "#SBATCH --time=240",
        "#SBATCH --exclusive",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --qos=high",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --job-name=gpubench-h100-node",
        "#SBATCH --signal=USR2@120",
    ):
        assert expected in lines, expected
    setup = lines.index("# setup")
    first, second = SLURM_TARGET["slurm"]["setup"]
    assert lines[setup + 1 : setup + 5 : 2] == [f"{{ {first}", f"{{ {second}"]  # in order
    assert "--wckey" not in script  # submitit's default workload key is not sent (issue 26 §6)
    command = next(line for line in lines if "submitit.core._submit" in line)
    assert command.startswith("srun --unbuffered")
    assert "/shared/venvs/gpubench/bin/python -u -m submitit.core._submit" in command
    assert lines.index("# setup") < lines.index("# command")  # setup runs before the job


def test_gres_defaults_to_the_gpu_count_and_exclusive_can_be_turned_off(tmp_path: Path) -> None:
    plain = {
        "id": "n",
        "offer": {"id": "h200-example", "days": 30, "lots": 1},
        "slurm": {"partition": "p", "gpus": 1, "time_limit_minutes": 30, "exclusive": False},
    }
    node = load_campaign(write_campaign(tmp_path, [plain])).targets[0]
    params = slurm_parameters(node)
    assert params["gres"] == "gpu:1" and "exclusive" not in params
    assert "account" not in params and params["time"] == 30


def test_a_cpu_partition_target_requests_no_gpu_at_all(tmp_path: Path) -> None:
    """gpus: 0 is a CPU partition: no --gres (sbatch refuses a gres on a node without GPUs)."""
    cpu = {
        "id": "cpu-node",
        "offer": {"id": "h100-example", "days": 7, "lots": 1},
        "slurm": {"partition": "debug", "gpus": 0, "time_limit_minutes": 30},
    }
    node = load_campaign(write_campaign(tmp_path, [cpu])).targets[0]
    assert (node.gpus, node.gres) == (0, None)
    assert node.describe()["gpus"] == 0  # campaign.json keeps the request as submitted
    script = sbatch_script(node, tmp_path / "jobs" / "cpu-node")
    assert "#SBATCH --partition=debug" in script.splitlines()
    assert "--gres" not in script and "--gpus" not in script


def test_gpu_counts_below_zero_and_a_gres_on_a_cpu_target_say_the_right_fix(
    tmp_path: Path,
) -> None:
    slurm = {"partition": "p", "time_limit_minutes": 30}
    targets = [
        {"id": "a", "offer": {"id": "h100-example", "days": 7, "lots": 1}, "slurm": {**slurm}},
        {"id": "b", "offer": {"id": "h100-example", "days": 7, "lots": 1}, "slurm": {**slurm}},
    ]
    targets[0]["slurm"]["gpus"] = -1
    targets[1]["slurm"].update(gpus=0, gres="gpu:1")
    with pytest.raises(ProtocolError) as caught:
        load_campaign(write_campaign(tmp_path, targets))
    text = str(caught.value)
    assert "slurm.gpus': must be an integer >= 0, got -1" in text
    assert "fix: write a whole number of GPUs, e.g. 1, or 0 for a CPU-only partition" in text
    assert "'gpu:1' requests GPUs, but gpus is 0 (a CPU-only target)" in text


def test_a_failing_setup_line_stops_the_job_and_names_itself(tmp_path: Path) -> None:
    """The checked setup lines, run by bash as the sbatch script runs them (issue 26 §4)."""
    import subprocess

    lines = ["echo one  # a comment stays a comment", "(exit 3)", "echo never"]
    script = "\n".join(checked_setup(lines)) + "\necho the job\n"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 3
    assert done.stdout == "one\n"
    assert done.stderr.strip() == "gpubench: setup line 2 failed with exit code 3: (exit 3)"
    ok = subprocess.run(
        ["bash", "-c", " && ".join([*checked_setup(["true"]), "echo the job"])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (ok.returncode, ok.stdout) == (0, "the job\n")  # the local executor joins with &&


def test_the_error_of_a_job_trace_keeps_a_multi_line_message() -> None:
    trace = (
        "Traceback (most recent call last):\n"
        '  File "/x/submit.py", line 3, in <module>\n'
        "    run()\n"
        '  File "/x/lock.py", line 9, in freeze\n'
        "    raise ProtocolError(...)\n"
        "gpubench_nb.errors.ProtocolError: R1.3: the protocol changed:\n"
        "  declaration.timing.repeats: 1 -> 2\n"
    )
    assert error_of_trace(trace) == (
        "gpubench_nb.errors.ProtocolError: R1.3: the protocol changed:\n"
        "  declaration.timing.repeats: 1 -> 2"
    )


def test_the_shipped_example_campaign_validates() -> None:
    campaign = load_campaign(REPO / "parameters" / "campaign-offers.yaml")
    assert [(t.id, t.reach) for t in campaign.targets] == [
        ("here-cpu", "local"),
        ("h200-partition", "slurm"),
        ("b200-rented", "manual"),
    ]
    assert campaign.experiment_path == EXPERIMENT
    node = campaign.targets[1]
    assert (node.gres, node.exclusive, node.sbatch) == ("gpu:1", True, {"qos": "normal"})


def test_a_null_slurm_section_is_no_way_to_reach_a_target(tmp_path: Path) -> None:
    target = {"id": "n", "offer": {"id": "h100-example", "days": 7, "lots": 1}, "slurm": None}
    with pytest.raises(ProtocolError, match=r"declares 0 ways to reach it \(none\)"):
        load_campaign(write_campaign(tmp_path, [target]))

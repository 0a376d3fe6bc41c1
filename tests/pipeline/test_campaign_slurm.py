"""Slurm's word on a job without accounting, and why a job ended without result (issue 26 §3-4).

Stand-in ``sacct``/``scontrol``/``squeue`` on an otherwise empty PATH print what Slurm 22.05
printed on the test cluster (accounting off). The real cluster is in test_campaign_real_slurm.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpubench_nb.pipeline.campaign.slurm import ended_without_result, job_state

NO_ACCOUNTING = "#!/bin/sh\necho 'Slurm accounting storage is disabled' >&2\nexit 1\n"
FAILED = (
    "#!/bin/sh\necho 'JobId=7 JobName=gpubench-broken JobState=FAILED Reason=NonZeroExitCode "
    "Dependency=(null) ExitCode=1:0 NodeList=gpubench-node'\n"
)
CANCELLED = "#!/bin/sh\necho 'JobId=8 JobState=CANCELLED Reason=None ExitCode=0:15'\n"
PURGED = "#!/bin/sh\necho 'slurm_load_jobs error: Invalid job id specified' >&2\nexit 1\n"
EMPTY = "#!/bin/sh\nexit 0\n"
RUNNING = "#!/bin/sh\necho RUNNING\n"


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Put stand-in Slurm tools (and nothing else) on PATH."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))

    def put(**scripts: str) -> None:
        for name, text in scripts.items():
            (folder / name).write_text(text)
            (folder / name).chmod(0o755)

    return put


def test_without_accounting_the_controller_says_how_the_job_ended(tools) -> None:
    tools(sacct=NO_ACCOUNTING, scontrol=FAILED)
    state = job_state("7")
    assert (state.state, state.exit_code, state.source, state.live) == (
        "FAILED",
        "1:0",
        "scontrol",
        False,
    )
    assert state.describe() == "FAILED, exit code 1 (reason NonZeroExitCode; scontrol)"
    tools(scontrol=CANCELLED)
    assert job_state("8").describe() == "CANCELLED, signal 15 (scontrol)"


def test_a_job_the_controller_forgot_has_ended_and_one_nobody_knows_is_waited_for(
    tools,
) -> None:
    tools(sacct=NO_ACCOUNTING, scontrol=PURGED, squeue=EMPTY)
    ended = job_state("9")
    assert ended.state == "ENDED" and not ended.live
    tools(scontrol=PURGED, squeue=RUNNING)
    assert job_state("9").state == "RUNNING"  # squeue still lists it
    (Path(os.environ["PATH"]) / "scontrol").unlink()
    (Path(os.environ["PATH"]) / "squeue").unlink()
    unknown = job_state("9")  # no tool answers: never assume the job is gone
    assert unknown.state == "UNKNOWN" and unknown.live
    assert "accounting storage is disabled" in unknown.describe()


def test_sacct_is_read_by_its_header_where_accounting_is_on(tools) -> None:
    tools(sacct='#!/bin/sh\nprintf "JobID|State|ExitCode\\n12|CANCELLED by 0|0:15\\n"\n')
    state = job_state("12")
    assert (state.state, state.exit_code, state.source) == ("CANCELLED", "0:15", "sacct")


def test_the_reason_names_exit_code_and_err_tail_and_says_killed_only_when_it_was(
    tools, tmp_path: Path
) -> None:
    err = tmp_path / "7_0_log.err"
    lines = [f"noise {i}" for i in range(20)]
    lines.append("gpubench: setup line 2 failed with exit code 1: module load cuda/99")
    err.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tools(sacct=NO_ACCOUNTING, scontrol=FAILED)
    text = ended_without_result({"job_id": "7", "logs": {"stderr": str(err)}}, job_state("7"))
    assert text.startswith("Slurm job 7 ended without a result: FAILED, exit code 1")
    assert "its own commands failed" in text and "killed" not in text
    assert text.endswith("    gpubench: setup line 2 failed with exit code 1: module load cuda/99")
    assert "noise 8" not in text and "noise 9" in text  # the last 12 lines
    tools(scontrol=CANCELLED)
    cancelled = ended_without_result(
        {"job_id": "8", "logs": {"stderr": str(tmp_path / "missing.err")}}, job_state("8")
    )
    assert "stopped from outside (scancel, pre-emption" in cancelled
    assert "is empty or missing" in cancelled


def test_a_running_job_shows_no_exit_code(tools) -> None:
    tools(sacct=NO_ACCOUNTING, scontrol="#!/bin/sh\necho 'JobId=5 JobState=RUNNING ExitCode=0:0'\n")
    assert job_state("5").describe() == "RUNNING (scontrol)"

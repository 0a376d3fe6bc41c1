"""Slurm's word on a job without accounting, and why a job ended without result (issue 26 §3-4).

Stand-in ``sacct``/``scontrol``/``squeue`` on an otherwise empty PATH print what Slurm 22.05
printed on the test cluster (accounting off). The real cluster is in test_campaign_real_slurm.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpubench_nb.pipeline.campaign import slurm
from gpubench_nb.pipeline.campaign.slurm import ended_without_result, job_state, node_reason

NO_ACCOUNTING = "#!/bin/sh\necho 'Slurm accounting storage is disabled' >&2\nexit 1\n"
FAILED = (
    "#!/bin/sh\necho 'JobId=7 JobName=gpubench-broken JobState=FAILED Reason=NonZeroExitCode "
    "Dependency=(null) ExitCode=1:0 NodeList=gpubench-node'\n"
)
CANCELLED = "#!/bin/sh\necho 'JobId=8 JobState=CANCELLED Reason=None ExitCode=0:15'\n"
PURGED = "#!/bin/sh\necho 'slurm_load_jobs error: Invalid job id specified' >&2\nexit 1\n"
EMPTY = "#!/bin/sh\nexit 0\n"
RUNNING = "#!/bin/sh\necho RUNNING\n"
CTLD_DOWN = (  # what 22.05's clients print while slurmctld is stopped (after ~2 MessageTimeout)
    '#!/bin/sh\necho scontrol >> "$CALLS"\n'
    "echo 'slurm_load_jobs error: Unable to contact slurm controller (connect failure)' >&2\n"
    "exit 1\n"
)


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


def test_a_controller_that_does_not_answer_is_asked_once_and_said_unreachable(
    tools, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "calls"
    monkeypatch.setenv("CALLS", str(calls))
    monkeypatch.setattr(slurm, "_DOWN", [])
    tools(sacct=NO_ACCOUNTING, scontrol=CTLD_DOWN, squeue=f"#!/bin/sh\necho squeue >> {calls}\n")
    state = job_state("5")
    assert state.state == "UNKNOWN" and state.live  # never failed, never submitted again
    assert state.describe().startswith("UNKNOWN (controller unreachable (scontrol: slurm_load")
    assert "when `scontrol ping` answers" in state.describe()
    assert job_state("6") is state  # the other jobs meanwhile: the same answer, no tool waits
    assert calls.read_text().split() == ["scontrol"]  # squeue would have waited as long
    monkeypatch.setattr(slurm, "REUSE_SECONDS", 0.0)
    tools(scontrol="#!/bin/sh\necho 'JobId=5 JobState=RUNNING ExitCode=0:0'\n")
    assert job_state("5").describe() == "RUNNING (scontrol)"  # back: asked again


def test_scontrol_names_the_node_and_requeues_and_sinfo_why_a_node_is_out(tools) -> None:
    requeued = "JobId=5 JobState=PENDING Reason=BeginTime Requeue=1 Restarts=1 NodeList="
    tools(sacct=NO_ACCOUNTING, scontrol=f"#!/bin/sh\necho '{requeued}'\n")
    assert (job_state("5").node, job_state("5").restarts) == (None, 1)
    tools(
        scontrol="#!/bin/sh\necho 'JobId=5 JobState=RUNNING Restarts=1 NodeList=n3 BatchHost=n3'\n"
    )
    assert (job_state("5").node, job_state("5").restarts) == ("n3", 1)
    tools(sinfo="#!/bin/sh\necho 'down*|Not responding'\n")
    assert node_reason("n2") == "node n2 down*: Not responding"
    tools(sinfo="#!/bin/sh\necho 'idle|none'\n")
    assert node_reason("n2") == "node n2 idle: no reason given"  # resumed: its reason is gone
    assert node_reason(None) == "an unknown node"
    failed = "JobId=7 JobState=NODE_FAIL Reason=NodeDown ExitCode=0:0 NodeList=n2 BatchHost=n2"
    tools(
        scontrol=f"#!/bin/sh\necho '{failed}'\n", sinfo="#!/bin/sh\necho 'down*|Not responding'\n"
    )
    text = ended_without_result({"job_id": "7"}, job_state("7"))
    assert "NODE_FAIL" in text and "stopped from outside" in text
    assert "node failure); node n2 down*: Not responding" in text

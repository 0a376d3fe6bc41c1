"""A malformed GPUBENCH_FAULT is refused once, before the first kernel, by `run`, `classify`
and `campaign run` alike (exit 2): it used to make `run` seal a bundle whose every row was a
failed run, while `classify` refused the same value."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench_nb.cli import main
from gpubench_nb.engine.faults import FaultSpecError

DEMO = Path(__file__).resolve().parents[2] / "parameters" / "demo.yaml"
BAD = ["delay:-1@batch:1", "oom@batch:0", "boom@load", "oom@batch:1@phase:load"]


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize("command", ["run", "classify"])
def test_run_and_classify_refuse_before_any_kernel(
    tmp_path: Path, capsys, monkeypatch, value: str, command: str
) -> None:
    monkeypatch.setenv("GPUBENCH_FAULT", value)
    out = tmp_path / "out"
    argv = [command, str(DEMO), "--output-dir", str(out)]
    argv += ["--variant", "b1"] if command == "classify" else []
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "GPUBENCH_FAULT entry" in err and "Traceback" not in err
    assert not out.exists()  # no folder, no bundle, no kernel started


def test_campaign_run_refuses_before_submitting(tmp_path: Path, monkeypatch) -> None:
    from gpubench_nb.pipeline.campaign.run import run_campaign

    monkeypatch.setenv("GPUBENCH_FAULT", BAD[0])
    with pytest.raises(FaultSpecError, match="delay needs SECONDS > 0"):
        run_campaign(tmp_path / "campaign.yaml", output_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("error@batch:99999", "it never fires: 1000 texts make 1000 batches at most"),
        ("error@batch:1@variant:b9", "it never fires: no variant 'b9' is declared"),
        ("oom@batch:300@variant:b4", "it never fires: 1000 texts make 250 batches at most"),
    ],
)
def test_a_fault_that_can_never_fire_is_refused_before_any_kernel(
    tmp_path: Path, capsys, monkeypatch, value: str, said: str
) -> None:
    """Was: accepted, and the run sealed without the failure it was asked to inject."""
    monkeypatch.setenv("GPUBENCH_FAULT", value)
    out = tmp_path / "out"
    assert main(["run", str(DEMO), "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"GPUBENCH_FAULT entry {value!r}: {said}" in err and "Traceback" not in err
    assert not list(out.rglob("*.ipynb"))  # no kernel ran

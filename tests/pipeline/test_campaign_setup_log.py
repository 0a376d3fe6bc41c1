"""A local campaign target whose setup line fails is reported with its log: the line, its exit
code, where the log is (it was 'ended without a result; its process is gone', no log)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def test_a_failed_local_setup_line_is_reported_from_its_log(tmp_path: Path) -> None:
    pytest.importorskip("submitit", reason="campaigns need submitit")
    from gpubench_nb.pipeline.campaign.run import run_campaign
    from gpubench_nb.pipeline.campaign.view import campaign_status

    target = {"id": "here", "offer": {"id": "h100-example", "days": 7, "lots": 1},
              "local": {"gpus": 0, "setup": ["echo preparing", "false"]}}  # fmt: skip
    data = {"campaign_id": "setup", "experiment": str(REPO / "parameters" / "demo.yaml"),
            "offers": str(REPO / "parameters" / "offers.yaml"), "targets": [target]}  # fmt: skip
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    result = run_campaign(campaign, output_dir=tmp_path / "out", poll_seconds=0.2, echo=print)
    assert result.failed
    [row] = campaign_status(campaign, output_dir=tmp_path / "out")
    assert "gpubench: setup line 2 failed with exit code 1: false" in row["error"], row
    assert row["log"] and Path(row["log"]).name.endswith("_0_log.err")

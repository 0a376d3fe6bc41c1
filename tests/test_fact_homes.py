"""Facts with one home: each is asked from the module that owns it, never written out again."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from gpubench_nb.errors import ProtocolError
from gpubench_nb.pipeline.campaign.state import frozen_dir_for
from gpubench_nb.pipeline.interrupt import Interrupted, record_interruption
from gpubench_nb.protocol import bundle as layout
from gpubench_nb.protocol.clock import parse_utc, utc_text
from gpubench_nb.protocol.lock import read_given_lock


def test_the_missing_campaign_lock_message_names_where_a_campaign_keeps_it(tmp_path) -> None:
    with pytest.raises(ProtocolError) as caught:
        read_given_lock(tmp_path / "nowhere.json")
    where = frozen_dir_for(Path("outputs/<campaign>")) / layout.LOCK_NAME
    assert f"({where})" in str(caught.value)


def test_utc_text_parses_back_to_the_same_moment() -> None:
    moment = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
    assert parse_utc(utc_text(moment)) == moment
    assert parse_utc("2026-12-01") == datetime(2026, 12, 1, tzinfo=timezone.utc)
    with pytest.raises(ValueError):
        parse_utc("first of December")


def test_an_interruption_records_the_job_id_slurm_gave_under_either_name(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv("SLURM_JOBID", "42")  # older Slurm exports only this name
    entry = record_interruption(tmp_path, None, Interrupted("SIGTERM"))
    assert entry["slurm_job_id"] == "42"


@pytest.mark.parametrize(
    ("argv", "function"),
    [
        (["run", "e.yaml"], "gpubench_nb.pipeline.progress:run_with_progress"),
        (["accept", "e.yaml", "p.jsonl"], "gpubench_nb.protocol.accept:accept_predictions"),
        (["report", "a", "b"], "gpubench_nb.report.render:render_comparison"),
        (["classify", "e.yaml", "--variant", "b8"], "gpubench_nb.pipeline.classify:classify"),
        (
            ["ledger", "a", "--offer", "h", "--days", "7", "--lots", "1", "--start", "2026-12-01"],
            "gpubench_nb.economics.ledger:ledger_report",
        ),
        (["campaign", "run", "c.yaml"], "gpubench_nb.pipeline.campaign.run:run_campaign"),
        (["campaign", "status", "c.yaml"], "gpubench_nb.pipeline.campaign.view:campaign_status"),
        (["campaign", "report", "c.yaml"], "gpubench_nb.pipeline.campaign.view:campaign_report"),
    ],
)
def test_each_parsed_argument_is_named_as_its_library_parameter(argv, function) -> None:
    """cli.py passes the parsed arguments on by name: every one is a parameter of the call."""
    import importlib
    import inspect

    from gpubench_nb.cli import _given, build_parser

    module, name = function.split(":")
    signature = inspect.signature(getattr(importlib.import_module(module), name))
    extra = {"stream": None} if name == "run_with_progress" else {}
    signature.bind(**_given(build_parser().parse_args(argv)), **extra)

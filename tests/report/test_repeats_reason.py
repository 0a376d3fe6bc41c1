"""The report's header prints why fewer than five repeats were run (R3.4, issue 11 §6)."""

from __future__ import annotations

from pathlib import Path

from gpubench_nb.protocol.lock import LockRecord
from gpubench_nb.protocol.records import EnvironmentRecord
from gpubench_nb.report.bundles import Bundle
from gpubench_nb.report.render import header_table


def _bundle(timing: dict) -> Bundle:
    lock = {"experiment_id": "e", "declaration": {"timing": timing}, "fingerprints": {}}
    return Bundle(
        path=Path("e"),
        label="e",
        lock=LockRecord.from_dict(lock),
        environment=EnvironmentRecord(),
        economics=None,
        rows=[],
    )


def test_the_declared_reason_for_fewer_repeats_is_in_the_header() -> None:
    reason = "pilot on a shared machine; five repeats in the main study"
    header = header_table([_bundle({"repeats": 3, "repeats_reason": reason})])
    shown = header.loc["repeats"].iloc[0]
    assert shown == f"3: fewer than the 5 of R3.4, because: {reason}"


def test_five_repeats_show_the_number_alone() -> None:
    header = header_table([_bundle({"repeats": 5})])
    assert header.loc["repeats"].iloc[0] == 5

"""Run, schedule and campaign statuses are enums (protocol.status), written as their value: no
module spells a status word of its own (R3.6, R3.7)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from gpubench_nb.protocol.records import Phase
from gpubench_nb.protocol.status import JOB_OUT, RunStatus, ScheduleStatus, TargetState

PACKAGE = Path(__file__).resolve().parents[2] / "gpubench_nb"
# status words with no other meaning in the package ("running", "failed", "manual" have some)
ONLY_STATUSES = {"finished", "submitted", "completed", "done", "pending"}


def test_no_module_spells_a_status_word_outside_the_enums() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{node.lineno} {node.value!r}"
        for path in PACKAGE.rglob("*.py")
        if path.name != "status.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in ONLY_STATUSES
    ]
    assert found == []


def test_a_status_is_written_and_compared_as_its_value() -> None:
    record = {"status": RunStatus.REFUSED, "state": TargetState.SUBMITTED, "phase": Phase.COLD}
    assert json.loads(json.dumps(record)) == {
        "status": "refused",
        "state": "submitted",
        "phase": "cold",
    }
    assert f"{ScheduleStatus.DONE:>6}" == "  done" and str(TargetState.MANUAL) == "manual"
    assert "running" in JOB_OUT and "completed" not in JOB_OUT  # campaign.json's plain words

"""The report's numbers on the kept bundle (tests/fixtures/main-bundle) are the ones the report
showed before its per-variant facts were gathered into one summary: same medians, ranges, rates,
acceptance and conditions, cell for cell (main_bundle_numbers.json was written by the report of
main 6c29b74; the screens' wording may change, their numbers may not)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpubench_nb.report import render as report

FIXTURE = Path(__file__).parents[1] / "fixtures" / "main-bundle"
NUMBERS = Path(__file__).with_name("main_bundle_numbers.json")


def _cells(frame) -> dict[str, dict[str, str]]:
    """Each row as {column: text}, keyed by its index joined with ' | '."""
    out = {}
    for index, row in frame.iterrows():
        key = " | ".join(map(str, index)) if isinstance(index, tuple) else str(index)
        out[key] = {str(k): str(v) for k, v in row.items()}
    return out


def numbers(bundle: Path) -> dict[str, object]:
    """What the report shows of the bundle, as text: the cells that carry numbers."""
    bundles = report.load_bundles([bundle])
    rows = report.summary_of(bundles)
    decision = report.decision_frame(report.decision_view_of(bundles, rows))
    return {
        "decision": _cells(decision),
        "summary": _cells(report.summary_table(rows)),
        "tokens": str(report.token_table(rows)),
        "failures": str(report.failures_table(rows)),
        "memory": str(report.memory_table(rows)),
        "conditions": _cells(report.conditions_table(rows)),
    }


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "main-bundle"))


def _kept(expected: object, found: object) -> object:
    """``found`` cut to the keys ``expected`` has: a column added since is not compared."""
    if isinstance(expected, dict) and isinstance(found, dict):
        return {k: _kept(v, found.get(k)) for k, v in expected.items()}
    return found


def test_the_report_shows_the_same_numbers_as_before(bundle: Path) -> None:
    expected = json.loads(NUMBERS.read_text(encoding="utf-8"))
    found = numbers(bundle)
    assert set(found) == set(expected)
    for screen in expected:
        assert _kept(expected[screen], found[screen]) == expected[screen], screen
    assert found["decision"].keys() == expected["decision"].keys()  # no row lost or added


if __name__ == "__main__":  # written once, at main 6c29b74: keep it, do not regenerate
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(shutil.copytree(FIXTURE, Path(tmp) / "main-bundle"))
        text = json.dumps(numbers(copy), indent=1, ensure_ascii=False, sort_keys=True)
        NUMBERS.write_text(text + "\n", encoding="utf-8")

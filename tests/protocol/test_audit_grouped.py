"""check-bundle says a failure found in every run (or file) once, with its count and places
(issue 25), on a copy of the bundle made by main (tests/fixtures/main-bundle: 4 measured runs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpubench_nb.cli import main
from gpubench_nb.protocol import bundle as layout
from gpubench_nb.protocol.audit import check_bundle

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "main-bundle"
RUNS = ("b1/cold-1", "b4/cold-1", "b1/warm-1", "b4/warm-1")  # in the CSV's order


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    copy = Path(shutil.copytree(FIXTURE, tmp_path / "main-bundle"))
    for checks in copy.glob("runs/*/*/checks.json"):
        checks.unlink()  # every run loses its archived checks (R1.6)
    return copy


def test_a_file_missing_from_every_run_is_one_manifest_problem(
    bundle: Path, capsys: pytest.CaptureFixture
) -> None:
    (problem,) = check_bundle(bundle)
    assert problem.startswith("manifest: runs/b1/cold-1/checks.json: listed in the manifest")
    assert problem.endswith(
        "; the same in 4 files (files runs/b1/cold-1/checks.json, runs/b1/warm-1/checks.json, "
        "runs/b4/cold-1/checks.json, runs/b4/warm-1/checks.json)"
    )
    assert main(["check-bundle", str(bundle)]) == 1
    assert capsys.readouterr().err.count("\n") == 1  # one line, not one per file


def test_a_failure_in_every_run_is_said_once_with_the_runs(bundle: Path) -> None:
    layout.write_manifest(bundle)  # resealed: the manifest no longer stands in the way
    (problem,) = check_bundle(bundle)
    assert problem.startswith("b1/cold-1: checks.json is missing (R1.6)")
    assert "(R1.6)" in problem
    assert problem.endswith(f"; the same in 4 runs (runs {', '.join(RUNS)})")

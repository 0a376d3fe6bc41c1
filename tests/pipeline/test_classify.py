"""classify: one accepted-or-not pass, sealed, and counted by the rental ledger (R1.5, R5.3)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from gpubench_nb.cli import main as cli_main
from gpubench_nb.economics.ledger import build_ledger
from gpubench_nb.errors import ProtocolError
from gpubench_nb.pipeline.classify import CLASSIFY_NOTE, classify
from gpubench_nb.protocol import bundle as layout
from gpubench_nb.protocol.audit import check_bundle
from gpubench_nb.protocol.results import read_rows, validate_csv
from tests.support.experiments import write_yaml
from tests.support.ledger import make_offer

H100 = make_offer("h100-test", "NVIDIA H100 80GB", 1, (300, 700, 3000))
UUID = "GPU-11111111-0000-0000-0000-000000000000"


def fake_h100(monkeypatch: pytest.MonkeyPatch) -> None:
    """This CPU machine recorded as an H100 box (a fake, as for every GPU path in tests): only
    the environment is faked; the pass, the checks and the seal are real."""
    from gpubench_nb.engine import environment as envmod
    from gpubench_nb.pipeline import run as runmod

    real = envmod.capture_environment

    def capture(*args, **kwargs):
        env = real(*args, **kwargs)
        env.update(gpu_model="NVIDIA H100 80GB HBM3", gpu_count=1, gpu_uuids=[UUID])
        env.update(visible_gpu_uuids=[UUID], hostname="rented-node")
        return env

    monkeypatch.setattr(envmod, "capture_environment", capture)
    monkeypatch.setattr(runmod, "capture_environment", capture)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """A 40-item eval corpus and a tiny bow model (the same as test_run's)."""
    from gpubench_nb.engine.backends import build_model
    from gpubench_nb.protocol.experiment import load_experiment
    from tests.support.experiments import subset

    root = tmp_path_factory.mktemp("classify")
    subset(data_dir / "eval.jsonl", root / "eval.jsonl", 40)
    subset(data_dir / "train.jsonl", root / "train.jsonl", 400)
    subset(data_dir / "tune.jsonl", root / "tune.jsonl", 100)
    write_yaml(root, "experiment.yaml")
    build_model(load_experiment(root / "experiment.yaml"))
    return root


@pytest.fixture(autouse=True)
def _no_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUBENCH_FAULT", raising=False)


def test_classify_writes_a_sealed_bundle_the_ledger_counts(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = datetime.now(timezone.utc) - timedelta(hours=1)
    on_cpu = classify(workspace / "experiment.yaml", "b1", output_dir=tmp_path / "cpu")
    ledger = build_ledger(H100, 3, 1, start, [on_cpu.bundle_dir])
    assert ledger["accepted_corpora"] == 0  # accepted, but on the CPU: not the H100's (R5.7)
    assert ledger["left_out"][0]["reason"].startswith("not measured on this hardware")

    fake_h100(monkeypatch)
    first = classify(workspace / "experiment.yaml", "b1", output_dir=tmp_path)
    bundle = first.bundle_dir
    assert bundle.parent == tmp_path and bundle.name.startswith("run-test-classify-b1-")
    rows = read_rows(bundle / layout.CSV_NAME)
    assert len(rows) == 1 and rows[0]["phase"] == "cold"  # one row, no repeats (R5.3)
    assert rows[0]["notes"].startswith(CLASSIFY_NOTE)
    assert validate_csv(bundle / layout.CSV_NAME) == []
    run = layout.run_dir(bundle, "b1", "cold", 1)
    assert (run / "predictions.jsonl").is_file() and (run / "checks.json").is_file()
    assert (bundle / layout.ENVIRONMENT_NAME).is_file()
    assert layout.verify_manifest(bundle) == []  # sealed (R5.6)
    assert check_bundle(bundle) == []  # every check re-derived from the kept files (R1.6)
    assert first.accepted is rows[0]["corpus_accepted"] is True

    # The same corpus classified again: two bundles, one distinct accepted corpus (R5.3).
    second = classify(workspace / "experiment.yaml", "b1", output_dir=tmp_path)
    ledger = build_ledger(H100, 3, 1, start, [bundle, second.bundle_dir, on_cpu.bundle_dir])
    assert ledger["accepted_corpora"] == 1 and ledger["cost_per_accepted_usd_minor"] == 300
    assert len(ledger["kept"]) == 2 and len(ledger["left_out"]) == 1
    assert ledger["machine"]["gpu_uuids"] == [UUID]
    assert ledger["window"]["status"] == "so far"  # the 3-day window is still running


def test_a_non_reference_variant_needs_the_reference_measured_first(
    workspace: Path, tmp_path: Path
) -> None:
    with pytest.raises(ProtocolError, match=r"R1\.3: .*--reference-bundle"):
        classify(workspace / "experiment.yaml", "b4", output_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # refused before anything was written
    reference = classify(workspace / "experiment.yaml", "b1", output_dir=tmp_path)
    result = classify(
        workspace / "experiment.yaml",
        "b4",
        output_dir=tmp_path / "b4",
        reference_bundle=reference.bundle_dir,
    )
    kept = json.loads((result.bundle_dir / "reference.json").read_text(encoding="utf-8"))
    assert kept["reference_value"] == reference.row["quality_value"]
    checks = json.loads(
        (layout.run_dir(result.bundle_dir, "b4", "cold", 1) / "checks.json").read_text("utf-8")
    )
    assert checks["reference_value"] == kept["reference_value"]
    assert result.accepted is checks["corpus_accepted"]
    assert check_bundle(result.bundle_dir) == []  # audit re-derives with the kept reference


def test_cli_classify_exit_codes(workspace: Path, tmp_path: Path, capsys) -> None:
    argv = ["classify", str(workspace / "experiment.yaml"), "--output-dir", str(tmp_path)]
    assert cli_main([*argv, "--variant", "b1"]) == 0
    assert "b1: corpus ACCEPTED (R1.5)" in capsys.readouterr().out
    assert cli_main([*argv, "--variant", "b9"]) == 2
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.slow
def test_classify_times_the_import_of_torch(workspace: Path, tmp_path: Path) -> None:
    """import_seconds says "imports (torch included)": a fresh classify's figure is at least half
    of a fresh ``import torch`` timed beside it (the environment's probe once imported torch
    before the run's clock started: 0.128 s against seconds)."""
    import subprocess
    import sys

    def fresh(code: str, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
        )
        return done.stdout.strip().splitlines()[-1]

    timed = "import time; t = time.perf_counter(); import torch; print(time.perf_counter() - t)"
    run = (
        "import sys; from gpubench_nb.pipeline.classify import classify; "
        "print(classify(sys.argv[1], 'b1', output_dir=sys.argv[2]).bundle_dir)"
    )
    before = float(fresh(timed))
    bundle = Path(fresh(run, str(workspace / "experiment.yaml"), str(tmp_path)))
    after = float(fresh(timed))
    record = json.loads((layout.run_dir(bundle, "b1", "cold", 1) / "run.json").read_text())
    assert record["import_seconds"] >= 0.5 * min(before, after), (record["import_seconds"], before)

"""Issue 22 §1: two `gpubench-nb run` of one install at once, in two folders, do not meet.

Was: the kernels' IPC sockets were named ``kernel-ipc-N`` in the kernels' working folder (the
checkout), so two runs started together connected to each other's kernels and both ended with
failed rows ("Invalid Signature", "Kernel didn't respond"). Each process now keeps its kernels'
connection files and sockets in a private runtime folder (0700), removed when it exits.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gpubench_nb.engine.backends import build_model
from gpubench_nb.protocol.audit import check_bundle
from gpubench_nb.protocol.bundle import CSV_NAME, MANIFEST_NAME
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.results import read_rows
from tests.support.experiments import CLASSES, subset

REPO = Path(__file__).resolve().parents[2]
YAML = """\
experiment_id: {name}
seed: 7
corpus: {{path: eval.jsonl, train: train.jsonl, tune: tune.jsonl}}
classes: {classes}
output_format: predictions_jsonl
quality: {{metric: macro_f1, threshold: 0.05, tolerance: 0.5, reference_variant: b1}}
model:
  backend: bow
  path: model
  build: {{dim: 8, max_epochs: 1, train_limit: 200, tune_limit: 50}}
tokenizer: {{path: model}}
fixed: {{precision: fp32, context: 32, device: cpu, batching: corpus_order}}
knob: batch
variants:
  - {{id: b1, batch: 1}}
timing:
  scope: processing
  warmup_iterations: 1
  repeats: 2
  repeats_reason: "a test of two concurrent runs, not a timing study"
  order: alternating
"""


@pytest.mark.slow
def test_two_runs_at_once_on_one_install_both_complete_and_verify(
    tmp_path: Path, data_dir: Path
) -> None:
    # TMPDIR of both runs: their private kernel folders go here (a short path: sockets live
    # in it, and a Unix socket path holds at most 107 bytes)
    runtime = Path(tempfile.mkdtemp(prefix="g22-", dir="/tmp"))
    for name in ("alpha", "beta"):
        folder = tmp_path / name
        folder.mkdir()
        subset(data_dir / "eval.jsonl", folder / "eval.jsonl", 30)
        subset(data_dir / "train.jsonl", folder / "train.jsonl", 300)
        subset(data_dir / "tune.jsonl", folder / "tune.jsonl", 80)
        experiment = folder / "experiment.yaml"
        experiment.write_text(
            YAML.format(name=f"concurrent-{name}", classes=CLASSES), encoding="utf-8"
        )
    # the model first, built here once and copied (the same build declaration, R1.1): not the
    # point here
    model = build_model(load_experiment(tmp_path / "alpha" / "experiment.yaml"))
    shutil.copytree(model, tmp_path / "beta" / "model")
    env = {**os.environ, "TMPDIR": str(runtime)}
    env.pop("GPUBENCH_FAULT", None)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpubench_nb.cli",
                "run",
                str(tmp_path / name / "experiment.yaml"),
                "--output-dir",
                str(tmp_path / name / "outputs"),
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for name in ("alpha", "beta")
    ]
    outcomes = [proc.communicate(timeout=900) for proc in procs]
    for proc, (_out, err) in zip(procs, outcomes, strict=True):
        assert proc.returncode == 0, err[-3000:]
    for name in ("alpha", "beta"):
        bundle = tmp_path / name / "outputs" / f"concurrent-{name}"
        assert (bundle / MANIFEST_NAME).is_file()
        rows = read_rows(bundle / CSV_NAME)
        assert len(rows) == 6  # load + cold, then a warm run each, x2 repeats... all recorded
        failed = [r for r in rows if r["elapsed_seconds"] is None]
        assert failed == [], [r["notes"] for r in failed]
        assert all(r["corpus_accepted"] is True for r in rows if r["phase"] != "load")
        assert check_bundle(bundle) == []
    assert list(runtime.iterdir()) == []  # each private runtime folder removed at exit
    runtime.rmdir()
    assert not list(REPO.glob("kernel-ipc-*"))  # nothing written beside the package

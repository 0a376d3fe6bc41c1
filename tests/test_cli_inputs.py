"""The CLI never destroys its inputs and says what is wrong with a path (issue 11 §4, §6).

Each case is one the sweep tried: `accept EXP F --checks F`, `accept EXP checks.json`, `accept`
on predictions inside a sealed bundle, the same through a symlink or a hard link, a folder
where a file is expected, a file where a folder is expected, a bad `--reference-value`, and a
reader that closes stdout (`| head`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpubench_nb.cli import main
from gpubench_nb.protocol import bundle as layout

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def demo(tmp_path: Path, data_dir: Path) -> Iterator[str]:
    """A copy of the demo experiment and its corpus: a regression must not destroy the repo's."""
    (tmp_path / "parameters").mkdir()
    for name in ("demo.yaml", "offers.yaml"):  # validate reads every file it names (issue 25)
        shutil.copy(ROOT / "parameters" / name, tmp_path / "parameters" / name)
    shutil.copytree(data_dir, tmp_path / "data" / "debian-sections")
    yield str(tmp_path / "parameters" / "demo.yaml")


@pytest.fixture
def predictions(tmp_path: Path, demo: str) -> Path:
    data_dir = tmp_path / "data" / "debian-sections"
    lines = (data_dir / "eval.jsonl").read_text(encoding="utf-8").splitlines()
    gold = [json.loads(line) for line in lines]
    path = tmp_path / "preds.jsonl"
    path.write_text(
        "".join(json.dumps({"id": g["id"], "label": g["label"]}) + "\n" for g in gold),
        encoding="utf-8",
    )
    return path


def _refused(capsys: pytest.CaptureFixture, argv: list[str], *expected: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for text in expected:
        assert text in err, err
    return err


def test_checks_over_the_predictions_is_refused_and_they_survive(
    demo: str, predictions: Path, capsys: pytest.CaptureFixture
) -> None:
    before = predictions.read_bytes()
    argv = ["accept", demo, str(predictions), "--checks", str(predictions)]
    err = _refused(capsys, argv, "R5.6", "is the input", "--checks")
    assert "preds.checks.json" in err  # where to write instead
    assert predictions.read_bytes() == before


def test_predictions_named_checks_json_are_not_overwritten_by_their_report(
    demo: str, predictions: Path, capsys: pytest.CaptureFixture
) -> None:
    named = predictions.rename(predictions.with_name("checks.json"))
    before = named.read_bytes()
    _refused(capsys, ["accept", demo, str(named)], "the default checks path", "is the input")
    assert named.read_bytes() == before


@pytest.mark.parametrize("link", [os.symlink, os.link])
def test_the_same_file_through_a_link_is_refused(
    demo: str, predictions: Path, capsys: pytest.CaptureFixture, link
) -> None:
    alias = predictions.with_name("alias.json")
    link(predictions, alias)
    before = predictions.read_bytes()
    _refused(capsys, ["accept", demo, str(predictions), "--checks", str(alias)], "is the input")
    assert predictions.read_bytes() == before


def test_checks_over_the_experiment_or_the_corpus_is_refused(
    demo: str, predictions: Path, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data" / "debian-sections"
    for target in (demo, str(data_dir / "eval.jsonl"), str(data_dir / "train.jsonl")):
        before = Path(target).read_bytes()
        _refused(capsys, ["accept", demo, str(predictions), "--checks", target], "is the input")
        assert Path(target).read_bytes() == before


def test_accept_never_writes_into_a_sealed_bundle(
    demo: str, tmp_path: Path, predictions: Path, capsys: pytest.CaptureFixture
) -> None:
    bundle = tmp_path / "outputs" / "demo"
    run = layout.run_dir(bundle, "b1", "warm", 1)
    run.mkdir(parents=True)
    kept = run / "predictions.jsonl"
    kept.write_bytes(predictions.read_bytes())
    (run / "checks.json").write_text('{"corpus_accepted": true}\n', encoding="utf-8")
    layout.write_manifest(bundle)
    assert layout.verify_manifest(bundle) == []
    err = _refused(capsys, ["accept", demo, str(kept)], "inside the finished bundle", "--checks")
    assert "R5.6" in err
    explicit = ["accept", demo, str(predictions), "--checks", str(bundle / "mine.json")]
    _refused(capsys, explicit, "inside the finished bundle")
    assert layout.verify_manifest(bundle) == []  # nothing in it changed, nothing was added
    # Reading a sealed bundle's predictions is fine when the checks go elsewhere.
    assert main(["accept", demo, str(kept), "--checks", str(tmp_path / "c.json")]) == 0


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-0.1", "1.5", "abc", "1e309"])
def test_reference_value_must_be_a_finite_metric_value(
    demo: str, predictions: Path, capsys: pytest.CaptureFixture, value: str
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["accept", demo, str(predictions), "--reference-value", value])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "argument --reference-value" in err and "Traceback" not in err
    assert not predictions.with_name("checks.json").exists()


def test_reference_value_in_range_is_used(demo: str, predictions: Path, capsys) -> None:
    assert main(["accept", demo, str(predictions), "--reference-value", "1"]) == 0
    assert "vs reference 1.0000" in capsys.readouterr().out


def test_folders_where_files_are_expected_and_files_where_folders_are(
    demo: str, tmp_path: Path, predictions: Path, capsys: pytest.CaptureFixture
) -> None:
    _refused(capsys, ["validate", str(tmp_path)], "is a folder")
    _refused(capsys, ["accept", demo, str(tmp_path)], "is a folder")
    _refused(capsys, ["accept", demo, str(predictions), "--checks", str(tmp_path)], "is a folder")
    under_file = str(predictions / "checks.json")
    _refused(capsys, ["accept", demo, str(predictions), "--checks", under_file], "is a file")
    _refused(capsys, ["run", demo, "--output-dir", str(predictions)], "is a file, not a folder")
    bundle = tmp_path / "b"
    bundle.mkdir()
    _refused(capsys, ["report", str(bundle), "--out", str(bundle / "r.html")], "inside the bundle")
    _refused(capsys, ["report", str(bundle), "--out", str(tmp_path)], "is a folder")


def test_a_closed_stdout_gives_one_line_and_no_traceback(demo: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "gpubench_nb.cli", "validate", demo],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    process.stdout.close()  # the reader is gone before anything is written, as with `| head -0`
    with process.stderr:
        err = process.stderr.read().decode()
    assert process.wait() == 141
    assert "output stopped: standard output was closed" in err
    assert "Traceback" not in err and "Exception ignored" not in err


def test_calcul_forfaits_with_a_closed_stdout_gives_one_line() -> None:
    argv = ["--offers", "parameters/offers.yaml", "--offer", "h100-example", "--days", "7"]
    process = subprocess.Popen(
        [sys.executable, "-m", "gpubench_nb.economics.calcul_forfaits", *argv, "--lots", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    process.stdout.close()
    with process.stderr:
        err = process.stderr.read().decode()
    assert process.wait() == 141
    assert "output stopped" in err and "Traceback" not in err

"""Hostile inputs get a sentence and exit 2, never a hang or a traceback: a FIFO or a symlink to
/dev/stdin is refused before it is opened, for every command (R5.6); a list where a word is
declared, a label nested 100,000 deep, an offers table given as an experiment, an empty
--output-dir, a model.path that is a file or unreadable, a ledger --out over another file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpubench_nb.cli import main
from tests.support.ledger import OFFERS_YAML, make_bundle

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "parameters" / "demo.yaml"


def _gpubench(*argv: str, stdin: int | None = None) -> subprocess.CompletedProcess:
    """The command in its own process: a hang fails the test instead of stopping the suite."""
    script = Path(sys.executable).parent / "gpubench-nb"
    return subprocess.run(
        [str(script), *argv], stdin=stdin, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("command", ["csv-check", "validate", "ledger --offers"])
def test_a_fifo_is_refused_before_it_is_opened(tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    argv = [*command.split(), str(fifo)]
    if command.startswith("ledger"):
        argv += ["--offer", "h100", "--days", "7", "--lots", "1", "--start", "2026-12-01", "b"]
    done = _gpubench(*argv)
    assert done.returncode == 2, done.stderr
    assert f"{fifo} is a FIFO (named pipe), not a regular file" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_symlink_to_stdin_fed_by_an_open_pipe_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "exp.yaml"
    link.symlink_to("/dev/stdin")
    read, write = os.pipe()  # kept open: a reader would wait forever
    try:
        done = _gpubench("validate", str(link), stdin=read)
    finally:
        os.close(read)
        os.close(write)
    assert done.returncode == 2, done.stderr
    assert f"{link} is a FIFO (named pipe), not a regular file" in done.stderr


def _demo(tmp_path: Path, edit) -> Path:
    data = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    for key in ("path", "train", "tune"):
        data["corpus"][key] = str(DEMO.parent / data["corpus"][key])
    data["model"]["path"] = data["tokenizer"]["path"] = str(tmp_path / "model")
    data["pricing"]["offers"] = str(DEMO.parent / "offers.yaml")
    edit(data)
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_a_list_for_the_knob_is_a_sentence(tmp_path: Path, capsys) -> None:
    experiment = _demo(tmp_path, lambda d: d.update(knob=["batch"]))
    assert main(["validate", str(experiment)]) == 2
    err = capsys.readouterr().err
    assert "knob: must be one of precision" in err and "got ['batch']" in err


def test_a_label_nested_100000_deep_is_a_malformed_line(tmp_path: Path, capsys) -> None:
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text('{"id": "x", "label": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    assert main(["accept", str(DEMO), str(predictions), "--checks", str(tmp_path / "c.json")]) == 1
    captured = capsys.readouterr()
    assert "RecursionError" not in captured.err and "Traceback" not in captured.err
    checks = json.loads((tmp_path / "c.json").read_text(encoding="utf-8"))
    assert checks["format_valid"] is False and checks["corpus_accepted"] is False


def test_an_offers_table_given_as_the_experiment_is_named(capsys) -> None:
    assert main(["validate", str(DEMO.parent / "offers.yaml")]) == 2
    err = capsys.readouterr().err
    assert "this is an offers table (pricing.offers names it), not an experiment" in err


def test_an_empty_output_dir_is_refused(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(DEMO), "--output-dir", ""]) == 2
    assert "output_dir: empty (''), naming no path" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing written into the current folder


def test_a_model_path_that_is_a_file_is_refused_by_validate(tmp_path: Path, capsys) -> None:
    experiment = _demo(tmp_path, lambda d: None)
    (tmp_path / "model").write_text("not a model folder", encoding="utf-8")
    assert main(["validate", str(experiment)]) == 2
    assert f"model.path: {tmp_path / 'model'} is a file, not the model's folder" in (
        capsys.readouterr().err
    )


def test_unreadable_model_files_are_refused_by_validate(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """Mode 000 does not stop root, who runs these tests: os.access is made to say what it
    says to any other user (the check asks it, never the mode bits)."""
    experiment = _demo(tmp_path, lambda d: None)
    weights = tmp_path / "model" / "weights.bin"
    weights.parent.mkdir()
    weights.write_bytes(b"\0")
    weights.chmod(0)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != weights and real(p, mode))
    assert main(["validate", str(experiment)]) == 2
    assert f"model.path: {weights} cannot be read here" in capsys.readouterr().err


def test_ledger_out_over_an_unrelated_file_is_refused(tmp_path: Path, capsys) -> None:
    bundle = make_bundle(tmp_path, "a", corpus="a", date="2026-12-02")
    offers = tmp_path / "offers.yaml"
    offers.write_text(OFFERS_YAML, encoding="utf-8")
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": true}', encoding="utf-8")
    argv = ["ledger", "--offers", str(offers), "--offer", "h100", "--days", "7", "--lots", "1",
            "--start", "2026-12-01", str(bundle), "--out"]  # fmt: skip
    assert main([*argv, str(notes)]) == 2
    assert "exists and is not a ledger gpubench-nb wrote" in capsys.readouterr().err
    assert notes.read_text(encoding="utf-8") == '{"mine": true}'
    ledger = tmp_path / "ledger.json"
    assert main([*argv, str(ledger)]) == 0
    assert main([*argv, str(ledger)]) == 0  # a ledger it wrote is replaced

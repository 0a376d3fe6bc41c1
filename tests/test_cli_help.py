"""What a new user reads first (issue 25): --version, the help of every command, and what
`validate` checks of the files an experiment names."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest
import yaml

import gpubench_nb
from gpubench_nb.cli import HANDLERS, build_parser, main

ROOT = Path(__file__).resolve().parent.parent


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every command and sub-command parser, by its full name (``campaign run``)."""
    out: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                full = f"{parser.prog.removeprefix('gpubench-nb').strip()} {name}".strip()
                out[full] = sub
                out.update(_subparsers(sub))
    return out


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"gpubench-nb {gpubench_nb.__version__}"


def test_top_help_explains_an_experiment_and_the_usual_path() -> None:
    text = build_parser().format_help()
    assert "An experiment is one YAML file" in text
    path = [line.split()[:2] for line in text.splitlines() if line.startswith("  gpubench-nb ")]
    assert [command for _, command in path] == ["validate", "build-model", "run", "report"]
    assert "relative to that YAML's folder" in text and "relative to the" in text


def test_every_command_explains_its_positionals_and_shows_one_example() -> None:
    commands = _subparsers(build_parser())
    assert {"validate", "run", "report", "campaign run", "ledger"} <= set(commands)
    for name, parser in commands.items():
        text = parser.format_help()
        assert text.count("example:\n  gpubench-nb ") == 1, name
        example = text.split("example:\n  ")[1].splitlines()[0]
        assert example.startswith(f"gpubench-nb {name}"), (name, example)
        for action in parser._actions:
            if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
                assert action.help, f"{name}: positional {action.dest} has no help"


@pytest.fixture
def experiment(tmp_path: Path, data_dir: Path) -> Path:
    """A copy of the demo experiment with its corpus and offers table."""
    (tmp_path / "parameters").mkdir()
    for name in ("demo.yaml", "offers.yaml"):
        shutil.copy(ROOT / "parameters" / name, tmp_path / "parameters" / name)
    shutil.copytree(data_dir, tmp_path / "data" / "debian-sections")
    return tmp_path / "parameters" / "demo.yaml"


def _edit(path: Path, section: str, **values: str) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data[section].update(values)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def test_validate_refuses_a_missing_offers_table_naming_its_key(
    experiment: Path, capsys: pytest.CaptureFixture
) -> None:
    # Issue 25: `validate` passed, `run` failed later on the same missing file.
    assert main(["validate", str(experiment)]) == 0
    assert "pricing     offer this-machine-example" in capsys.readouterr().out
    _edit(experiment, "pricing", offers="no-such-offers.yaml")
    assert main(["validate", str(experiment)]) == 2
    err = capsys.readouterr().err
    missing = experiment.parent / "no-such-offers.yaml"
    assert f"pricing.offers: {missing} does not exist" in err
    assert "R1.3" in err and "relative to the YAML's own folder" in err


def test_validate_names_every_missing_file_at_once(
    experiment: Path, capsys: pytest.CaptureFixture
) -> None:
    _edit(experiment, "corpus", tune="absent-tune.jsonl")
    _edit(experiment, "pricing", offers="absent-offers.yaml")
    assert main(["validate", str(experiment)]) == 2
    err = capsys.readouterr().err
    assert "2 file(s) named by the experiment cannot be found" in err
    assert "corpus.tune: " in err and "pricing.offers: " in err


def test_validate_refuses_an_unknown_offer_naming_pricing(
    experiment: Path, capsys: pytest.CaptureFixture
) -> None:
    _edit(experiment, "pricing", offer="a100-nowhere")
    assert main(["validate", str(experiment)]) == 2
    err = capsys.readouterr().err
    assert "pricing.offers" in err and "unknown offer 'a100-nowhere'" in err


def test_the_readme_first_screen_holds_exactly_the_two_commands() -> None:
    # Issue 25: help and docs grew; a new user's first screen (40 lines) still shows two commands.
    screen = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:40]
    blocks = "\n".join(screen).split("```")[1::2]  # the fenced code on that screen
    commands = [
        line.split("#")[0].strip()
        for block in blocks
        for line in block.splitlines()[1:]
        if line.split("#")[0].strip()
    ]
    assert commands == ["make demo", "make test"]


def test_ledger_offers_is_read_from_the_current_folder_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # Issue 25: `ledger --offers` (default parameters/offers.yaml) run from another folder.
    monkeypatch.chdir(tmp_path)
    args = ["ledger", str(tmp_path), "--offer", "h100", "--days", "7", "--lots", "1"]
    assert main([*args, "--start", "2026-12-01"]) == 2
    err = capsys.readouterr().err
    assert f"looked for at {tmp_path / 'parameters' / 'offers.yaml'}" in err
    assert "relative to the current folder" in err and "R5.1" in err


def test_every_command_names_a_handler_that_cli_calls() -> None:
    """The parser lives in cli_parser.py; each (sub)command names its handler in cli.HANDLERS,
    and every handler there is reachable from the command line (issue 21)."""
    commands = _subparsers(build_parser())
    named = {
        name: parser.get_default("handler")
        for name, parser in commands.items()
        if parser.get_default("handler") is not None
    }
    assert set(named.values()) == set(HANDLERS)
    assert all(handler == name for name, handler in named.items())

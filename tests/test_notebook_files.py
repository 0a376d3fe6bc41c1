"""Where the shipped notebooks are, and `gpubench-nb notebooks [--copy DIR]` (issue 21 §1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench_nb.cli import main
from gpubench_nb.kernel import (
    STAGE_NOTEBOOKS,
    copy_notebooks,
    notebook_path,
    notebooks_dir,
)

REPO = Path(__file__).resolve().parents[1]


def test_the_folder_holds_every_stage_notebook() -> None:
    folder = notebooks_dir()
    assert all((folder / name).is_file() for name in STAGE_NOTEBOOKS)
    assert notebook_path("10_measure.ipynb") == folder / "10_measure.ipynb"
    with pytest.raises(ValueError, match="unknown notebook '11_x.ipynb'"):
        notebook_path("11_x.ipynb")


def test_command_prints_the_folder(capsys: pytest.CaptureFixture) -> None:
    assert main(["notebooks"]) == 0
    assert Path(capsys.readouterr().out.strip()) == notebooks_dir()


def test_copy_copies_every_notebook_byte_for_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["notebooks", "--copy", str(tmp_path / "nb")]) == 0
    printed = capsys.readouterr().out.split()
    assert sorted(Path(p).name for p in printed) == sorted(STAGE_NOTEBOOKS)
    for name in STAGE_NOTEBOOKS:
        assert (tmp_path / "nb" / name).read_bytes() == (REPO / "notebooks" / name).read_bytes()


def test_copy_refuses_to_overwrite_and_copies_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    target = tmp_path / "nb"
    target.mkdir()
    (target / "20_quality.ipynb").write_text("my edited copy", encoding="utf-8")
    assert main(["notebooks", "--copy", str(target)]) == 2
    err = capsys.readouterr().err
    assert "20_quality.ipynb already there" in err and "never overwritten" in err
    assert (target / "20_quality.ipynb").read_text(encoding="utf-8") == "my edited copy"
    assert sorted(p.name for p in target.iterdir()) == ["20_quality.ipynb"]  # nothing copied


def test_copy_refuses_a_file_as_the_folder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "f").write_text("x", encoding="utf-8")
    assert main(["notebooks", "--copy", str(tmp_path / "f")]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_copied_notebooks_are_writable_even_from_a_read_only_install(tmp_path: Path) -> None:
    import os

    for path in copy_notebooks(tmp_path / "nb"):
        assert os.access(path, os.W_OK)

"""Atomic writes leave the permissions a plain open() would (issue 16: bundles others can read)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpubench_nb.atomic import append_text_durable, write_json_atomic, write_text_atomic


@pytest.fixture
def umask() -> Iterator[None]:
    saved = os.umask(0o022)
    os.umask(saved)
    yield
    os.umask(saved)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_files_get_the_mode_of_a_plain_open(
    tmp_path: Path, umask: None, mask: int, expected: int
) -> None:
    os.umask(mask)
    plain = tmp_path / "plain.txt"
    plain.write_text("x", encoding="utf-8")  # what the user's other tools would give
    write_text_atomic(tmp_path / "atomic.txt", "x")
    write_json_atomic(tmp_path / "atomic.json", {"a": 1})
    append_text_durable(tmp_path / "appended.csv", "x\n")
    assert _mode(plain) == expected
    for name in ("atomic.txt", "atomic.json", "appended.csv"):
        assert _mode(tmp_path / name) == expected, name


def test_replacing_a_file_keeps_its_mode(tmp_path: Path, umask: None) -> None:
    os.umask(0o022)
    path = tmp_path / "MANIFEST.sha256"
    path.write_text("old", encoding="utf-8")
    path.chmod(0o640)  # e.g. a group-readable bundle on a shared server
    write_text_atomic(path, "new")
    assert path.read_text(encoding="utf-8") == "new"
    assert _mode(path) == 0o640
    path.chmod(0o444)  # read-only: still replaced (a rename), and still read-only
    write_text_atomic(path, "newer")
    assert _mode(path) == 0o444


def test_no_temporary_file_is_left_behind(tmp_path: Path) -> None:
    write_text_atomic(tmp_path / "a.txt", "x")
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]

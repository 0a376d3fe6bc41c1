"""Docstrings and comments say what the code does and why now, with rule tags (R1.1 ...); which
issue or round changed a line belongs in git log, not in the package."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gpubench_nb"
HISTORY = re.compile(r"\b[Ii]ssues? \d+|§\s?\d+")


def test_the_package_names_no_issue() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*"))
        if path.is_file() and path.suffix in {".py", ".ipynb", ""} | {".md", ".json", ".txt"}
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if HISTORY.search(line)
    ]
    assert not found, "history belongs in git log:\n" + "\n".join(found)


def test_the_check_can_fail() -> None:
    assert HISTORY.search("# kept apart from the load (issue 23 §1)")
    assert not HISTORY.search("# kept apart from the load (R3.2)")

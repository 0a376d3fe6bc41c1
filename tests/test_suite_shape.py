"""The test suite's own shape: shared set-ups live in tests/support and conftest.py, no test
module imports another, and the real Slurm starts only when asked."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import slurm_cluster

TESTS = Path(__file__).resolve().parent


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_no_test_module_imports_another() -> None:
    test_modules = {p.stem for p in TESTS.rglob("test_*.py")}
    offenders = {
        f"{path.relative_to(TESTS)} imports {name}"
        for path in TESTS.rglob("*.py")
        for name in _imported(path)
        if name.split(".")[-1] in test_modules
    }
    assert not offenders, "shared set-ups belong in tests/support or conftest.py: " + "; ".join(
        sorted(offenders)
    )


def test_the_real_slurm_starts_only_when_asked(tmp_path: Path) -> None:
    assert not slurm_cluster.opted_in({})
    assert not slurm_cluster.opted_in({"CI": "false", "GPUBENCH_TEST_SLURM": "0"})
    assert slurm_cluster.opted_in({"CI": "true"})
    assert slurm_cluster.opted_in({"GPUBENCH_TEST_SLURM": "1"})


def test_without_opt_in_no_daemon_is_started_and_the_skip_says_how(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("GPUBENCH_TEST_SLURM", raising=False)
    try:
        slurm_cluster.start(tmp_path)
    except slurm_cluster.Unavailable as exc:
        assert "GPUBENCH_TEST_SLURM=1" in str(exc) and "CI=true" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("a real Slurm was started without being asked")
    assert not any(tmp_path.iterdir())  # nothing written, nothing started

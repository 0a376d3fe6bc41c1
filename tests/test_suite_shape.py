"""The test suite's own shape: shared set-ups live in tests/support and conftest.py, no test
module imports another, and the real Slurm starts only when asked."""

from __future__ import annotations

import ast
import subprocess
import sys
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


def test_a_started_cluster_is_stopped_at_exit_and_on_sigterm(tmp_path: Path) -> None:
    """The guard behind the fixtures' finalizers: a session killed by SIGTERM (or ending without
    its finalizer) still stops every cluster it started; no daemon is needed to see it."""
    script = f"""
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {str(TESTS.parent)!r})
from tests.support import slurm_cluster
stopped = Path({str(tmp_path)!r})
class Fake(slurm_cluster.Cluster):
    def stop(self, drain=True):
        (stopped / f"{{self.root.name}}-drain={{drain}}").touch()
        slurm_cluster._STARTED.remove(self)
for name in ("one", "two"):
    slurm_cluster._guard(Fake(stopped / name, stopped / "slurm.conf", {{}}))
if sys.argv[1] == "sigterm":
    os.kill(os.getpid(), signal.SIGTERM)
"""
    for how, code in (("sigterm", -15), ("exit", 0)):
        done = subprocess.run([sys.executable, "-c", script, how], check=False, timeout=60)
        assert done.returncode == code, how
        assert sorted(p.name for p in tmp_path.iterdir()) == ["one-drain=False", "two-drain=False"]
        for path in tmp_path.iterdir():
            path.unlink()

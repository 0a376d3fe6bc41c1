"""How the package is installed: the Makefile's torch index serves torch alone, and a wheel
built from a clone names its commit in its version, so an installed (non-editable) package
still tells a bundle which code made it (R1.1)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_torch_index_serves_torch_only_and_its_dependencies_come_from_the_usual_index(
    tmp_path: Path,
) -> None:
    # Before, torch's dependencies were fetched from TORCH_INDEX too (no --no-deps).
    index = "https://download.pytorch.org/whl/cpu"
    shown = subprocess.run(
        ["make", "-n", "-B", f"VENV={tmp_path / 'v'}", f"TORCH_INDEX={index}",
         "TORCH=torch==2.13.0", str(tmp_path / "v" / ".installed")],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    installs = [line for line in shown if " -m pip install " in line and "pip>=" not in line]
    assert f'--index-url "{index}" --no-deps "torch==2.13.0"' in installs[0]
    assert all("--index-url" not in line for line in installs[1:]), installs  # the usual index
    assert installs[1].endswith("pip install -q --no-compile -e .")


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_demos_install_compiles_what_it_imports_only_and_leaves_jupyterlab_out(
    tmp_path: Path,
) -> None:
    """pip byte-compiled all ~17,000 installed files (most never imported) and installed
    JupyterLab (~3,400 files no command needs): most of the demo's install. Now every install
    is --no-compile, pip is upgraded only when too old for an editable pyproject install, and
    the demo's processes write the bytecode of what they import even under
    PYTHONDONTWRITEBYTECODE (else each kernel would compile torch again)."""
    import tomllib

    shown = subprocess.run(
        ["make", "-n", "-B", f"VENV={tmp_path / 'v'}", "TORCH=torch==2.13.0", "demo"],
        cwd=REPO, capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    ).stdout.splitlines()  # fmt: skip
    installs = [line for line in shown if " -m pip install " in line]
    assert len(installs) == 3 and all("--no-compile" in line for line in installs), installs
    assert '"pip>=21.3"' in installs[0] and "--upgrade" not in " ".join(installs)
    printed = subprocess.run(
        ["make", "-s", "-f", "-", "show"], cwd=REPO, capture_output=True, text=True,
        input=(REPO / "Makefile").read_text(encoding="utf-8")
        + '\nshow:\n\t@echo "[$$PYTHONDONTWRITEBYTECODE]"\n',
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    ).stdout  # fmt: skip
    assert printed.strip() == "[]"
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert not [d for d in project["dependencies"] if d.startswith("jupyterlab")]
    assert project["optional-dependencies"]["lab"] == ["jupyterlab>=4.0"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_wheel_built_from_a_clean_clone_names_its_commit(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    commit = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path / "w"), str(clone)],
        check=True, capture_output=True, env=dict(os.environ),
    )  # fmt: skip
    (wheel,) = (tmp_path / "w").glob("gpubench_nb-*.whl")
    version = wheel.name.split("-")[1]
    assert f"+g{commit[:7]}" in version, version  # e.g. 0.1.1.dev273+gccf706fdf
    written = zipfile.ZipFile(wheel).read("gpubench_nb/_version.py").decode()
    assert version in written  # gpubench_nb.__version__, read by code_revision

"""The package installed as a wheel, not editable, read-only, runs from another folder (issue 21).

A fresh venv gets the wheel built from a copy of the sources (``--no-deps``; torch and the
other dependencies are this test venv's, reached through a path line, not downloaded again).
Its tree is made read-only and listed; a small bow experiment then runs end to end with the
installed console script from a folder outside the checkout, ``check-bundle`` verifies it, and
the installed tree must be exactly as it was: nothing is written beside the installed package.
"""

from __future__ import annotations

import os
import shutil
import site
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from tests.pipeline.test_pipeline import make_experiment

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
SOURCES = (
    "pyproject.toml",
    "README.md",
    "gpubench_nb",
    "notebooks",
)
WORDPIECE_FILES = {
    "LICENSE-Apache-2.0",
    "NOTICE",
    "PROVENANCE.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
}


def _copy_sources(target: Path) -> Path:
    """What a wheel is built from, copied, so that no build/ or egg-info lands in the checkout."""
    target.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "_version.py")
    for name in SOURCES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=ignore)
        else:
            shutil.copy2(source, target / name)
    return target


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` with its size and modification time (ns)."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
    }


def _set_writable(folder: Path, writable: bool) -> None:
    for path in [folder, *folder.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        write = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
        path.chmod(mode | stat.S_IWUSR if writable else mode & ~write)


def _clean_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["HF_HUB_OFFLINE"] = env["TRANSFORMERS_OFFLINE"] = "1"
    # The reused dependencies' data files (nbconvert's HTML templates) lie in this venv's
    # share/jupyter, which a venv of their own would hold: say where.
    env["JUPYTER_PATH"] = str(Path(sys.prefix) / "share" / "jupyter")
    return env


def _smallest(experiment: Path) -> Path:
    """The pipeline tests' bow experiment cut to one variant and one repeat: a cold and a warm
    run, then every other step (kernel starts are most of its time)."""
    declaration = yaml.safe_load(experiment.read_text(encoding="utf-8"))
    declaration["variants"] = declaration["variants"][:1]
    declaration["timing"]["repeats"] = 1
    experiment.write_text(yaml.safe_dump(declaration, sort_keys=False), encoding="utf-8")
    return experiment


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{argv}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def test_wheel_installed_read_only_runs_a_bow_experiment_from_another_folder(
    tmp_path: Path, data_dir: Path
) -> None:
    src = _copy_sources(tmp_path / "src")
    wheels = tmp_path / "wheels"
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(wheels), str(src)],
        cwd=tmp_path,
        env=dict(os.environ),
    )  # fmt: skip
    # no git metadata in a copied tree: setuptools-scm's fallback version (no commit named)
    (wheel,) = wheels.glob("gpubench_nb-0.1.0-*.whl")

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, dict(os.environ))
    python = venv / "bin" / "python"
    purelib = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            tmp_path,
            dict(os.environ),
        ).stdout.strip()
    )
    # The dependencies (torch included) are this venv's: one plain path line, processed after
    # the fresh venv's own site-packages; its .pth files (the editable finder) are not read.
    ours = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    (purelib / "zz_test_dependencies.pth").write_text(
        "\n".join(dict.fromkeys(ours)) + "\n", encoding="utf-8"
    )
    env = _clean_env(venv)
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         "--no-index", str(wheel)],
        tmp_path,
        env,
    )  # fmt: skip
    installed = purelib / "gpubench_nb"
    # As `make` does: the venv's own python3 kernelspec (its kernels run this venv's python).
    _run([str(python), "-m", "gpubench_nb.kernel", "install"], tmp_path, env)
    assert (installed / "notebooks" / "10_measure.ipynb").is_file()  # package data shipped

    work = tmp_path / "work"  # another folder: no checkout on any path
    experiment = _smallest(make_experiment(work, data_dir, "installed"))
    where = _run(
        [str(python), "-c", "import gpubench_nb; print(gpubench_nb.__file__)"], work, env
    ).stdout.strip()
    assert Path(where).is_relative_to(installed), where
    script = venv / "bin" / "gpubench-nb"
    shown = _run([str(script), "notebooks"], work, env).stdout.strip()
    assert Path(shown) == installed / "notebooks"

    _set_writable(venv, False)
    before = _tree(venv)
    try:
        _run([str(script), "build-model", str(experiment)], work, env)
        _run([str(script), "run", str(experiment), "--output-dir", "outputs"], work, env)
        bundle = work / "outputs" / "installed"
        checked = _run([str(script), "check-bundle", str(bundle)], work, env)
        assert "manifest intact" in checked.stdout
        copied = _run([str(script), "notebooks", "--copy", "nb"], work, env).stdout.split()
        assert len(copied) == 6 and (work / "nb" / "90_report.ipynb").is_file()
        assert os.access(work / "nb" / "90_report.ipynb", os.W_OK)  # not the install's 0444
    finally:
        after = _tree(venv)
        _set_writable(venv, True)
    assert after == before, "something was written beside the installed package"
    assert {p.name for p in (bundle / "notebooks").iterdir()} >= {"00_environment.ipynb"}


def test_the_builds_print_no_backend_warning_and_the_wheel_ships_the_wordpiece_files(
    tmp_path: Path,
) -> None:
    """Issue 25: `pip install -e .` (make demo) printed setuptools' BuildBackendWarning "Package
    'gpubench_nb.engine.backends.wordpiece' is absent from the `packages` configuration" and
    its "Editable installation" notice, a wall of text for a new user. Both builds, editable
    (with the Makefile's PYTHONWARNINGS filter for that information-only notice) and wheel,
    print none, and bow's tokenizer files still ship in the wheel."""
    import zipfile

    src = _copy_sources(tmp_path / "src")
    wheels = tmp_path / "wheels"
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "-w", str(wheels), str(src)],
        cwd=tmp_path,
        env=dict(os.environ),
    )  # fmt: skip
    assert "BuildBackendWarning" not in built.stdout + built.stderr, built.stderr
    (wheel,) = wheels.glob("gpubench_nb-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {
        Path(n).name for n in names if n.startswith("gpubench_nb/engine/backends/wordpiece/")
    }
    assert shipped == WORDPIECE_FILES

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, dict(os.environ))
    python = venv / "bin" / "python"
    purelib = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            tmp_path,
            dict(os.environ),
        ).stdout.strip()
    )
    # setuptools and wheel (the build runs in the target venv) are this venv's: a path line
    (purelib / "zz_test_dependencies.pth").write_text(
        "\n".join(dict.fromkeys([sysconfig.get_paths()["purelib"], *site.getsitepackages()]))
        + "\n",
        encoding="utf-8",
    )
    editable = _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-build-isolation", "--no-index", "-e", str(src)],
        cwd=tmp_path,
        env={**_clean_env(venv), "PYTHONWARNINGS": "ignore:Editable installation"},
    )  # fmt: skip
    assert "BuildBackendWarning" not in editable.stdout + editable.stderr, editable.stderr
    assert "Warning" not in editable.stderr, editable.stderr  # no other warning either
    found = _run(
        [str(python), "-c", "from gpubench_nb.kernel import notebook_path; "
         "print(notebook_path('10_measure.ipynb'))"],
        tmp_path,
        _clean_env(venv),
    ).stdout.strip()  # fmt: skip
    assert Path(found) == src / "notebooks" / "10_measure.ipynb"  # the editable mapping works

"""Where the stage notebooks are: package data ``gpubench_nb.notebooks``.

The source is the repository's top-level ``notebooks/`` folder, which ``pyproject.toml`` maps to
that package; a wheel, ``pip install .``, an editable and a read-only install all find them
through ``importlib.resources``. Nothing is ever written here: executed notebooks go to the
bundle (R5.6), kernels run in the caller's working directory.
"""

from __future__ import annotations

import importlib.resources
import shutil
from pathlib import Path

from gpubench_nb.errors import GpubenchError, disk_full, storage_error

PACKAGE = "gpubench_nb.notebooks"
# The notebook steps: each ships as "<step>.ipynb", is kept in the bundle under that name, and
# names its bundle writer (R5.6). Every stage asks these names here.
STEPS = ("00_environment", "10_measure", "20_quality", "30_economics", "90_report", "memory_mlp")
ENVIRONMENT_STEP, MEASURE_STEP, QUALITY_STEP, ECONOMICS_STEP, REPORT_STEP, MEMORY_STEP = STEPS
STAGE_NOTEBOOKS = tuple(f"{step}.ipynb" for step in STEPS)


def notebooks_dir() -> Path:
    """The folder holding the shipped notebooks (a real folder: papermill reads paths)."""
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "notebooks").is_dir():
        # Imported from a source tree (editable install, PYTHONPATH on a clone): its own
        # notebooks/, not another tree's that an editable finder may point to.
        path = checkout / "notebooks"
    else:
        try:
            path = Path(str(importlib.resources.files(PACKAGE)))
        except ModuleNotFoundError:
            path = Path(PACKAGE.replace(".", "/"))  # named in the error below
    if not (path / STAGE_NOTEBOOKS[0]).is_file():
        raise GpubenchError(
            f"the notebooks of gpubench-nb are not in {path} (package data {PACKAGE}); "
            "reinstall the package (pip install .) from a checkout that has notebooks/"
        )
    return path


def notebook_path(name: str) -> Path:
    """The shipped notebook ``name`` (e.g. ``"10_measure.ipynb"``)."""
    if name not in STAGE_NOTEBOOKS:
        raise ValueError(f"unknown notebook {name!r}; shipped: {', '.join(STAGE_NOTEBOOKS)}")
    return notebooks_dir() / name


def copy_notebooks(destination: str | Path) -> list[Path]:
    """Copy every shipped notebook into ``destination`` (created if absent), all or nothing.

    The folder passes the one output guard (R5.6: never inside a bundle, symlinks resolved);
    no notebook is overwritten; on any error (a full disk, no permission) whatever was copied
    is removed again, so no partial copy is left.
    """
    from gpubench_nb.protocol.outputs import check_output_folder

    target = check_output_folder(Path(destination), option="--copy")
    source = notebooks_dir()
    existing = [target / name for name in STAGE_NOTEBOOKS if (target / name).exists()]
    if existing:
        raise GpubenchError(
            f"--copy {target}: {', '.join(p.name for p in existing)} already there; nothing "
            "copied (never overwritten); remove them or choose another folder"
        )
    created, copied = not target.exists(), []
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name in STAGE_NOTEBOOKS:
            # "x": never overwrite, even a file made since the check; the mode is a new file's
            # (0666 & ~umask), not a read-only install's 0444.
            with (source / name).open("rb") as src, (target / name).open("xb") as dst:
                copied.append(target / name)
                shutil.copyfileobj(src, dst)
    except OSError as exc:
        for path in copied:
            path.unlink(missing_ok=True)
        if created:
            shutil.rmtree(target, ignore_errors=True)
        if disk_full(exc):
            raise storage_error(exc, exc.filename or target) from None
        raise GpubenchError(
            f"--copy {target}: cannot write there ({exc.strerror or exc}); nothing was copied. "
            "Fix: give a folder you can write to"
        ) from None
    return copied

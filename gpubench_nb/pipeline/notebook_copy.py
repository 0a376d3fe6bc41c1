"""``gpubench-nb notebooks --copy``: the shipped notebooks copied where a user edits them."""

from __future__ import annotations

import shutil
from pathlib import Path

from gpubench_nb.errors import GpubenchError, disk_full, storage_error
from gpubench_nb.notebook_files import STAGE_NOTEBOOKS, notebooks_dir
from gpubench_nb.protocol.outputs import check_output_folder


def copy_notebooks(destination: str | Path) -> list[Path]:
    """Copy every shipped notebook into ``destination`` (created if absent), all or nothing.

    The folder passes the one output guard (R5.6: never inside a bundle, symlinks resolved);
    no notebook is overwritten; on any error (a full disk, no permission) whatever was copied
    is removed again, so no partial copy is left.
    """
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

"""Where a command may write (R5.6): never over one of its inputs, never into a sealed bundle.

A command that overwrites what it reads destroys the evidence it was asked to check (issue 11
§4: `accept EXP F --checks F` replaced the predictions by their own report; `accept` on a
predictions file inside a finished bundle rewrote that bundle's archived checks.json).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from gpubench_nb.errors import BundleError
from gpubench_nb.protocol.bundle import sealed_bundle_holding


def same_file(a: Path, b: Path) -> bool:
    """True when ``a`` and ``b`` name one file: same path, or a symlink or hard link to it."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare where they would be
        return Path(a).resolve() == Path(b).resolve()


def check_output_file(
    out: Path, *, option: str, inputs: Iterable[Path], instead: str, rule: str = "R5.6"
) -> Path:
    """Refuse ``out`` (exit 2) when writing it would destroy an input or touch a sealed bundle.

    ``option`` names where the path came from (``--checks``); ``instead`` says where to write.
    Returns ``out`` unchanged when it is a place a new file may go.
    """
    out = Path(out)
    for source in inputs:
        if same_file(out, source):
            raise BundleError(
                f"{option} {out} is the input {source} itself; writing it would destroy the "
                f"input. Fix: {instead}",
                rule=rule,
            )
    if out.is_dir():
        raise BundleError(f"{option} {out} is a folder; give a file path. Fix: {instead}")
    parent = next((p for p in (out, *out.parents) if p.exists()), None)
    if parent is not None and parent != out and not parent.is_dir():
        raise BundleError(
            f"{option} {out}: {parent} is a file, not a folder, so nothing can be written "
            f"under it. Fix: {instead}"
        )
    sealed = sealed_bundle_holding(out)
    if sealed is not None:
        raise BundleError(
            f"{option} {out} is inside the finished bundle {sealed}, sealed by its manifest; "
            f"writing there would make check-bundle fail. Fix: {instead}",
            rule=rule,
        )
    return out


def check_output_folder(folder: Path, *, option: str) -> Path:
    """Refuse an output folder that exists as a file (exit 2, not a traceback from mkdir)."""
    folder = Path(folder)
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise BundleError(
            f"{option} {folder}: {existing} is a file, not a folder. Fix: give a folder path "
            "(it is created when missing)"
        )
    return folder

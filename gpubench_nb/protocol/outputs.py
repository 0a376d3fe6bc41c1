"""Where a command may write (R5.6): never over one of its inputs, never into a sealed bundle.

A command that overwrites what it reads destroys the evidence it was asked to check
(`accept EXP F --checks F` would replace the predictions by their own report; `accept` on a
predictions file inside a finished bundle would rewrite that bundle's archived checks.json).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from gpubench_nb.errors import BundleError
from gpubench_nb.protocol.bundle import bundle_holding, sealed_bundle_holding


def same_file(a: Path, b: Path) -> bool:
    """True when ``a`` and ``b`` name one file: same path, or a symlink or hard link to it."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare where they would be
        return Path(a).resolve() == Path(b).resolve()


def check_output(
    out: Path,
    *,
    option: str,
    instead: str,
    inputs: Iterable[Path] = (),
    folder: bool = False,
    rule: str = "R5.6",
) -> Path:
    """The one guard of every output option: refuse ``out`` (exit 2) when writing
    it would destroy an input, or write into a bundle (finished or not, read by the command or
    not). A folder that merely holds inputs is fine: a new file or bundle there replaces none.

    ``option`` names where the path came from (``--checks``, ``--out``, ``--output-dir``, a
    campaign folder); ``instead`` says where to write. ``folder``: ``out`` is a folder a command
    creates things in (``--output-dir``), else a file. Nothing is created here: a refused
    command has written nothing. Returns ``out`` unchanged when it is a place that may be written.
    """
    out = Path(out)
    inputs = list(inputs)
    for source in inputs:
        if same_file(out, source):
            raise BundleError(
                f"{option} {out} is the input {source} itself; writing it would destroy the "
                f"input. Fix: {instead}",
                rule=rule,
            )
    if not folder and out.is_dir():
        raise BundleError(f"{option} {out} is a folder; give a file path. Fix: {instead}")
    existing = next((p for p in (out, *out.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir() and (folder or existing != out):
        raise BundleError(
            f"{option} {out}: {existing} is a file, not a folder, so nothing can be written "
            f"under it. Fix: {instead}"
        )
    sealed = sealed_bundle_holding(out / "x" if folder else out)
    holder = sealed or bundle_holding(out if folder else out.parent)
    if holder is not None:
        state = "the finished bundle" if sealed else "the bundle"
        seal = (
            ", sealed by its manifest; writing there would make check-bundle fail" if sealed else ""
        )
        where = "is" if out.resolve() == holder else "is inside"
        raise BundleError(
            f"{option} {out} {where} {state} {holder}{seal}; a command never writes into a "
            f"bundle. Fix: {instead}",
            rule=rule,
        )
    for source in inputs:
        if Path(source).is_dir() and _holds(source, out):  # the folders read are bundles
            raise BundleError(
                f"{option} {out} is inside the bundle {source} that this command reads. "
                f"Fix: {instead}",
                rule=rule,
            )
    return out


def _holds(folder: Path, path: Path) -> bool:
    """True when ``path`` is ``folder`` or lies inside it (after resolving links)."""
    try:
        return Path(path).resolve().is_relative_to(Path(folder).resolve())
    except OSError:
        return False


def check_output_file(
    out: Path, *, option: str, inputs: Iterable[Path], instead: str, rule: str = "R5.6"
) -> Path:
    """:func:`check_output` for a file path (``--checks``, ``--out``)."""
    return check_output(out, option=option, inputs=inputs, instead=instead, rule=rule)


def check_output_folder(
    folder: Path, *, option: str, inputs: Iterable[Path] = (), instead: str | None = None
) -> Path:
    """:func:`check_output` for a folder a command creates bundles in (``--output-dir``)."""
    folder = Path(folder)
    suggestion = _outside_bundles(folder.resolve())
    while suggestion.exists() and not suggestion.is_dir():  # a file given for a folder
        suggestion = suggestion.parent
    fix = instead or (
        f"give a folder outside every bundle (it is created when missing), e.g. {suggestion}"
    )
    return check_output(folder, option=option, inputs=inputs, instead=fix, folder=True)


def _outside_bundles(folder: Path) -> Path:
    """The nearest folder above ``folder`` that no bundle holds (where to write instead)."""
    holder = sealed_bundle_holding(Path(folder) / "x") or bundle_holding(folder)
    while holder is not None:
        folder = holder.parent
        holder = sealed_bundle_holding(folder / "x") or bundle_holding(folder)
    return folder

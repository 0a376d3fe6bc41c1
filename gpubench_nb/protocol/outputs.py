"""Where a command may read and write (R5.6): inputs are regular files; an output is never an input,
a FIFO or device, nor inside a bundle (symlinks resolved), so no command destroys its evidence or
blocks on a FIFO."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from gpubench_nb.errors import BundleError, GpubenchError
from gpubench_nb.protocol.bundle import bundle_holding, sealed_bundle_holding


def same_file(a: Path, b: Path) -> bool:
    """True when ``a`` and ``b`` name one file: same path, or a symlink or hard link to it."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare where they would be
        return Path(a).resolve() == Path(b).resolve()


_KINDS = (
    (stat.S_ISLNK, "a symlink"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def special_kind(path: Path | str, *, follow: bool = True) -> str | None:
    """What ``path`` is when it exists and is not a regular file ("a FIFO (named pipe)", "a socket",
    ...), else None; ``follow=False`` counts a symlink as one."""
    try:
        mode = (os.stat if follow else os.lstat)(path).st_mode
    except (OSError, ValueError):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), None)


def regular_input(
    path: Path | str, what: str, error: type[GpubenchError] = BundleError, rule: str = "R5.6"
) -> Path:
    """``path``, refused before it is opened when it is a FIFO (opening one blocks), socket, device
    or folder; a missing file is left to the reader's message."""
    kind = special_kind(path)
    if kind is not None:
        raise error(
            f"{path} is {kind}, not a regular file; the {what} is read from a regular file. "
            "Fix: give the path of the file itself",
            rule=rule,
        )
    return Path(path)


def refuse_special(given: Mapping[str, object]) -> None:
    """A command's arguments refused before anything opens them: an empty one (it would mean the
    current folder), a FIFO, socket or device (``/dev/stdin`` by a symlink could block, R5.6)."""
    for name, value in given.items():
        for item in value if isinstance(value, list) else [value]:
            if item == "":
                raise BundleError(f"{name}: empty (''), naming no path", rule="R5.6")
            if isinstance(item, str | Path) and special_kind(item) not in (None, "a folder"):
                regular_input(item, f"{name} argument", GpubenchError, "R5.6")


def check_output(
    out: Path,
    *,
    option: str,
    instead: str,
    inputs: Iterable[Path] = (),
    folder: bool = False,
) -> Path:
    """The one guard of every output option: refuse ``out`` (exit 2) when writing it would destroy
    an input or a non-regular file, or write into a bundle (R5.6). Creates nothing; returns
    ``out``."""
    out = Path(out)
    inputs = list(inputs)
    for source in inputs:
        if same_file(out, source):
            raise BundleError(
                f"{option} {out} is the input {source} itself; writing it would destroy the "
                f"input. Fix: {instead}",
                rule="R5.6",
            )
    kind = special_kind(out, follow=folder)  # a folder option may be reached through a link
    if kind is None and out.is_symlink() and not out.exists():
        kind = f"a symlink to the missing {os.readlink(out)}"
    wanted = "a folder" if folder else "a regular file"
    if kind not in (None, wanted):  # a rename over a device, a FIFO or a link destroys it
        raise BundleError(
            f"{option} {out} is {kind}; an output goes to {wanted} or a new path only. "
            f"Fix: {instead}",
            rule="R5.6",
        )
    existing = next((p for p in (out, *out.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir() and (folder or existing != out):
        raise BundleError(
            f"{option} {out}: {existing} is {special_kind(existing) or 'a file'}, not a "
            f"folder, so nothing can be written under it. Fix: {instead}"
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
            rule="R5.6",
        )
    for source in inputs:  # the folders read are bundles
        if Path(source).is_dir() and out.resolve().is_relative_to(Path(source).resolve()):
            raise BundleError(
                f"{option} {out} is inside the bundle {source} that this command reads. "
                f"Fix: {instead}",
                rule="R5.6",
            )
    return out


def check_output_folder(
    folder: Path, *, option: str, inputs: Iterable[Path] = (), instead: str | None = None
) -> Path:
    """:func:`check_output` for a folder a command creates bundles in (``--output-dir``); the fix
    names the nearest folder above it that no bundle holds."""
    nearest = Path(folder).resolve()
    while holder := sealed_bundle_holding(nearest / "x") or bundle_holding(nearest):
        nearest = holder.parent
    while nearest.exists() and not nearest.is_dir():  # a file given for a folder
        nearest = nearest.parent
    fix = instead or (
        f"give a folder outside every bundle (it is created when missing), e.g. {nearest}"
    )
    return check_output(Path(folder), option=option, inputs=inputs, instead=fix, folder=True)

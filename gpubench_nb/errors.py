"""The one exception hierarchy: every message names the rule, the place, the value and the fix."""

from __future__ import annotations

import errno
from pathlib import Path


def where_relative(path: str | Path) -> str:
    """For a path not found: the folder a relative one was read from. A notebook run by hand
    (Jupyter, nbconvert) works in its own folder, not in the project's."""
    if Path(path).is_absolute():
        return ""
    return (
        f" (read from the working folder {Path.cwd()}; a notebook run by hand works in its own "
        "folder: give absolute paths in its parameters cell, or run it with papermill from "
        "your project folder)"
    )


class GpubenchError(Exception):
    """Base error. ``exit_code`` is what the CLI returns (2 = unusable input)."""

    exit_code = 2

    def __init__(self, message: str, *, rule: str | None = None) -> None:
        self.rule = rule
        super().__init__(f"{rule}: {message}" if rule else message)


class ProtocolError(GpubenchError):
    """The declared experiment (YAML) is invalid, or differs from its frozen lock."""


class CorpusError(GpubenchError):
    """A corpus file cannot be used as declared (R1.1, R1.2, R1.4)."""


class PredictionsError(GpubenchError):
    """A predictions file cannot even be read (acceptance itself reports bad lines)."""


class ResultsError(GpubenchError):
    """resultats-bruts.csv does not follow the fixed schema (R4)."""


class EconomicsError(GpubenchError):
    """Offers table or package arguments are invalid (R5)."""


class BackendError(GpubenchError):
    """A model or tokenizer cannot be loaded or run as declared."""


class BundleError(GpubenchError):
    """An output bundle fails its re-derived checks or its manifest."""


class StorageError(GpubenchError):
    """The disk refused a write: no space left (ENOSPC), a file too large (EFBIG), a quota."""


def disk_full(exc: BaseException) -> bool:
    """True when ``exc`` is the disk refusing a write (full, file too large, quota)."""
    names = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", 122)}
    return isinstance(exc, OSError) and exc.errno in names


def storage_error(exc: OSError, path: object) -> StorageError:
    """The one-line message for a write the disk or the folder refused."""
    why = exc.strerror or str(exc)
    fix = "free space on that disk" if disk_full(exc) else "make that folder writable"
    return StorageError(
        f"cannot write {path}: {why}. Nothing half-written is kept (a finished bundle is "
        f"untouched; an unfinished one resumes). Fix: {fix}, or write elsewhere "
        "(--output-dir / --out), then rerun the same command"
    )

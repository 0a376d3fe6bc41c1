"""Page-cache residency of each model/tokenizer file at load start (``mincore(2)``, nothing faulted
in; else "not observable"): fingerprinting (R1.1) has just read them, so ``load_seconds`` is a
warm-cache load."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gpubench_nb.engine.nvml import NOT_OBSERVABLE

# (file, size) -> mincore's vector: one byte per page, bit 0 set where the page is resident
Mincore = Callable[[Path, int], Any]


def _libc_mincore() -> Mincore | None:
    """A probe built on the C library's ``mmap``/``mincore``/``munmap``, or None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        c_mmap, c_mincore, c_munmap = libc.mmap, libc.mincore, libc.munmap
    except (OSError, AttributeError, TypeError):
        return None
    c_mmap.restype = ctypes.c_void_p
    c_mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, *[ctypes.c_int] * 3, ctypes.c_long)
    c_mincore.restype = ctypes.c_int
    c_mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte))
    c_munmap.restype = ctypes.c_int
    c_munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    page = mmap.PAGESIZE

    def probe(path: Path, size: int) -> Any:
        fd = os.open(path, os.O_RDONLY)
        try:
            address = c_mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if address in (None, ctypes.c_void_p(-1).value):
                raise OSError(ctypes.get_errno(), "mmap failed")
            try:
                vec = (ctypes.c_ubyte * ((size + page - 1) // page))()
                if c_mincore(address, size, vec) != 0:
                    raise OSError(ctypes.get_errno(), "mincore failed")
                return vec
            finally:
                c_munmap(address, size)
        finally:
            os.close(fd)

    return probe


def file_residency(path: Path, probe: Mincore | None) -> dict[str, Any]:
    """Size and page-cache residency of one file; ``"not observable"`` without mincore, fraction
    ``"empty file"`` for an empty one."""
    import numpy as np

    path = Path(path)
    size = path.stat().st_size
    out: dict[str, Any] = {"file": path.name, "size_bytes": size}
    if size == 0:
        return {**out, "resident_bytes": 0, "resident_fraction": "empty file"}
    unknown = {"resident_bytes": NOT_OBSERVABLE, "resident_fraction": NOT_OBSERVABLE}
    if probe is None:
        return {**out, **unknown, "error": "no mincore(2) in the C library"}
    try:
        flags = np.frombuffer(probe(path, size), dtype=np.uint8) & 1
    except (OSError, ValueError, TypeError) as exc:  # the check failed: said as that (R3.6)
        return {**out, **unknown, "error": f"mincore failed: {type(exc).__name__}: {exc}"}
    page = mmap.PAGESIZE
    tail = len(flags) * page - size  # the bytes of the last page beyond the file's end
    resident = int(np.count_nonzero(flags)) * page - (tail if len(flags) and flags[-1] else 0)
    return {**out, "resident_bytes": resident, "resident_fraction": round(resident / size, 4)}


def residency(paths: Iterable[Path], *, probe: Mincore | None | str = "libc") -> dict[str, Any]:
    """Page-cache residency of ``paths`` now, per file and in all; ``probe``: ``"libc"`` =
    mincore(2), None = not observable."""
    found = _libc_mincore() if probe == "libc" else probe
    files = [file_residency(p, found) for p in paths]  # type: ignore[arg-type]
    size = sum(f["size_bytes"] for f in files)
    known = size > 0 and all(isinstance(f["resident_bytes"], int) for f in files)
    resident = sum(f["resident_bytes"] for f in files) if known else NOT_OBSERVABLE
    return {
        "observable": known,
        "files": files,
        "size_bytes": size,
        "resident_bytes": resident,
        "resident_fraction": round(resident / size, 4) if known else NOT_OBSERVABLE,
    }


def residency_text(record: dict[str, Any] | None) -> str:
    """The `notes` form: ``weights resident at load start: 100.0 % of 90.9 MB``."""
    if not record or not record.get("observable"):
        errors = {f.get("error") for f in (record or {}).get("files", [])} - {None}
        why = "".join(f" ({e})" for e in sorted(errors))  # a check that failed says why (R3.6)
        return f"weights resident in page cache at load start: {NOT_OBSERVABLE}{why}"
    return (
        "weights resident in page cache at load start: "
        f"{100 * record['resident_fraction']:.1f} % of {record['size_bytes']} B"
    )

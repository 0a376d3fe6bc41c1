"""SHA-256 fingerprints of files: the frozen revisions of R1.1."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

_CHUNK_BYTES = 1 << 20


def sha256_file(path: Path | str) -> str:
    """Hex SHA-256 of one file's contents, read in chunks (weights can be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_files(paths: Iterable[Path | str], root: Path | str) -> str:
    """One hex SHA-256 over each file's name relative to ``root`` and content SHA-256, in name
    order: renaming, adding or changing a file changes it, the listing order does not (R1.1)."""
    root = Path(root)
    entries = sorted(
        (Path(p).resolve().relative_to(root.resolve()).as_posix(), Path(p)) for p in paths
    )
    if not entries:
        raise ValueError(f"no files to fingerprint under {root}")
    names = [name for name, _ in entries]
    if len(set(names)) != len(names):
        raise ValueError(f"a file is listed twice under {root}: {names}")
    digest = hashlib.sha256()
    for name, path in entries:
        digest.update(f"{name}\0{sha256_file(path)}\n".encode())
    return digest.hexdigest()

"""Crash-safe file writes: whole-file replace via rename, and fsynced appends."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from contextlib import suppress
from pathlib import Path
from typing import Any

from gpubench_nb.errors import disk_full, storage_error


def _current_umask() -> int:
    """The process umask: read from /proc where it is shown (no window where it is changed)."""
    with suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o077)  # elsewhere it can only be read by setting it; set it back at once
    os.umask(mask)
    return mask


def _final_mode(path: Path) -> int:
    """The mode ``open(path, "w")`` would leave (the existing file's, else 0666 & ~umask), not
    mkstemp's 0600: bundle files are meant for colleagues too."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return 0o666 & ~_current_umask()


def give_plain_modes(root: Path) -> None:
    """Give ``root`` and everything under it the modes plain ``mkdir``/``open`` would (a folder
    staged with ``mkdtemp`` is 0700; a model folder is meant for colleagues too)."""
    mask = _current_umask()
    for folder, _, files in os.walk(root):
        os.chmod(folder, 0o777 & ~mask)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o666 & ~mask)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` so that readers see the old or the new file, never a mix (plain mode)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = _final_mode(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:  # no such folder, not writable: one line, nothing written
        raise storage_error(exc, path) from None
    try:
        os.chmod(tmp, mode)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):  # one clear line instead of a traceback
            raise storage_error(exc, path) from None
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """Atomically write ``data`` as indented, key-sorted UTF-8 JSON."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def append_text_durable(path: Path, text: str) -> None:
    """Append ``text`` in one write, then flush and fsync, so a crash never leaves half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)  # the umask applies
    try:
        written = os.write(fd, data)
        if written != len(data):  # only on a full disk
            raise OSError(errno.ENOSPC, f"short write: {written} of {len(data)} bytes")
        os.fsync(fd)
    except OSError as exc:
        if disk_full(exc):
            raise storage_error(exc, path) from None
        raise
    finally:
        os.close(fd)

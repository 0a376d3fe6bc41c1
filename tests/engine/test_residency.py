"""Page-cache residency of files (issue 23 §2): mincore through ctypes, or "not observable"."""

from __future__ import annotations

import os
import sys

import pytest

from gpubench_nb.engine.residency import NOT_OBSERVABLE, residency, residency_text
from gpubench_nb.protocol.fingerprint import sha256_files


def _evict(path) -> bool:
    """Drop ``path`` from the page cache where the OS allows it; whether it worked."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return residency([path])["resident_fraction"] < 0.5


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mincore + fadvise on Linux")
def test_fingerprinting_makes_the_weights_resident(tmp_path):
    """The fact the load note states: after SHA-256 fingerprinting a file is wholly in the
    page cache, whatever it was before (issue 23 §2: 0 % -> 100 % on the H200)."""
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(os.urandom(3 << 20))
    if not _evict(weights):
        pytest.skip("this filesystem keeps the file cached (e.g. tmpfs): eviction not possible")
    assert residency([weights])["resident_fraction"] < 0.5
    sha256_files([weights], tmp_path)
    after = residency([weights])
    assert after["observable"] is True
    assert after["resident_fraction"] == 1.0
    assert after["resident_bytes"] == after["size_bytes"] == 3 << 20


def test_a_fake_probe_counts_pages_and_the_last_partial_page(tmp_path):
    """Resident bytes follow the page flags; the last page counts only the file's bytes."""
    import mmap

    page = mmap.PAGESIZE
    path = tmp_path / "w.bin"
    path.write_bytes(b"x" * (2 * page + 10))
    result = residency([path], probe=lambda p, size: bytes([1, 0, 1]))
    assert result["resident_bytes"] == page + 10
    assert result["resident_fraction"] == round((page + 10) / (2 * page + 10), 4)


def test_without_mincore_it_is_not_observable(tmp_path):
    path = tmp_path / "w.bin"
    path.write_bytes(b"abc")
    result = residency([path], probe=None)
    assert result["observable"] is False
    assert result["resident_fraction"] == NOT_OBSERVABLE
    assert residency_text(result).endswith(f"{NOT_OBSERVABLE} (no mincore(2) in the C library)")

    def refused(p, size):
        raise OSError(22, "mmap refused")

    failed = residency([path], probe=refused)
    assert failed["resident_bytes"] == NOT_OBSERVABLE  # the check failed: said with its error
    assert residency_text(failed).endswith("(mincore failed: OSError: [Errno 22] mmap refused)")

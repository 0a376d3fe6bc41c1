"""The kept finished bundle (tests/fixtures/main-bundle) and a forger's edit of a copy of it:
the edit made, the manifest written again, so only check-bundle's re-derivation can catch it."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from gpubench_nb.protocol import bundle as layout

MAIN_BUNDLE = Path(__file__).resolve().parents[1] / "fixtures" / "main-bundle"


def resealed(tmp_path: Path, edit: Callable[[Path], None]) -> Path:
    """A copy of a real finished bundle, edited, its manifest written again (a forger's)."""
    bundle = Path(shutil.copytree(MAIN_BUNDLE, tmp_path / "b"))
    edit(bundle)
    layout.write_manifest(bundle)
    return bundle

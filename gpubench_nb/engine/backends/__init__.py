"""Models behind one small interface: load on a device at a precision, tokenise, batch, predict."""

from __future__ import annotations

from gpubench_nb.engine.backends.base import resolve_device
from gpubench_nb.engine.backends.build import build_model
from gpubench_nb.engine.backends.registry import backend_entry, fingerprints_for, load_backend

__all__ = ["backend_entry", "build_model", "fingerprints_for", "load_backend", "resolve_device"]

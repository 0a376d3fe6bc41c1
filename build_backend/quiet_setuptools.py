"""setuptools' build backend, without its information-only notice on editable installs.

`pip install -e .` (what `make demo` runs) maps ``gpubench_nb.notebooks`` to the top-level
``notebooks/`` folder (pyproject ``package-dir``), so setuptools installs through a meta path
finder and says so in a ``BuildBackendWarning: Editable installation. Please be careful with
folders in your working directory ...``: a screen of text that asks nothing of the user and
reads like a failure to a new one (issue 25). That notice alone is filtered; every other
warning, and every behaviour, is setuptools' own (``setuptools.build_meta``).
"""

from __future__ import annotations

import warnings
from typing import Any

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F403 - the whole PEP 517/660 interface, unchanged
from setuptools.warnings import InformationOnly


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """``setuptools.build_meta.build_editable``, its "Editable installation." notice filtered."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Editable installation", category=InformationOnly)
        return build_meta.build_editable(wheel_directory, config_settings, metadata_directory)

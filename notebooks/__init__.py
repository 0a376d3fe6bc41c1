"""The stage notebooks, shipped inside the package as ``gpubench_nb.notebooks`` (issue 21).

This folder is their source; ``pyproject.toml`` maps it to that package so that a wheel, a
non-editable and a read-only install carry them. Find them with ``gpubench-nb notebooks``.
"""

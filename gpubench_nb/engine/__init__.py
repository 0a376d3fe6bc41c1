"""The only code that touches torch: backends, timing, memory, environment capture, the
inference loop and fault injection. Imports from `protocol` only."""

import warnings

# tqdm.auto imported once with its "IProgress not found" warning silenced: without ipywidgets
# its console fallback works in a kernel, and the cached module never warns again.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="IProgress not found")
    import tqdm.auto  # noqa: F401

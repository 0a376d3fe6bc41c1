"""The only code that touches torch: backends, timing, memory, environment capture, the
inference loop and fault injection. Imports from `protocol` only."""

import warnings


def _console_progress_bars() -> None:
    """Import ``tqdm.auto`` once, with its ipywidgets warning silenced.

    transformers imports ``tqdm.auto`` at import time; in a Jupyter kernel without ipywidgets
    tqdm then warns "TqdmWarning: IProgress not found" into every notebook and falls back to its
    console bar, which works in a kernel. That fallback is what is used here, without the
    warning: the module is cached, so later imports (transformers', ours) do not warn again.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        import tqdm.auto  # noqa: F401


_console_progress_bars()

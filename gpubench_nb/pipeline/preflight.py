"""What `validate` checks before any run: every file the experiment names is there, each
missing one named by its key, path and fix, so that `run` never stops later for a file it
could have found now (R1.1, R1.3, R5.1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpubench_nb.errors import EconomicsError, ProtocolError
from gpubench_nb.protocol.outputs import special_kind


def check_files(exp: Any) -> None:
    """Raise one ProtocolError listing every declared input file that is absent or not a
    regular file (R1.3), each under the key that names it."""
    offers = None if exp.pricing is None else exp.pricing.offers
    named = [(f"corpus.{s}", getattr(exp.corpus, s)) for s in ("path", "train", "tune")]
    problems = []
    for key, path in ((k, Path(p)) for k, p in [*named, ("pricing.offers", offers)] if p):
        if not path.exists():
            problems.append(f"{key}: {path} does not exist")
        elif kind := special_kind(path):
            problems.append(f"{key}: {path} is {kind}, not a regular file")
    if problems:
        raise ProtocolError(
            f"{exp.source}: {len(problems)} file(s) named by the experiment cannot be found: "
            + "; ".join(problems)
            + ". Fix: correct these paths in the YAML (a relative path there is relative to the "
            "YAML's own folder, not to where you run the command)",
            rule="R1.3",
        )


def check_pricing(exp: Any) -> str | None:
    """The pricing section read in full as `run` will read it (R5.1); a one-line summary."""
    from gpubench_nb.pipeline.guard import validate_pricing

    if exp.pricing is None:
        return None
    try:
        validate_pricing(exp)
    except EconomicsError as exc:
        raise EconomicsError(f"pricing.offers ({exp.pricing.offers}): {exc}") from exc
    p = exp.pricing
    amount = f"{p.lots} lot(s)" if p.lots is not None else f"{p.gpus} GPU(s)"
    return f"offer {p.offer}, {p.days}-day package, {amount}; table {p.offers}"


def model_line(exp: Any, source: Path) -> str | None:
    """For a preset model not built yet: what builds it (not an error, `make demo` does it)."""
    from gpubench_nb.engine.backends.build import PRESETS

    if exp.model.backend in PRESETS and not Path(exp.model.path).is_dir():
        return (
            f"model.path {exp.model.path} is not built yet: `gpubench-nb build-model {source}` "
            "builds it from the seed (R1.1)"
        )
    return None

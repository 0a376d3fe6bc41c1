"""`gpubench-nb validate`: the declared experiment checked without running it, as a summary."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TextIO

from gpubench_nb.engine.backends.model_check import check_declared_model
from gpubench_nb.engine.optimise import refuse_unrunnable
from gpubench_nb.errors import EconomicsError, ProtocolError
from gpubench_nb.protocol.corpus import load_declared_corpora
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.experiment_spec import PRESET_BACKENDS, Experiment
from gpubench_nb.protocol.outputs import special_kind


def validate_experiment(path: str | Path, out: TextIO) -> Experiment:
    """Validate the YAML, its files, corpora (R1.4), model folder (R1.1) and pricing (R5.1),
    one summary line to ``out`` as each check passes (shown even when a later one refuses)."""
    say = functools.partial(print, file=out)  # one line as each check passes
    exp = load_experiment(path)
    check_files(exp)  # every file the YAML names, listed at once
    corpus, others = load_declared_corpora(exp)
    q = exp.quality
    say(f"experiment  {exp.experiment_id}  ({exp.source})")
    say(f"classes     {len(exp.classes)}: {', '.join(exp.classes)}")
    say(f"corpus      {len(corpus)} items, revision {corpus.revision}")
    for split, other in others.items():
        say(f"{split:<11} {len(other)} items, disjoint from eval (R1.4)")
    say(f"model       {exp.model.backend} at {exp.model.path}")
    for line in check_declared_model(exp):  # hf, causal_lm: the folder the user brings (R1.1)
        say(line)
    if exp.model.backend in PRESET_BACKENDS and not Path(exp.model.path).is_dir():  # not an error
        say(
            f"            model.path {exp.model.path} is not built yet: `gpubench-nb "
            f"build-model {path}` builds it from the seed (R1.1)"
        )
    say(f"knob        {exp.knob}; fixed {dict(exp.fixed)}")
    variants = ", ".join(f"{v.id} ({exp.knob}={v.knob_value})" for v in exp.variants)
    say(f"variants    {variants}")
    if any(set(v.settings.optimisations()) - {"threads"} for v in exp.variants):  # torch: seconds
        say("machine     checking it can run them (starting torch, seconds)...", flush=True)
    refuse_unrunnable(exp)  # a package, compiler or GPU capability missing here (R2.1)
    say(f"quality     {q.metric} >= {q.threshold}, drop <= {q.tolerance} vs {q.reference_variant}")
    t = exp.timing
    seed = f" (seed {t.order_seed})" if t.order_seed is not None else ""
    say(
        f"timing      scope {t.scope}, warm-up {t.warmup_iterations}, repeats {t.repeats}, "
        f"order {t.order}{seed}"
    )
    pricing = check_pricing(exp)  # the offers table read as `run` will read it (R5.1)
    say(f"pricing     {pricing or 'none declared (no package is priced, R5.5)'}")
    return exp


def check_files(exp: Experiment) -> None:
    """One ProtocolError listing every declared input file absent or not a regular file (R1.3),
    each under its key, so that `run` never stops later for a file it could find now."""
    offers = None if exp.pricing is None else exp.pricing.offers
    named = [(f"corpus.{s}", getattr(exp.corpus, s)) for s in ("path", "train", "tune")]
    problems = []
    for key, path in ((k, Path(p)) for k, p in [*named, ("pricing.offers", offers)] if p):
        if not path.exists():
            problems.append(f"{key}: {path} does not exist")
        elif kind := special_kind(path):
            problems.append(f"{key}: {path} is {kind}, not a regular file")
    for key, folder in (("model.path", exp.model.path), ("tokenizer.path", exp.tokenizer.path)):
        if Path(folder).is_file():  # a preset builds a folder there; a brought model is one
            problems.append(f"{key}: {folder} is a file, not the model's folder")
        files = [f for f in Path(folder).rglob("*") if f.is_file()] if Path(folder).is_dir() else []
        problems += [f"{key}: {f} cannot be read here" for f in files if not os.access(f, os.R_OK)]
    if problems:
        raise ProtocolError(
            f"{exp.source}: {len(problems)} file(s) named by the experiment cannot be found: "
            + "; ".join(problems)
            + ". Fix: correct these paths in the YAML (a relative path there is relative to the "
            "YAML's own folder, not to where you run the command)",
            rule="R1.3",
        )


def check_pricing(exp: Experiment) -> str | None:
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

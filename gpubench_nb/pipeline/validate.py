"""`gpubench-nb validate`: the declared experiment checked without running it, as a summary."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from gpubench_nb.engine.backends.model_check import check_declared_model
from gpubench_nb.engine.optimise import refuse_unrunnable
from gpubench_nb.pipeline.preflight import check_files, check_pricing, model_line
from gpubench_nb.protocol.corpus import load_declared_corpora
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.experiment_spec import Experiment


def validate_experiment(path: str | Path, out: TextIO) -> Experiment:
    """Validate the YAML, every file it names, its corpora (R1.4), the model folder
    it declares (R1.1) and its pricing (R5.1), writing
    one summary line per part to ``out`` as each check passes (what passed stays shown when a
    later check refuses)."""
    exp = load_experiment(path)
    check_files(exp)  # every file the YAML names, listed at once
    corpus, others = load_declared_corpora(exp)
    q = exp.quality
    print(f"experiment  {exp.experiment_id}  ({exp.source})", file=out)
    print(f"classes     {len(exp.classes)}: {', '.join(exp.classes)}", file=out)
    print(f"corpus      {len(corpus)} items, revision {corpus.revision}", file=out)
    for split, other in others.items():
        print(f"{split:<11} {len(other)} items, disjoint from eval (R1.4)", file=out)
    print(f"model       {exp.model.backend} at {exp.model.path}", file=out)
    for line in check_declared_model(exp):  # hf, causal_lm: the folder the user brings (R1.1)
        print(line, file=out)
    if (line := model_line(exp, Path(path))) is not None:  # a preset not built yet
        print(f"            {line}", file=out)
    refuse_unrunnable(exp)  # a package, compiler or GPU capability missing here (R2.1)
    print(f"knob        {exp.knob}; fixed {dict(exp.fixed)}", file=out)
    variants = ", ".join(f"{v.id} ({exp.knob}={v.knob_value})" for v in exp.variants)
    print(f"variants    {variants}", file=out)
    print(
        f"quality     {q.metric} >= {q.threshold}, drop <= {q.tolerance} vs {q.reference_variant}",
        file=out,
    )
    t = exp.timing
    seed = f" (seed {t.order_seed})" if t.order_seed is not None else ""
    print(
        f"timing      scope {t.scope}, warm-up {t.warmup_iterations}, repeats {t.repeats}, "
        f"order {t.order}{seed}",
        file=out,
    )
    pricing = check_pricing(exp)  # the offers table read as `run` will read it (R5.1)
    print(f"pricing     {pricing or 'none declared (no package is priced, R5.5)'}", file=out)
    return exp

"""The logic of 00_environment and 20_quality; the notebooks call it through gpubench_nb.steps."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpubench_nb.protocol.corpus import load_experiment_corpus
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.lock import require_frozen
from gpubench_nb.protocol.quality import fill_quality
from gpubench_nb.protocol.records import write_environment
from gpubench_nb.protocol.writer import bundle_writer

if TYPE_CHECKING:
    import pandas as pd


def environment_step(experiment: str | Path, bundle_dir: str | Path) -> dict[str, Any]:
    """00_environment: capture the machine as observed (R2.4, R2.5) into environment.json."""
    from gpubench_nb.engine.backends import resolve_device
    from gpubench_nb.engine.environment import capture_environment

    with bundle_writer(bundle_dir, "00_environment", step=True):
        exp = load_experiment(experiment)
        require_frozen(bundle_dir, exp, step="00_environment")  # R1.3, before anything
        device = resolve_device(exp.fixed.get("device", "auto"))
        environment = capture_environment(device)
        write_environment(Path(bundle_dir), environment)
        return environment


def quality_step(experiment: str | Path, bundle_dir: str | Path) -> pd.DataFrame:
    """20_quality: accept or refuse every run (R1.5, R1.6); one table row per measured run."""
    bundle_dir = Path(bundle_dir)
    with bundle_writer(bundle_dir, "20_quality", step=True):
        exp = load_experiment(experiment)
        corpus = load_experiment_corpus(exp, "eval", texts=False)  # acceptance: IDs, labels
        # R1.3, R1.1: the declaration and the corpus read are the frozen ones, or nothing runs.
        require_frozen(bundle_dir, exp, {"corpus_revision": corpus.revision}, step="20_quality")
        outcome = fill_quality(bundle_dir, corpus, exp.classes, exp.quality)
    table = []
    for key, report in outcome.reports.items():
        table.append(
            {
                "run": key,
                "observed_ids": None if report is None else report.observed_count,
                "ids_match": None if report is None else report.ids_match,
                "format_valid": None if report is None else report.format_valid,
                exp.quality.metric: None if report is None else report.quality_value,
                "accepted": bool(
                    report and report.corpus_accepted and outcome.reference_value is not None
                ),
            }
        )
    import pandas as pd  # here: 00_environment imports this module and needs no pandas

    return pd.DataFrame(table)

"""`gpubench-nb accept`: one predictions file checked and archived as checks.json (R1.5, R1.6)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpubench_nb.protocol.acceptance import (
    AcceptanceReport,
    check_predictions,
    summarise,
    write_checks,
)
from gpubench_nb.protocol.bundle import CHECKS_NAME
from gpubench_nb.protocol.corpus import load_experiment_corpus
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.experiment_spec import Experiment
from gpubench_nb.protocol.outputs import check_output


@dataclass(frozen=True)
class Accepted:
    """What `accept` decided and where it archived the checks."""

    report: AcceptanceReport
    checks_path: Path

    def text(self) -> str:
        """The verdict and where the checks are, as the CLI prints them."""
        where = self.checks_path.resolve()
        return f"{summarise(self.report)}\nchecks archived in {where} (R1.6)"


def accept_predictions(
    experiment_path: str | Path,
    predictions: str | Path,
    *,
    checks: str | Path | None = None,
    reference_value: float | None = None,
) -> Accepted:
    """Check ``predictions`` against the declared eval corpus and quality rules (R1.5) into
    checks.json; the destination is refused before anything is read."""
    exp = load_experiment(experiment_path)
    checks_path = _checks_path(exp, Path(predictions), checks)
    report = check_predictions(
        load_experiment_corpus(exp, "eval", texts=False),  # IDs and labels only
        Path(predictions),
        exp.classes,
        exp.quality,
        reference_value=reference_value,
    )
    write_checks(report, checks_path)
    return Accepted(report, checks_path)


def _checks_path(exp: Experiment, predictions: Path, checks: str | Path | None) -> Path:
    """Where checks.json goes: never over an input, never into a sealed bundle (R5.6)."""
    target = Path(checks) if checks else predictions.with_name(CHECKS_NAME)
    splits = (exp.corpus.path, exp.corpus.train, exp.corpus.tune)
    inputs = [exp.source, predictions, *(p for p in splits if p is not None)]
    suggestion = Path.cwd() / f"{predictions.stem}.checks.json"
    return check_output(
        target,
        option="--checks" if checks else "the default checks path",
        inputs=inputs,
        instead=f"pass --checks with a new file outside any finished bundle, e.g. --checks "
        f"{suggestion}",
    )

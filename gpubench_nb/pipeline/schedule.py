"""The run schedule (R3.2, R3.4, R3.7): per round and phase (cold, then warm) one fresh-process
run of every variant, in declared order (``alternating``) or shuffled by ``timing.order_seed``
(``drawn``: blocked randomisation, so a slow drift of the machine cannot fall on one variant)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from gpubench_nb.protocol.experiment_spec import Experiment
from gpubench_nb.protocol.records import MEASURED_PHASES


@dataclass(frozen=True)
class ScheduledRun:
    position: int
    variant_id: str
    phase: str
    run_index: int

    @property
    def key(self) -> str:
        """Stable identity of the run, also its folder below ``runs/``."""
        return f"{self.variant_id}/{self.phase}-{self.run_index}"


def draw_schedule(experiment: Experiment) -> list[ScheduledRun]:
    """The full, deterministic schedule of an experiment."""
    variant_ids = [variant.id for variant in experiment.variants]
    rng = random.Random(experiment.timing.order_seed)
    runs: list[ScheduledRun] = []
    for run_index in range(1, experiment.timing.repeats + 1):
        for phase in MEASURED_PHASES:  # load is timed inside each run
            order = list(variant_ids)
            if experiment.timing.order == "drawn":
                rng.shuffle(order)
            for variant_id in order:
                runs.append(ScheduledRun(len(runs) + 1, variant_id, phase, run_index))
    return runs

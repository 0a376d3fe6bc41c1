"""The kept bundle made by main reports the same numbers today (R5.6: old bundles still read).

``tests/fixtures/main-bundle-numbers.json`` holds what the report computed from
``tests/fixtures/main-bundle/`` with main 34009a8, before the records were rebuilt on one
annotated base: every option, sentence, summary cell and row the report derives must match.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

from gpubench_nb.report.bundles import load_bundles
from gpubench_nb.report.decision import decision_view
from gpubench_nb.report.stats import summarise

FIXTURES = Path(__file__).parent / "fixtures"


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 9)
    return value


def test_the_report_numbers_of_the_kept_bundle_are_unchanged(tmp_path: Path) -> None:
    bundle = Path(shutil.copytree(FIXTURES / "main-bundle", tmp_path / "b"))
    loaded = load_bundles([bundle])
    view = decision_view([bundle])
    numbers = {
        "options": [
            [
                o.variant_id,
                o.accepted,
                list(o.warm_seconds),
                o.cold_median_seconds,
                o.load_median_seconds,
                o.warm_tokens_per_second,
                o.texts,
                o.quality,
                o.cost_note,
            ]
            for o in view.options
        ],
        "sentences": view.sentences,
        "summary": [
            [_clean(x) for x in r] for r in summarise(loaded[0].rows).reset_index().values.tolist()
        ],
        "rows": [
            [r["variant_id"], r["phase"], r["run_index"], r["elapsed_seconds"]]
            + [r.get("truncated_texts"), r.get("error"), r.get("energy_joules")]
            for r in loaded[0].rows
        ],
    }
    expected = json.loads((FIXTURES / "main-bundle-numbers.json").read_text(encoding="utf-8"))
    assert json.loads(json.dumps(numbers, default=str)) == expected

"""build-model ends with what it chose on tune (R1.4): before, it printed "model ready" only,
and the tune value, the choice and a choice at the edge of its grid were inside
gpubench_model.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpubench_nb.engine.backends import build_model
from gpubench_nb.engine.backends.base import METADATA_FILE
from gpubench_nb.engine.backends.build import build_summary
from gpubench_nb.protocol.experiment import load_experiment


def _built(tmp_path: Path, **facts: object) -> Path:
    (tmp_path / METADATA_FILE).write_text(
        json.dumps({"train_count": 500, "tune_count": 200, **facts}), encoding="utf-8"
    )
    return tmp_path


def _exp(threshold: float, metric: str = "macro_f1") -> SimpleNamespace:
    return SimpleNamespace(quality=SimpleNamespace(metric=metric, threshold=threshold))


def test_a_last_epoch_choice_is_flagged_and_a_tight_threshold_gets_a_suggestion(
    tmp_path: Path,
) -> None:
    folder = _built(
        tmp_path,
        tune_macro_f1=0.513,
        chosen={"epochs": 4},
        tune_macro_f1_by_epoch=[0.31, 0.42, 0.49, 0.513],
    )
    text = "\n".join(build_summary(_exp(0.5), folder))
    assert "macro-F1 0.513 on 200 tune items" in text
    assert "epochs = 4 (best on tune, of 4 tried: 1-4)" in text
    assert "edge of the grid" in text and "model.build.max_epochs" in text
    assert "quality.threshold 0.5 is only 0.013 below tune (0.513)" in text
    assert "about 0.46" in text


def test_a_threshold_above_tune_is_said_to_be_above_it_not_a_negative_room_below(
    tmp_path: Path,
) -> None:
    folder = _built(
        tmp_path, tune_macro_f1=0.776, chosen={"C": 1.0}, tune_macro_f1_by_c={"1.0": 0.776}
    )
    text = "\n".join(build_summary(_exp(0.95), folder))
    assert "quality.threshold 0.95 is 0.174 above tune (0.776)" in text and "about 0.72" in text
    assert "-0.174" not in text and "below tune;" not in text


def test_a_c_inside_its_grid_is_not_flagged_and_a_roomy_threshold_says_so(
    tmp_path: Path,
) -> None:
    scores = {"0.1": 0.7, "1.0": 0.856, "10.0": 0.85}
    folder = _built(tmp_path, tune_macro_f1=0.856, chosen={"C": 1.0}, tune_macro_f1_by_c=scores)
    lines = build_summary(_exp(0.75), folder)
    assert lines[1].startswith("chosen      C = 1 (best on tune, of 3 tried: 0.1, 1, 10)")
    assert not [line for line in lines if line.startswith("WARNING")]
    assert lines[-1] == "threshold   0.75, 0.106 below tune: room for eval to differ"
    smallest = _built(tmp_path, tune_macro_f1=0.8, chosen={"C": 0.1}, tune_macro_f1_by_c=scores)
    assert "edge of the grid" in "\n".join(build_summary(_exp(0.7), smallest))


@pytest.mark.slow
def test_the_demos_own_build_chooses_inside_its_grid_and_warns_of_nothing(tmp_path: Path) -> None:
    """`make demo` printed "WARNING epochs = 8 is at the edge of the grid tried" on every build
    of the project's own example: its declared grid now holds the tune peak (R1.4)."""
    root = Path(__file__).resolve().parents[2]
    shutil.copytree(root / "data" / "debian-sections", tmp_path / "data" / "debian-sections")
    (tmp_path / "parameters").mkdir()
    for name in ("demo.yaml", "offers.yaml"):
        shutil.copy(root / "parameters" / name, tmp_path / "parameters" / name)
    exp = load_experiment(tmp_path / "parameters" / "demo.yaml")
    lines = build_summary(exp, build_model(exp))
    assert not [line for line in lines if line.startswith("WARNING")], lines
    assert "epochs = 10 (best on tune, of 12 tried: 1-12)" in "\n".join(lines)

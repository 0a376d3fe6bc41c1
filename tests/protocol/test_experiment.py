"""The declared experiment: validation (R1.3, R2.1, R2.2, R3.1, R3.4) and the protocol lock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpubench_nb.errors import ProtocolError
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.lock import LOCK_NAME, differences, freeze
from tests.support.experiments import declaration


def _declaration() -> dict:
    return declaration()


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _error(tmp_path: Path, data: dict) -> str:
    with pytest.raises(ProtocolError) as caught:
        load_experiment(_write(tmp_path, data))
    return str(caught.value)


def test_demo_declares_the_debian_corpus_and_three_batch_variants(repo_root: Path) -> None:
    exp = load_experiment(repo_root / "parameters" / "demo.yaml")
    assert exp.corpus.path == repo_root / "data" / "debian-sections" / "eval.jsonl"
    assert exp.corpus.train is not None and exp.corpus.tune is not None
    assert len(exp.classes) == 10
    assert exp.knob == "batch"
    assert [(v.id, v.settings.batch) for v in exp.variants] == [("b1", 1), ("b4", 4), ("b8", 8)]
    # R2.1: everything but the knob is identical across variants.
    assert (
        len({(v.settings.precision, v.settings.context, v.settings.device) for v in exp.variants})
        == 1
    )
    assert exp.timing.repeats == 5


def test_paths_resolve_against_the_yaml_folder(tmp_path: Path) -> None:
    exp = load_experiment(_write(tmp_path, _declaration()))
    assert exp.corpus.path == tmp_path / "eval.jsonl"
    assert exp.model.path == tmp_path / "model"
    assert exp.fixed["device"] == "auto"  # default applied, then frozen


def test_unknown_key_names_the_key_and_suggests_the_nearest(tmp_path: Path) -> None:
    data = _declaration()
    data["quality"]["treshold"] = data["quality"].pop("threshold")
    message = _error(tmp_path, data)
    assert "quality.treshold: unknown key" in message
    assert "did you mean 'threshold'" in message
    assert str(tmp_path / "exp.yaml") in message


def test_unknown_top_level_key(tmp_path: Path) -> None:
    data = _declaration()
    data["variant"] = []
    assert "did you mean 'variants'" in _error(tmp_path, data)


def test_variant_setting_another_knob_is_refused_r2_1(tmp_path: Path) -> None:
    data = _declaration()
    data["variants"][1]["context"] = 128
    message = _error(tmp_path, data)
    assert message.startswith("R2.1") or "R2.1: " in message
    assert "variants[1].context" in message


def test_precision_in_a_batch_study_points_to_a_separate_experiment_r2_2(tmp_path: Path) -> None:
    data = _declaration()
    data["variants"][0]["precision"] = "fp16"
    assert "R2.2" in _error(tmp_path, data)


def test_knob_also_fixed_is_refused(tmp_path: Path) -> None:
    data = _declaration()
    data["fixed"]["batch"] = 8
    assert "fixed.batch" in _error(tmp_path, data)


def test_missing_fixed_setting_is_refused(tmp_path: Path) -> None:
    data = _declaration()
    del data["fixed"]["context"]
    assert "fixed.context: missing" in _error(tmp_path, data)


@pytest.mark.parametrize(
    ("section", "key", "value", "expected"),
    [
        ("quality", "metric", "f2", "quality.metric: must be one of macro_f1, accuracy, "),
        ("quality", "threshold", 1.5, "quality.threshold: must be a number >= 0 and <= 1"),
        ("quality", "reference_variant", "b9", "'b9' is not a declared variant"),
        ("timing", "scope", "everything", "timing.scope"),
        ("timing", "warmup_iterations", 0, "timing.warmup_iterations: must be an integer >= 1"),
        ("timing", "order", "random", "timing.order"),
        ("model", "backend", "gpt", "model.backend"),
        ("fixed", "precision", "fp8", "fixed.precision"),
        ("fixed", "device", "tpu", "fixed.device"),
    ],
)
def test_each_bad_value_names_its_field(
    tmp_path: Path, section: str, key: str, value: object, expected: str
) -> None:
    data = _declaration()
    data[section][key] = value
    assert expected in _error(tmp_path, data)


def test_one_failure_in_every_variant_is_said_once_with_its_fields(tmp_path: Path) -> None:
    # Issue 25: the same failure in many places is said once, with its count and places.
    data = _declaration()
    data["variants"] = [{"id": f"b{n}", "batch": str(n)} for n in (1, 4, 8, 16)]
    message = _error(tmp_path, data)
    assert message.count("must be an integer >= 1") == 1
    assert (
        "variants[0].batch: must be an integer >= 1, got '1'. Fix: write a whole number" in message
    )
    assert message.split("\n")[0].endswith(
        "; the same in 4 fields (fields variants[0].batch, variants[1].batch, "
        "variants[2].batch, variants[3].batch)"
    )


def test_a_refused_knob_value_is_not_also_said_to_be_a_duplicate(tmp_path: Path) -> None:
    """Issue 25: batch "4" (a string) was refused, then counted as its stand-in value 1 and
    said again as "two variants set batch = 1": a second error about a value nobody wrote.
    A real duplicate among the valid values is still said."""
    data = _declaration()
    data["variants"] = [{"id": "b1", "batch": 1}, {"id": "b4", "batch": "4"}]
    message = _error(tmp_path, data)
    assert "variants[1].batch: must be an integer >= 1, got '4'" in message
    assert "two variants set" not in message
    data["variants"] = [
        {"id": "b1", "batch": 1},
        {"id": "b4", "batch": "4"},
        {"id": "c", "batch": 1},
    ]
    assert "two variants set batch = 1" in _error(tmp_path, data)


def test_missing_declaration_cites_r1_3(tmp_path: Path) -> None:
    data = _declaration()
    del data["quality"]
    assert "R1.3" in _error(tmp_path, data)


def test_duplicate_variant_ids_and_values(tmp_path: Path) -> None:
    data = _declaration()
    data["variants"] = [{"id": "b1", "batch": 1}, {"id": "b1", "batch": 1}]
    message = _error(tmp_path, data)
    assert "used twice" in message and "two variants set batch = 1" in message


def test_pricing_needs_exactly_one_of_lots_or_gpus(tmp_path: Path) -> None:
    data = _declaration()
    data["pricing"] = {"offers": "offers.yaml", "offer": "x", "days": 7, "lots": 1, "gpus": 2}
    assert "R5.1" in _error(tmp_path, data)
    data["pricing"] = {"offers": "offers.yaml", "offer": "x", "days": 5, "lots": 1}
    assert "pricing.days: must be one of 3, 7, 30, got 5" in _error(tmp_path, data)


def test_bad_yaml_syntax_is_a_protocol_error(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text("experiment_id: [unclosed\n", encoding="utf-8")
    with pytest.raises(ProtocolError, match="not valid YAML"):
        load_experiment(path)


def test_drawn_order_defaults_to_the_published_seed(tmp_path: Path) -> None:
    data = _declaration()
    data["timing"]["order"] = "drawn"
    assert load_experiment(_write(tmp_path, data)).timing.order_seed == 7


def test_lock_refuses_a_changed_protocol_and_lists_the_change_r1_3(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    prints = {"corpus_revision": "c" * 64, "model_revision": "m" * 64}
    exp = load_experiment(_write(tmp_path, _declaration()))
    first = freeze(bundle, exp, prints)
    assert json.loads((bundle / LOCK_NAME).read_text())["sha256"] == first.sha256
    assert freeze(bundle, exp, prints).sha256 == first.sha256  # same: accepted
    data = _declaration()
    data["quality"]["threshold"] = 0.6
    changed = load_experiment(_write(tmp_path, data))
    with pytest.raises(ProtocolError, match=r"quality\.threshold: 0\.5 -> 0\.6"):
        freeze(bundle, changed, prints)
    with pytest.raises(ProtocolError, match="fingerprints.model_revision"):
        freeze(bundle, exp, {**prints, "model_revision": "n" * 64})


def test_notes_do_not_change_the_lock(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    freeze(bundle, load_experiment(_write(tmp_path, _declaration())), {"corpus_revision": "c"})
    data = _declaration()
    data["notes"] = "second thoughts"
    freeze(bundle, load_experiment(_write(tmp_path, data)), {"corpus_revision": "c"})


def test_differences_lists_added_removed_and_changed() -> None:
    found = differences({"a": 1, "b": {"c": 2}}, {"b": {"c": 3}, "d": 4})
    assert found == ["a: removed (was 1)", "b.c: 2 -> 3", "d: added (4)"]

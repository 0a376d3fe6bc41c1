"""Identifiers and seeds are refused by the Checker from their declaration, in their own words."""

from __future__ import annotations

from pathlib import Path

from tests.support.experiments import declaration, refusal

_DECLARATION = declaration(corpus={"train": None})


def _error(tmp_path: Path, experiment_id: str, variant_id: str = "b4") -> str:
    data = {**_DECLARATION, "experiment_id": experiment_id}
    data["variants"] = [{"id": "b1", "batch": 1}, {"id": variant_id, "batch": 4}]
    return refusal(tmp_path, data)


def test_an_unsafe_identifier_names_the_rule_for_folder_names(tmp_path: Path) -> None:
    message = _error(tmp_path, "t1", variant_id="b/4")
    assert "variants[1].id: 'b/4' has characters unsafe in a folder name" in message
    assert "Fix: use letters, digits, '_', '.', '-', starting with a letter or digit" in message


def test_a_long_identifier_says_its_length_and_the_limit(tmp_path: Path) -> None:
    message = _error(tmp_path, "x" * 101)
    assert "experiment_id: 101 characters, longer than 100. Fix: shorten it to 100" in message


def test_a_seed_beyond_numpy_names_the_range_and_r1_1(tmp_path: Path) -> None:
    data = {**_DECLARATION, "seed": 2**32}
    message = refusal(tmp_path, data)
    assert "R1.1:" in message
    assert "seed: must be an integer >= 0 and <= 4294967295, got 4294967296" in message

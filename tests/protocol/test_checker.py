"""The declaration-driven checker (R1.3): required keys, patterns matched whole, lists."""

from __future__ import annotations

from pathlib import Path

from tests.support.experiments import declaration, refusal


def _declaration() -> dict:
    return declaration(corpus={"train": None}, variants=[{"id": "b1", "batch": 1}])


def _lines(tmp_path: Path, data: dict) -> list[str]:
    return refusal(tmp_path, data).splitlines()


def test_a_missing_key_cites_the_rule_of_its_declaration_and_is_said_once(tmp_path) -> None:
    data = _declaration()
    del data["timing"]["scope"]
    del data["tokenizer"]["path"]
    lines = _lines(tmp_path, data)
    assert [line for line in lines if "timing.scope" in line] == [
        f"R3.1: {tmp_path / 'exp.yaml'}: timing.scope: missing. "
        "Fix: declare it before any measurement"
    ]
    assert len([line for line in lines if "tokenizer.path" in line]) == 1  # not also "empty"


def test_a_pattern_is_matched_whole_so_no_line_break_slips_through(tmp_path) -> None:
    data = _declaration()
    data["fixed"]["device"] = "cpu\n"
    refused = "fixed.device: 'cpu\\n' does not match ^(auto|cpu|cuda(:\\d+)?)$"
    assert any(refused in line for line in _lines(tmp_path, data))


def test_a_list_declared_unique_names_its_duplicates(tmp_path) -> None:
    data = _declaration()
    data["classes"] = ["a", "b", "a"]
    assert any("classes: duplicated values ['a']" in line for line in _lines(tmp_path, data))

"""One checker of declared values for records and the experiment YAML (R1.3): bounds, list
sizes, unique items and free text are refused with the key, the bound and the fix."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from gpubench_nb.errors import ProtocolError
from gpubench_nb.protocol import schema
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.records import Record, key
from tests.support.experiments import declaration, refusal


@dataclass(frozen=True, kw_only=True)
class Dial(Record):
    """A dial."""

    CLOSED = True
    ERROR = ProtocolError
    FIX = "see the dial's docs"
    turn: int = key(schema.integer("its turn", minimum=0, maximum=3))
    gain: float = key(schema.positive("its gain"), 1.0)
    marks: tuple[str, ...] = key(
        {"type": "array", "items": schema.text("a mark"), "minItems": 2, "uniqueItems": True},
        ("a", "b"),
    )


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"turn": 4}, "key 'turn': must be an integer >= 0 and <= 3, got 4"),
        ({"turn": "2"}, "key 'turn': must be an integer >= 0 and <= 3, got '2'"),
        ({"turn": 1, "gain": 0}, "key 'gain': must be a number > 0, got 0"),
        ({"turn": 1, "marks": ["a"]}, "key 'marks': expected a list of at least 2, got ['a']"),
        ({"turn": 1, "marks": ["a", "b", "a"]}, "key 'marks': duplicated values ['a']"),
    ],
)
def test_a_record_refuses_a_value_outside_its_declaration(data: dict, said: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        Dial.from_dict(data, "dial.yaml")
    assert f"dial.yaml: {said}" in str(caught.value)


def test_a_record_keeps_a_value_inside_its_declaration() -> None:
    dial = Dial.from_dict({"turn": 3, "gain": 2, "marks": ["x", "y"]}, "dial.yaml")
    assert (dial.turn, dial.gain, dial.marks) == (3, 2.0, ("x", "y"))


def test_experiment_notes_that_are_not_text_are_refused(tmp_path: Path) -> None:
    data = declaration(notes=5)
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(
        ProtocolError, match=r"notes: expected text, got 5\. Fix: write free text for the report"
    ):
        load_experiment(path)
    data["notes"] = None  # `notes: ~` fails the JSON Schema an editor reads: refused alike
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ProtocolError, match=r"notes: must not be empty\. Fix: write a value or"):
        load_experiment(path)
    del data["notes"]  # no notes at all
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert load_experiment(path).notes == ""


def test_a_required_key_written_empty_is_said_once(tmp_path: Path) -> None:
    data = declaration()
    data["timing"]["scope"] = None  # written `scope:`, not left out
    said = refusal(tmp_path, data)
    assert "R3.1: " in said and "timing.scope: must not be empty. Fix: declare it" in said
    assert said.count("timing.scope") == 1


def test_a_section_that_is_not_a_mapping_and_build_options_are_refused(tmp_path: Path) -> None:
    assert "tokenizer: expected an object, got ['x']" in refusal(
        tmp_path, declaration(tokenizer=["x"])
    )
    hf = declaration(model={"backend": "hf", "build": {"dim": 8}})
    assert "model.build: hf takes no build options. Fix: remove model.build" in refusal(
        tmp_path, hf
    )
    bow = declaration(model={"build": {"dim": 0, "subset": "all", "dimm": 1}})
    said = refusal(tmp_path, bow)
    assert "model.build.dim: must be an integer >= 1, got 0" in said
    assert "model.build.subset: must be one of stratified, first, got 'all'" in said
    assert "model.build.dimm: unknown key. Fix: did you mean 'dim'?" in said


def test_the_build_options_of_a_loaded_experiment_are_checked_again_as_given() -> None:
    from types import MappingProxyType

    from gpubench_nb.protocol.experiment import build_options

    frozen = MappingProxyType({"dim": 8, "max_epochs": 1})  # as ModelSpec.build holds them
    assert build_options("bow", frozen)["dim"] == 8


@pytest.mark.parametrize(
    ("key_path", "value", "said"),
    [
        ("variants[0].batch", "1", "Fix: write a whole number >= 1"),
        ("quality.threshold", 1.5, "Fix: write a number >= 0 and <= 1"),
        ("timing.order", "random", "Fix: use one of alternating, drawn"),
        ("fixed.device", "gpu", "Fix: write auto, cpu, cuda or cuda:N"),
        ("seed", 2**40, "Fix: write a whole number >= 0 and <= 4294967295"),
        ("classes", "a, b", "Fix: write a list: [a, b, ...]"),
    ],
)
def test_an_experiment_value_refused_says_what_to_write_instead(
    tmp_path: Path, key_path: str, value: object, said: str
) -> None:
    data = declaration()
    *parents, last = key_path.replace("[0]", ".0").split(".")
    node = data
    for part in parents:
        node = node[int(part) if part.isdigit() else part]
    node[last] = value
    (line,) = [s for s in refusal(tmp_path, data).splitlines() if f": {key_path}: " in s]
    assert said in line

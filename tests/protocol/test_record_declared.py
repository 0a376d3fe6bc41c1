"""Records of the files a user writes: declared keys only, every problem at once, the JSON
Schema generated from the same declarations (R1.3, R5.6)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gpubench_nb.errors import BundleError, ProtocolError
from gpubench_nb.protocol import schema
from gpubench_nb.protocol.records import Record, RunRecord, key


@dataclass(frozen=True, kw_only=True)
class Box(Record):
    """A box."""

    RULE = "R1.3"
    CLOSED = True
    ERROR = ProtocolError
    FIX = "see the docs"
    name: str = key(schema.text("its name", pattern="[a-z]+"), why="is not lower case")
    size: int = key(schema.integer("its size", minimum=2), rule="R9.9", fix="make it bigger")
    colour: str = key(schema.enum("its colour", ("red", "blue")), "red", at="paint.colour")
    seen: int | None = key({}, None, code=True)


def test_the_schema_is_generated_from_the_declarations() -> None:
    made = Box.schema()
    assert made["description"] == "A box." and made["required"] == ["name", "size"]
    assert made["additionalProperties"] is False
    assert set(made["properties"]) == {"name", "size", "paint.colour"}  # not the code's own
    assert made["properties"]["size"] == {
        "type": "integer",
        "minimum": 2,
        "description": "its size",
    }


def test_every_problem_is_listed_with_its_rule_key_and_fix() -> None:
    with pytest.raises(ProtocolError) as caught:
        Box.from_dict({"name": "Big", "size": 1, "sise": 1, "paint": {"colour": 3}}, "box.yaml")
    lines = str(caught.value).splitlines()
    assert lines[0] == "R1.3: box.yaml: key 'sise': unknown key; fix: did you mean 'size'?"
    assert "R1.3: box.yaml: key 'paint.colour': must be one of red, blue, got 3;" in lines[3]
    assert "R1.3: box.yaml: key 'name': 'Big' is not lower case; fix: see the docs" in lines
    assert (
        "R9.9: box.yaml: key 'size': must be an integer >= 2, got 1; fix: make it bigger" in lines
    )


def test_a_bundle_record_names_every_bad_key_at_once() -> None:
    with pytest.raises(BundleError) as caught:
        RunRecord.from_dict({"run_index": "2", "batch": "four"}, "run.json")
    assert "'run_index': expected an integer" in str(caught.value)
    assert "'batch': expected an integer" in str(caught.value)

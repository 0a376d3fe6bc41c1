"""One YAML reading for the tool and the editors: YAML 1.2's core schema, the one an editor
driven by the JSON Schema reads (R1.3). `threshold: 7e-1` is a number, `yes` a class name, a
date-like experiment_id text; a null where a value is declared is an error in both."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from gpubench_nb.cli import schemas
from gpubench_nb.economics.offers import load_offers
from gpubench_nb.errors import EconomicsError, ProtocolError
from gpubench_nb.protocol import schema
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.yamlio import parse_yaml
from tests.support.experiments import declaration

ROOT = Path(__file__).resolve().parents[2]


def _schema_errors(kind: str, data: object) -> list[str]:
    document = schema.document(kind, schemas()[kind])
    return [e.message for e in jsonschema.Draft202012Validator(document).iter_errors(data)]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("7e-1", 0.7),
        ("1e3", 1000.0),
        (".5", 0.5),
        ("-.inf", float("-inf")),
        ("012", 12),  # decimal in YAML 1.2 (octal 10 in 1.1)
        ("0x1F", "0x1F"),  # decimal integers only: refused where a number is declared
        ("yes", "yes"),
        ("No", "No"),
        ("on", "on"),
        ("2026-12-01", "2026-12-01"),
        ("1:30", "1:30"),  # a base-60 number in 1.1
        ("1_000", "1_000"),
        ("True", True),
        ("~", None),
        ("", None),
        ("١٢", "١٢"),  # not ASCII digits: text
    ],
)
def test_scalars_read_as_yaml_1_2_core_schema(text: str, value: object) -> None:
    assert parse_yaml(f"k: {text}\n", where="t") == {"k": value}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_what_an_editor_shows_is_what_validate_reads(tmp_path: Path) -> None:
    text = yaml.safe_dump(declaration(classes=["yes", "no"]), sort_keys=False)
    text = text.replace("experiment_id: t1", "experiment_id: 2026-12-01")
    text = text.replace("threshold: 0.5", "threshold: 7e-1")
    text = text.replace("- 'yes'\n", "- yes\n").replace("- 'no'\n", "- no\n")
    assert "threshold: 7e-1" in text and "- yes\n" in text and "experiment_id: 2026-12-01" in text
    experiment = load_experiment(_write(tmp_path, text))
    assert experiment.quality.threshold == 0.7
    assert experiment.classes == ("yes", "no")
    assert experiment.experiment_id == "2026-12-01"
    read = parse_yaml(text, where="t")
    assert _schema_errors("experiment", read) == []  # the schema sees the same values


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("experiment_id: t1\n", "experiment_id: t1\nnotes: ~\n", "notes"),
        ("  path: model\n", "  path: model\n  build: ~\n", "model.build"),
        ("experiment_id: t1\n", "experiment_id: t1\npricing: ~\n", "pricing"),
    ],
)
def test_a_null_section_is_an_error_in_validate_and_in_the_schema(
    tmp_path: Path, old: str, new: str, key: str
) -> None:
    text = yaml.safe_dump(declaration(), sort_keys=False).replace(old, new, 1)
    assert new in text
    with pytest.raises(ProtocolError, match=rf"{key}: must not be empty"):
        load_experiment(_write(tmp_path, text))
    assert _schema_errors("experiment", parse_yaml(text, where="t")) != []


def test_a_null_placeholder_mark_is_refused_not_dropped(tmp_path: Path) -> None:
    text = (ROOT / "parameters" / "offers.yaml").read_text(encoding="utf-8")
    assert "    placeholder: true\n" in text
    path = tmp_path / "offers.yaml"
    path.write_text(text.replace("    placeholder: true\n", "    placeholder: ~\n", 1), "utf-8")
    with pytest.raises(EconomicsError, match="placeholder': must not be empty; fix: write placeh"):
        load_offers(path)
    data = json.loads(json.dumps(parse_yaml(path.read_text("utf-8"), where="t")))
    assert _schema_errors("offers", data) != []

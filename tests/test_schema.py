"""The JSON Schemas of the files a user writes come from the declarations validate uses (R1.3):
the shipped YAMLs pass both, a misspelled key fails both, the docs are regenerated from them."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from gpubench_nb.cli import main, schemas
from gpubench_nb.errors import ProtocolError
from gpubench_nb.protocol import schema
from gpubench_nb.protocol.experiment import load_experiment

ROOT = Path(__file__).resolve().parent.parent
PARAMETERS = sorted((ROOT / "parameters").glob("*.yaml"))


def _printed(capsys: pytest.CaptureFixture, *argv: str) -> str:
    assert main(["schema", *argv]) == 0
    return capsys.readouterr().out


def _errors(kind: str, data: object) -> list[str]:
    document = schema.document(kind, schemas()[kind])
    plain = json.loads(json.dumps(data))  # what an editor sees: mapping keys are strings
    return [e.message for e in jsonschema.Draft202012Validator(document).iter_errors(plain)]


def _kind(path: Path) -> str:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema=../docs/schema/"), path
    target = (path.parent / first.split("$schema=")[1]).resolve()
    assert target.is_file(), target
    return target.stem


@pytest.mark.parametrize("path", PARAMETERS, ids=lambda p: p.name)
def test_every_shipped_yaml_names_its_schema_and_passes_it(path: Path) -> None:
    assert _errors(_kind(path), yaml.safe_load(path.read_text(encoding="utf-8"))) == []


@pytest.mark.parametrize("path", PARAMETERS, ids=lambda p: p.name)
def test_every_shipped_yaml_passes_jsonschema_as_yaml_safe_load_reads_it(path: Path) -> None:
    """A standard YAML load and a standard validator, with the schema file the YAML names: the
    package keys 3, 7, 30 read as integers are accepted, not only as the text JSON gives."""
    document = json.loads((ROOT / "docs" / "schema" / f"{_kind(path)}.json").read_text("utf-8"))
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert [e.message for e in jsonschema.Draft202012Validator(document).iter_errors(data)] == []


@pytest.mark.parametrize(
    ("prices", "wrong"),
    [
        ({3: 1, 7: 2}, "not have enough"),
        ({3: 1, 7: 2, 30: 3, 14: 4}, "14"),
        ({3: 1, 7: 0, 30: 3}, "0"),
    ],
)
def test_a_package_price_table_of_other_days_or_prices_fails_jsonschema(
    prices: dict, wrong: str
) -> None:
    offers = yaml.safe_load((ROOT / "parameters" / "offers.yaml").read_text(encoding="utf-8"))
    offers["offers"][0]["package_price_usd_minor"] = prices
    for data in (offers, json.loads(json.dumps(offers))):  # integer keys, then JSON's text
        assert wrong in " ".join(_raw_errors(data))


def _raw_errors(data: object) -> list[str]:
    document = schema.document("offers", schemas()["offers"])
    return [e.message for e in jsonschema.Draft202012Validator(document).iter_errors(data)]


def test_the_printed_schema_validates_the_demo_and_rejects_a_misspelled_key(
    capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    document = json.loads(_printed(capsys, "experiment"))
    demo = yaml.safe_load((ROOT / "parameters" / "demo.yaml").read_text(encoding="utf-8"))
    jsonschema.validate(demo, document)
    demo["quality"]["metrc"] = demo["quality"].pop("metric")
    with pytest.raises(jsonschema.ValidationError, match="metrc"):
        jsonschema.validate(demo, document)
    # validate refuses the same key, naming the one it meant
    text = (ROOT / "parameters" / "demo.yaml").read_text(encoding="utf-8")
    broken = tmp_path / "demo.yaml"
    broken.write_text(text.replace("  metric: macro_f1", "  metrc: macro_f1"), encoding="utf-8")
    with pytest.raises(ProtocolError, match="quality.metrc: unknown key. Fix: did you mean"):
        load_experiment(broken)


@pytest.mark.parametrize("section", ["", "corpus", "quality", "model", "fixed", "timing"])
def test_an_unknown_key_in_any_section_fails_the_schema_and_the_validator(
    section: str, tmp_path: Path
) -> None:
    demo = yaml.safe_load((ROOT / "parameters" / "demo.yaml").read_text(encoding="utf-8"))
    (demo[section] if section else demo)["zzz_unknown"] = 1
    assert _errors("experiment", demo)
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(demo), encoding="utf-8")
    with pytest.raises(ProtocolError, match="zzz_unknown: unknown key"):
        load_experiment(path)


def test_an_unknown_build_option_fails_validate_with_exit_2_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    # It passed validate (exit 0) and was refused only by build-model.
    text = (ROOT / "parameters" / "demo.yaml").read_text(encoding="utf-8")
    path = tmp_path / "demo.yaml"
    edited = text.replace(
        "build: {max_epochs: 12}", "build: {epochs: 20, dim: 0, train_limit: null}"
    ).replace("../", f"{ROOT}/")
    path.write_text(edited.replace("offers.yaml", f"{ROOT}/parameters/offers.yaml"), "utf-8")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "model.build.epochs: unknown key. Fix: did you mean 'max_epochs'?" in err
    assert "model.build.dim: must be an integer >= 1, got 0" in err
    assert "train_limit" not in err  # null: all items, as declared
    demo = yaml.safe_load(text)
    demo["model"]["build"] = {"epochs": 20}
    assert _errors("experiment", demo)  # the schema says the same


def test_the_reference_page_and_schema_files_are_current_and_name_every_key(
    capsys: pytest.CaptureFixture,
) -> None:
    page = _printed(capsys, "--reference")
    fix = "regenerate: gpubench-nb schema --reference > docs/REFERENCE.md (and docs/schema/)"
    assert (ROOT / "docs" / "REFERENCE.md").read_text(encoding="utf-8") == page, fix
    for kind, declared in schemas().items():
        shipped = (ROOT / "docs" / "schema" / f"{kind}.json").read_text(encoding="utf-8")
        assert shipped == _printed(capsys, kind), fix
        for where, _, _ in schema.rows(declared):
            assert f"`{where.split(' ')[0]}`" in page, where
    assert "`model.build.max_epochs` (bow)" in page and "`model.build.c_grid` (minilm)" in page


def test_minilm_build_values_are_checked_as_declared(tmp_path: Path) -> None:
    from gpubench_nb.protocol.experiment import build_options

    assert build_options("minilm", {"c_grid": [1, 10.0]})["max_iter"] == 2000  # defaults in
    with pytest.raises(ProtocolError) as refused:
        build_options("minilm", {"c_grid": [1.0, -2], "train_limit": True, "subset": "all"})
    text = str(refused.value)
    assert "model.build.c_grid[1]: must be a number > 0, got -2" in text
    assert "model.build.train_limit: must be an integer >= 1, got True" in text
    assert "model.build.subset: must be one of stratified, first, got 'all'" in text


def test_a_campaign_id_follows_the_experiment_identifier_rule(tmp_path: Path) -> None:
    # One rule for ids (schema.ID_PATTERN, matched whole): the campaign's own `re.match` with
    # `$` let a trailing newline through into a folder name.
    from gpubench_nb.pipeline.campaign.file import load_campaign

    text = (ROOT / "parameters" / "campaign-offers.yaml").read_text(encoding="utf-8")
    text = text.replace("experiment: demo.yaml", f"experiment: {ROOT}/parameters/demo.yaml")
    text = text.replace("offers: offers.yaml", f"offers: {ROOT}/parameters/offers.yaml")
    path = tmp_path / "campaign.yaml"
    path.write_text(text.replace("campaign_id: demo-offers", 'campaign_id: "demo\\n"'), "utf-8")
    with pytest.raises(ProtocolError, match="campaign_id': 'demo\\\\n' has characters unsafe"):
        load_campaign(path)

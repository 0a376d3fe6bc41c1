"""Input rules of the declared files (issue 11 §6): the one YAML reader and the field rules.

Each test reproduces a case a hostile or careless user tried: a key given twice (silently "last
one wins" before), a 1 KB alias bomb, an ID with a trailing newline, a seed numpy refuses, fewer
than five repeats with no reason (R3.4), a CSV train split read as JSON Lines.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpubench_nb.cli import main
from gpubench_nb.economics.offers import load_offers
from gpubench_nb.errors import BundleError, EconomicsError, ProtocolError
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.lock import build_lock
from gpubench_nb.protocol.yamlio import MAX_YAML_BYTES, parse_yaml
from gpubench_nb.report.bundles import parse_bundle_dirs
from tests.support.experiments import declaration


def _declaration() -> dict:
    return declaration()


def _write(tmp_path: Path, data: dict | str) -> Path:
    path = tmp_path / "exp.yaml"
    text = data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path


def _error(tmp_path: Path, data: dict | str) -> str:
    with pytest.raises(ProtocolError) as caught:
        load_experiment(_write(tmp_path, data))
    return str(caught.value)


# --- the YAML reader ------------------------------------------------------------------------


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path: Path) -> None:
    text = yaml.safe_dump(_declaration(), sort_keys=False) + "seed: 8\n"
    message = _error(tmp_path, text)
    assert "key 'seed' is given twice" in message and "first on line 2" in message
    nested = yaml.safe_dump(_declaration(), sort_keys=False).replace(
        "  context: 64\n", "  context: 64\n  context: 8\n"
    )
    assert "key 'context' is given twice" in _error(tmp_path, nested)


def test_flow_mapping_duplicates_and_merge_keys() -> None:
    with pytest.raises(ProtocolError, match="key 'a' is given twice"):
        parse_yaml("x: {a: 1, a: 2}\n", where="f.yaml")
    # A merge followed by an override is YAML's own way to reuse values: not a duplicate.
    merged = parse_yaml("base: &b {a: 1, c: 2}\nx:\n  <<: *b\n  a: 5\n", where="f.yaml")
    assert merged["x"] == {"a": 5, "c": 2}


def test_offers_package_price_given_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "offers.yaml"
    path.write_text(
        "offers:\n  - id: h100\n    provider: p\n    gpu_model: H100\n    gpus_per_lot: 1\n"
        "    package_price_usd_minor: {3: 30000, 7: 65000, 30: 250000, 7: 1}\n",
        encoding="utf-8",
    )
    with pytest.raises(EconomicsError, match="R5.1: .*key 7 is given twice"):
        load_offers(path)


def _billion_laughs() -> str:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev, name = chr(96 + i), chr(97 + i)
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return "\n".join(lines) + "\n"


def test_a_1kb_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    bomb = _billion_laughs()
    assert len(bomb.encode()) < 1024  # 9**9 = 387 million values once expanded
    assert "aliases expand to more than" in _error(tmp_path, bomb)
    with pytest.raises(EconomicsError, match="alias"):
        load_offers(_write(tmp_path, bomb))
    with pytest.raises(ProtocolError, match="recursive"):
        parse_yaml("a: &a [*a]\n", where="f.yaml")
    with pytest.raises(ProtocolError, match="nested more than"):
        parse_yaml("[" * 2000 + "]" * 2000, where="f.yaml")


def test_oversized_and_folder_and_non_utf8_files(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * MAX_YAML_BYTES + "\n", encoding="utf-8")
    with pytest.raises(ProtocolError, match="larger than"):
        load_experiment(big)
    with pytest.raises(ProtocolError, match="is a folder, not a experiment file|is a folder"):
        load_experiment(tmp_path)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("experiment_id: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ProtocolError, match="not UTF-8"):
        load_experiment(latin)


def test_papermill_list_parameter_uses_the_same_reader() -> None:
    assert parse_bundle_dirs('["a", "b"]') == ["a", "b"]
    with pytest.raises(BundleError, match="alias"):
        parse_bundle_dirs("[" + _billion_laughs().replace("\n", ", ").replace(": ", ": ") + "]")


def test_cli_validate_exits_2_without_traceback_on_each(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    for text in (_billion_laughs(), yaml.safe_dump(_declaration()) + "seed: 1\n"):
        assert main(["validate", str(_write(tmp_path, text))]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and err.startswith("gpubench-nb validate: R1.3:")
    assert main(["validate", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


# --- the fields -----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["t1\n", " t1", "t1 ", "t/1", "-t1", "t\u20281", "x" * 101, "é1"])
def test_identifiers_match_whole_and_fit_a_file_name(tmp_path: Path, bad: str) -> None:
    data = _declaration()
    data["experiment_id"] = bad
    assert "experiment_id" in _error(tmp_path, data)
    data = _declaration()
    data["variants"][1]["id"] = bad
    assert "variants[1].id" in _error(tmp_path, data)


def test_identifier_of_the_maximum_length_is_accepted(tmp_path: Path) -> None:
    data = _declaration()
    data["experiment_id"] = "x" * 100
    (tmp_path / "eval.jsonl").write_text("")
    assert load_experiment(_write(tmp_path, data)).experiment_id == "x" * 100


@pytest.mark.parametrize("seed", [2**32, 2**63, -1])
def test_a_seed_must_fit_the_generators_it_feeds(tmp_path: Path, seed: int) -> None:
    data = _declaration()
    data["seed"] = seed
    message = _error(tmp_path, data)
    assert "seed" in message and ("2**32" in message or ">= 0" in message)
    data = _declaration()
    data["timing"]["order_seed"] = seed
    assert "timing.order_seed" in _error(tmp_path, data)


def test_largest_seed_is_accepted(tmp_path: Path) -> None:
    data = _declaration()
    data["seed"] = 2**32 - 1
    assert load_experiment(_write(tmp_path, data)).seed == 2**32 - 1


def test_fewer_than_five_repeats_need_a_reason_which_is_frozen(tmp_path: Path) -> None:
    data = _declaration()
    data["timing"]["repeats"] = 3
    message = _error(tmp_path, data)
    assert "R3.4" in message and "repeats_reason" in message
    data["timing"]["repeats_reason"] = "   "
    assert "timing.repeats_reason" in _error(tmp_path, data)
    data["timing"]["repeats_reason"] = "pilot on a shared machine; 5 repeats in the main study"
    exp = load_experiment(_write(tmp_path, data))
    assert exp.timing.repeats == 3
    lock = build_lock(exp, {"corpus_revision": "c"})
    assert lock["declaration"]["timing"]["repeats_reason"].startswith("pilot on a shared")
    # Five repeats need no reason, and a declaration without one keeps its old lock content.
    plain = load_experiment(_write(tmp_path, _declaration()))
    assert "repeats_reason" not in build_lock(plain, {})["declaration"]["timing"]


def test_a_split_in_another_format_says_how_to_fix_it(tmp_path: Path) -> None:
    data = _declaration()
    data["corpus"]["train"] = "train.csv"
    message = _error(tmp_path, data)
    assert "corpus.train: train.csv looks like CSV but corpus.format is 'jsonl'" in message
    assert "save the train split as JSONL" in message and "R1.1" in message


def test_lock_json_of_the_demo_is_unchanged_by_the_new_rules(repo_root: Path) -> None:
    # The demo declares 5 repeats: its declaration (hence every existing lock) is unchanged.
    exp = load_experiment(repo_root / "parameters" / "demo.yaml")
    timing = exp.normalised()["timing"]
    assert set(timing) == {"scope", "warmup_iterations", "repeats", "order", "order_seed"}
    json.dumps(exp.normalised())


def test_variant_ids_differing_only_in_case_are_one_folder(tmp_path: Path) -> None:
    data = _declaration()
    data["variants"][1]["id"] = "B1"
    assert "variant id 'b1' is used twice" in _error(tmp_path, data)


def test_every_file_in_another_format_says_corpus_format_first(tmp_path: Path) -> None:
    # Issue 25: three CSV files declared `format: jsonl`; the fix is the format, said first,
    # not "save the train split as JSONL ... or convert the eval file".
    data = _declaration()
    data["corpus"].update(path="eval.csv", train="train.csv", tune="tune.csv", format="jsonl")
    message = _error(tmp_path, data)
    first = message.splitlines()[0]
    assert "corpus.format: 'jsonl' is declared but every corpus file is CSV" in first
    assert "Fix: write corpus.format: csv" in first and first.startswith("R1.1: ")
    assert "save the train split" not in message and "convert the eval file" not in message

"""``model.prompt`` of a causal_lm: validated once, frozen in the lock with its options (R1.3,
R2.5); a changed template is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpubench_nb.errors import ProtocolError
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.lock import freeze
from gpubench_nb.protocol.prompting import normalise_answer

ROOT = Path(__file__).resolve().parents[2]


def _example() -> dict:
    return yaml.safe_load((ROOT / "parameters" / "llm-prompted.yaml").read_text("utf-8"))


def _write(tmp_path: Path, declaration: dict, name: str = "experiment.yaml") -> Path:
    (tmp_path / "eval.jsonl").write_text(
        '{"id": "a", "text": "x", "label": "admin"}\n', encoding="utf-8"
    )
    declaration["corpus"] = {"path": "eval.jsonl"}
    declaration.pop("pricing", None)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(declaration, sort_keys=False), encoding="utf-8")
    return path


def test_the_example_declares_a_loglik_prompt_with_defaults_frozen(tmp_path) -> None:
    exp = load_experiment(_write(tmp_path, _example()))
    prompt = exp.model.prompt
    assert prompt.decision == "loglik" and prompt.length_normalisation == "none"
    assert prompt.verbalisations[0] == " admin" and len(prompt.verbalisations) == 10
    frozen = exp.normalised()["model"]["prompt"]
    assert frozen["template_sha256"] == prompt.template_sha256
    assert frozen["template"] == prompt.template and frozen["chat_template"] is False
    assert "decision=loglik" in prompt.note() and prompt.template_sha256 in prompt.note()


def test_the_lock_refuses_a_changed_template(tmp_path) -> None:
    declaration = _example()
    exp = load_experiment(_write(tmp_path, declaration))
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    fingerprints = {"corpus_revision": "c", "model_revision": "m", "tokenizer_revision": "t"}
    freeze(bundle, exp, fingerprints)
    assert freeze(bundle, load_experiment(exp.source), fingerprints)  # unchanged: accepted
    declaration["model"]["prompt"]["template"] += " Answer with one word."
    changed = load_experiment(_write(tmp_path, declaration))
    with pytest.raises(ProtocolError, match=r"(?s)R1\.3.*model\.prompt\.template_sha256"):
        freeze(bundle, changed, fingerprints)


def test_generate_options_are_frozen_and_noted(tmp_path) -> None:
    declaration = _example()
    prompt = declaration["model"]["prompt"]
    del prompt["length_normalisation"]
    prompt.update(decision="generate", max_new_tokens=4, stop=["\n"], normalise=["strip"])
    exp = load_experiment(_write(tmp_path, declaration))
    options = exp.normalised()["model"]["prompt"]
    assert options["max_new_tokens"] == 4 and options["stop"] == ["\n"]
    assert options["normalise"] == ["strip"] and options["greedy"] is True
    assert "max_new_tokens=4" in exp.model.prompt.note()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"template": "no placeholder"}, r"template: must hold \{text\} exactly once"),
        ({"verbalisations": {"admin": " admin"}}, r"missing \['games'"),
        ({"decision": "generate"}, r"max_new_tokens: missing for decision generate"),
        ({"stop": ["\n"]}, r"stop: does not apply to decision loglik"),
        ({"decision": "vote"}, r"decision: must be one of loglik, generate, got 'vote'"),
        (
            {"length_normalisation": "words"},
            r"length_normalisation: must be one of none, tokens, chars, got 'words'",
        ),
        ({"temperature": 0.7}, r"model\.prompt\.temperature: unknown key"),
    ],
)
def test_bad_prompt_declarations_are_explained(tmp_path, change, message) -> None:
    declaration = _example()
    prompt = declaration["model"]["prompt"]
    if change.get("decision") == "generate":
        del prompt["length_normalisation"]
    prompt.update(change)
    with pytest.raises(ProtocolError, match=message):
        load_experiment(_write(tmp_path, declaration))


def test_verbalisations_equal_after_normalisation_are_refused(tmp_path) -> None:
    declaration = _example()
    prompt = declaration["model"]["prompt"]
    del prompt["length_normalisation"]
    prompt.update(decision="generate", max_new_tokens=2, normalise=["strip", "casefold"])
    prompt["verbalisations"]["games"] = " ADMIN"
    with pytest.raises(ProtocolError, match=r"share the verbalisation\(s\) \['admin'\]"):
        load_experiment(_write(tmp_path, declaration))


def test_generate_verbalisations_must_be_the_class_names(tmp_path) -> None:
    """Else an off-label answer equal to a class name would be accepted as that class."""
    declaration = _example()
    prompt = declaration["model"]["prompt"]
    del prompt["length_normalisation"]
    prompt.update(decision="generate", max_new_tokens=2, normalise=["strip"])
    load_experiment(_write(tmp_path, declaration))  # " admin" strips to "admin": fine
    prompt["verbalisations"]["net"] = " network"
    with pytest.raises(ProtocolError, match=r"R1\.5.*not so for \['net'\]"):
        load_experiment(_write(tmp_path, declaration))


def test_prompt_only_with_causal_lm_and_required_there(tmp_path) -> None:
    declaration = _example()
    declaration["model"]["backend"] = "hf"
    with pytest.raises(ProtocolError, match="only backend causal_lm takes a prompt"):
        load_experiment(_write(tmp_path, declaration))
    declaration = _example()
    del declaration["model"]["prompt"]
    with pytest.raises(ProtocolError, match="model.prompt: missing"):
        load_experiment(_write(tmp_path, declaration))


def test_normalise_answer_applies_the_declared_steps_only() -> None:
    assert normalise_answer("  Admin\n", ("strip",)) == "Admin"
    assert normalise_answer("  Admin\n", ("strip", "casefold")) == "admin"
    assert normalise_answer("  Admin\n", ()) == "  Admin\n"

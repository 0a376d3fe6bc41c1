"""Issue 22 §6: verbalisations the model cannot tell apart are refused before anything runs.

Was: two classes whose verbalisations score the same tokens (`` admin`` and `` ADMIN`` under a
lower-casing tokenizer), or whose tokens are the unknown token, were run, accepted and sealed,
one class never predicted. And ``max_new_tokens`` beyond the model's positions suggested a
negative context. A tiny GPT-2 with a lower-casing word-level tokenizer (nothing downloaded).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from gpubench_nb.cli import main
from gpubench_nb.engine.backends.prompts import PromptTokenizer
from gpubench_nb.engine.backends.tokenization import TextTokenizer
from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.prompting import PromptSpec
from scripts.tiny_decoders import tiny_causal_lm, tiny_classifier

TEMPLATE = "classify this package : {text} . section :"
BASE = PromptSpec(
    template=TEMPLATE,
    chat_template=False,
    verbalisations=(" admin", " games", " net", " sound", " web"),
    decision="loglik",
    length_normalisation="none",
    max_new_tokens=None,
    stop=(),
    normalise=(),
)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> TextTokenizer:
    folder = tiny_causal_lm(tmp_path_factory.mktemp("gpt2"), "gpt2", positions=64)
    return TextTokenizer(folder)


def _prompts(tokenizer: TextTokenizer, **changes) -> PromptTokenizer:
    return PromptTokenizer(tokenizer, dataclasses.replace(BASE, **changes))


def test_distinct_verbalisations_pass(tokenizer) -> None:
    assert len({tuple(c) for c in _prompts(tokenizer).continuations}) == 5


def test_two_verbalisations_with_the_same_tokens_are_refused_showing_them(tokenizer) -> None:
    same = (" admin", " ADMIN", " net", " sound", " web")
    with pytest.raises(BackendError) as caught:
        _prompts(tokenizer, verbalisations=same)
    message = str(caught.value)
    assert message.startswith("R1.5: ")
    assert "' admin' and ' ADMIN' are the same to the model" in message
    assert re.search(r"\[\d+ 'admin'\]", message)  # the token id and its text


def test_a_verbalisation_read_as_the_unknown_token_is_refused(tokenizer) -> None:
    unknown = (" admin", " games", " net", " sound", " zyxwvut")
    with pytest.raises(BackendError, match=r"R1\.5: .*' zyxwvut' -> \[\d+ '<unk>'\]"):
        _prompts(tokenizer, verbalisations=unknown)


def test_two_unknown_verbalisations_are_refused(tokenizer) -> None:
    both = (" qqqq", " zzzz", " net", " sound", " web")
    with pytest.raises(BackendError, match="unknown token"):
        _prompts(tokenizer, verbalisations=both)


def test_generated_answers_equal_after_normalisation_are_refused(tokenizer) -> None:
    with pytest.raises(BackendError, match=r"'admin' after normalise \['strip', 'casefold'\]"):
        _prompts(
            tokenizer,
            decision="generate",
            verbalisations=("admin", "ADMIN ", "net", "sound", "web"),
            max_new_tokens=3,
            normalise=("strip", "casefold"),
        )


def test_max_new_tokens_beyond_the_positions_never_suggests_a_negative_context(
    tokenizer,
) -> None:
    prompts = _prompts(tokenizer, decision="generate", max_new_tokens=500, normalise=("strip",))
    with pytest.raises(BackendError) as caught:
        prompts.check_context(16, 64, 500)
    message = str(caught.value)
    assert "max_new_tokens (500 tokens) leaves no context for the text" in message
    assert not re.search(r"<= -\d", message)
    room = 64 - prompts.prompt_tokens - 1
    assert f"declare max_new_tokens <= {room}" in message


# --- at the terminal: validate (and run, which makes the same checks before freezing) --------

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "parameters" / "llm-prompted.yaml"


def _declared(tmp_path: Path, folder: Path, **model: object) -> Path:
    declaration = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    declaration["corpus"]["path"] = str(ROOT / "data" / "debian-sections" / "eval.jsonl")
    declaration["pricing"]["offers"] = str(ROOT / "parameters" / "offers.yaml")
    declaration["model"]["path"] = str(folder)
    declaration["tokenizer"]["path"] = str(folder)
    declaration["model"].update(model)
    declaration["fixed"]["context"] = 128
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(declaration, sort_keys=False), encoding="utf-8")
    return path


def test_validate_and_run_refuse_verbalisations_the_model_reads_alike(tmp_path, capsys) -> None:
    folder = tiny_causal_lm(tmp_path / "lm", "gpt2", positions=256)
    declaration = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    prompt = declaration["model"]["prompt"]
    prompt["verbalisations"]["games"] = " ADMIN"  # lower-cased by the tokenizer: " admin"
    path = _declared(tmp_path, folder, prompt=prompt)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "R1.5" in err and "' admin' and ' ADMIN' are the same to the model" in err
    out = tmp_path / "outputs"
    assert main(["run", str(path), "--output-dir", str(out)]) == 2
    assert "are the same to the model" in capsys.readouterr().err
    assert not [p for p in out.iterdir() if p.is_dir()]  # refused before any bundle is made


def test_an_invalid_pad_token_id_reaches_the_terminal_with_its_fix(tmp_path, capsys) -> None:
    """Was: only the CSV notes of failed rows held it."""
    classes = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))["classes"]
    folder = tiny_classifier(tmp_path / "cls", "gpt2", classes, pad_token_id=0)
    config = folder / "config.json"
    text = config.read_text(encoding="utf-8").replace('"pad_token_id": 0', '"pad_token_id": -1')
    config.write_text(text, encoding="utf-8")
    path = _declared(tmp_path, folder, backend="hf")
    declaration = yaml.safe_load(path.read_text(encoding="utf-8"))
    del declaration["model"]["prompt"]
    path.write_text(yaml.safe_dump(declaration, sort_keys=False), encoding="utf-8")
    for argv in (["validate", str(path)], ["run", str(path), "--output-dir", str(tmp_path / "o")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "R2.1" in err and "pad_token_id -1" in err and "Fix: set pad_token_id" in err
        assert "Traceback" not in err

"""``causal_lm``: scores and answers independent of batch size (R2.1), the prompt kept whole when
a text is cut (R2.3), off-label answers failing acceptance (R1.5).

Tiny GPT-2 (absolute positions) and Llama (RoPE) causal LMs built from configs, with random
weights and a word-level tokenizer made here: nothing is downloaded.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from gpubench_nb.engine.backends import load_backend
from gpubench_nb.engine.measure import measure_pass
from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.acceptance import check_predictions
from gpubench_nb.protocol.corpus import Corpus, CorpusItem
from gpubench_nb.protocol.experiment_spec import QualitySpec, Settings
from gpubench_nb.protocol.prompting import PromptSpec
from scripts.tiny_decoders import sample_texts, tiny_causal_lm

CLASSES = ("admin", "games", "net", "sound", "web")
TEXTS = sample_texts(16, seed=5)
TEMPLATE = "classify this package : {text} . section :"
SINGLE = tuple(f" {c}" for c in CLASSES)  # one word-level token each: the fast path
MULTI = (" admin tool", " games", " net server client", " sound audio", " web")


def _prompt(**changes) -> PromptSpec:
    base = PromptSpec(
        template=TEMPLATE,
        chat_template=False,
        verbalisations=SINGLE,
        decision="loglik",
        length_normalisation="none",
        max_new_tokens=None,
        stop=(),
        normalise=(),
    )
    return dataclasses.replace(base, **changes)


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def folder(request, tmp_path_factory) -> Path:
    return tiny_causal_lm(tmp_path_factory.mktemp(request.param), request.param)


def _load(folder: Path, prompt: PromptSpec):
    return load_backend(
        SimpleNamespace(backend="causal_lm", path=folder, build={}, prompt=prompt),
        SimpleNamespace(path=folder),
        classes=CLASSES,
        device="cpu",
        precision="fp32",
    )


def _scores(backend, batch: int, *, general: bool = False, texts=TEXTS) -> torch.Tensor:
    tokenized = backend.tokenize(texts, 64)
    out = torch.empty(len(texts), len(CLASSES))
    with torch.inference_mode():
        for b in backend.batches(tokenized, batch, "corpus_order"):
            out[b.indices] = backend.scores(b, general=general)
    return out


def _reference(backend, texts=TEXTS) -> torch.Tensor:
    """What the plain transformers call gives, text by text, no padding: the summed log-prob
    of each verbalisation's tokens after the prompt."""
    tokenized = backend.tokenize(texts, 64)
    out = torch.empty(len(texts), len(CLASSES))
    with torch.inference_mode():
        for i, prompt_ids in enumerate(tokenized.input_ids):
            for c, cont in enumerate(backend.prompts.continuations):
                ids = torch.tensor([prompt_ids + cont])
                logprobs = torch.log_softmax(backend.module(input_ids=ids).logits[0], -1)
                start = len(prompt_ids)
                out[i, c] = sum(logprobs[start - 1 + j, t] for j, t in enumerate(cont))
    return out


@pytest.mark.parametrize("verbalisations", [SINGLE, MULTI], ids=["fast", "general"])
def test_loglik_scores_do_not_depend_on_batch_size(folder, verbalisations) -> None:
    backend = _load(folder, _prompt(verbalisations=verbalisations))
    assert backend.fast_path == (verbalisations == SINGLE)
    reference = _reference(backend)
    assert reference.std(0).min() > 0.1  # every class scores differently across texts
    for batch in (1, 4, 8):
        scores = _scores(backend, batch)
        torch.testing.assert_close(scores, reference, atol=2e-4, rtol=1e-5)
        assert scores.argmax(-1).tolist() == reference.argmax(-1).tolist(), f"batch {batch}"


def test_fast_path_equals_general_path_for_single_token_labels(folder) -> None:
    backend = _load(folder, _prompt())
    assert backend.fast_path
    fast, general = _scores(backend, 8), _scores(backend, 8, general=True)
    torch.testing.assert_close(fast, general, atol=2e-4, rtol=1e-5)
    assert fast.argmax(-1).tolist() == general.argmax(-1).tolist()


def test_without_position_ids_gpt2_scores_move_under_left_padding(tmp_path) -> None:
    """Why position_ids are passed: GPT-2's absolute positions shift with left padding."""
    backend = _load(tiny_causal_lm(tmp_path / "g", "gpt2"), _prompt())
    tokenized = backend.tokenize(TEXTS, 64)
    b = backend.batches(tokenized, 8, "corpus_order")[0]
    with torch.inference_mode():
        right = backend.scores(b)
        b.tensors.pop("position_ids")
        wrong = backend.scores(b)
    assert (right - wrong).abs().max() > 1e-2


@pytest.mark.parametrize(("rule", "lengths"), [("tokens", [2, 1, 3, 2, 1]), ("chars", None)])
def test_length_normalisation_divides_the_summed_loglik(folder, rule, lengths) -> None:
    plain = _scores(_load(folder, _prompt(verbalisations=MULTI)), 4)
    normalised = _scores(_load(folder, _prompt(verbalisations=MULTI, length_normalisation=rule)), 4)
    lengths = lengths or [len(v) for v in MULTI]
    torch.testing.assert_close(normalised, plain / torch.tensor(lengths, dtype=torch.float32))


def _generate_prompt(**changes) -> PromptSpec:
    return _prompt(
        decision="generate",
        verbalisations=tuple(CLASSES),
        max_new_tokens=3,
        normalise=("strip", "casefold"),
        **changes,
    )


def _answers(backend, batch: int) -> list[str]:
    tokenized = backend.tokenize(TEXTS, 64)
    out = [""] * len(TEXTS)
    for b in backend.batches(tokenized, batch, "corpus_order"):
        for position, text in zip(b.indices, backend.generated_texts(b), strict=True):
            out[position] = text
    return out


def test_greedy_answers_do_not_depend_on_batch_size(folder) -> None:
    backend = _load(folder, _generate_prompt())
    answers = _answers(backend, 1)
    assert len(set(answers)) > 1
    for batch in (4, 8):
        assert _answers(backend, batch) == answers, f"batch {batch}"


def test_stop_strings_cut_the_answer(folder) -> None:
    plain = _answers(_load(folder, _generate_prompt()), 4)
    stopped = _answers(_load(folder, _generate_prompt(stop=("the",))), 4)
    assert stopped == [a.split("the", 1)[0] for a in plain]


def test_off_label_answers_are_written_as_is_and_fail_acceptance(folder, tmp_path) -> None:
    backend = _load(folder, _generate_prompt())
    items = tuple(CorpusItem(f"t{i}", text, CLASSES[i % 5]) for i, text in enumerate(TEXTS))
    corpus = Corpus(path=tmp_path / "c.jsonl", items=items, revision="r")
    settings = Settings("fp32", context=64, batch=4, device="cpu", batching="corpus_order")
    predictions = tmp_path / "predictions.jsonl"
    result = measure_pass(backend, corpus, settings, "processing", predictions)
    assert result.ok, result.error
    answers = _answers(backend, 1)
    off = [a for a in answers if a.strip().casefold() not in CLASSES]
    assert result.off_label_answers == len(off) > 0
    assert result.tokens_processed > sum(len(ids) for ids in backend.tokenize(TEXTS, 64).input_ids)
    quality = QualitySpec("accuracy", threshold=0.0, tolerance=1.0, reference_variant="v")
    report = check_predictions(corpus, predictions, CLASSES, quality)
    assert not report.format_valid and not report.corpus_accepted
    assert len(report.malformed_lines) == len(off)
    assert "is not one of the declared classes" in report.malformed_lines[0]["error"]


def test_truncation_keeps_the_prompt_whole_and_cuts_the_text(folder) -> None:
    backend = _load(folder, _prompt())
    long_text = " ".join(["package"] * 40)
    tokenized = backend.tokenize([long_text, "mail"], 20)
    prefix = backend.prompts.fast.encode("classify this package :").ids
    suffix = backend.prompts.fast.encode(". section :", add_special_tokens=False).ids
    cut = tokenized.input_ids[0]
    assert len(cut) == 20 and cut[: len(prefix)] == prefix and cut[-len(suffix) :] == suffix
    assert tokenized.truncated_texts == 1
    assert tokenized.dropped_tokens == 40 - (20 - len(prefix) - len(suffix))
    with pytest.raises(BackendError, match=r"R2\.3.*cannot hold the prompt"):
        backend.tokenize(["mail"], len(prefix) + len(suffix))


def test_chat_template_wraps_the_prompt(tmp_path) -> None:
    folder = tiny_causal_lm(tmp_path / "chat", "llama", chat_template=True)
    backend = _load(folder, _prompt(chat_template=True))
    ids = backend.tokenize(["mail server"], 64).input_ids[0]
    text = backend.tokenizer.hf.decode(ids)
    assert text.startswith("<s> user : classify") and text.endswith("<s> assistant :")
    plain = tiny_causal_lm(tmp_path / "plain", "llama")
    with pytest.raises(BackendError, match="has no chat template"):
        _load(plain, _prompt(chat_template=True))


def test_a_verbalisation_that_merges_with_the_prompt_is_refused(folder) -> None:
    with pytest.raises(BackendError, match=r"R1\.3.*merges with the end of the prompt"):
        _load(folder, _prompt(template="{text} section", verbalisations=(":",) * 5))


# --- issue 23 §7: the folder's generation options never leak; every file read is fingerprinted


def _leaky_copy(folder: Path, target: Path, words: list[str]) -> Path:
    """A copy of ``folder`` whose generation_config.json holds the options the issue found in
    a test folder: suppress_tokens (the words the model answers with), min_new_tokens: 2,
    bad_words_ids, cache_implementation: static."""
    import json
    import shutil

    shutil.copytree(folder, target)
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(target), local_files_only=True)
    ids = sorted({hf.convert_tokens_to_ids(w) for w in words})
    path = target / "generation_config.json"
    config = json.loads(path.read_text())
    config.update(
        suppress_tokens=ids,
        min_new_tokens=2,
        bad_words_ids=[[i] for i in ids[:2]],
        cache_implementation="static",
    )
    path.write_text(json.dumps(config))
    return target


def test_generation_config_json_changes_the_revision_not_the_answers(folder, tmp_path) -> None:
    """Before issue 23, generate used the folder's generation_config.json (suppress_tokens
    changed answers; min_new_tokens forced two tokens) while the model revision stayed the
    same. Now the file is part of the model revision, and only the declared options apply."""
    from gpubench_nb.engine.backends import fingerprints_for

    prompt = _generate_prompt()
    plain = _load(folder, prompt)
    before = _answers(plain, 4)
    words = sorted({w for answer in before for w in answer.split()})
    assert words, "the tiny model answers with some words"
    leaky = _leaky_copy(folder, tmp_path / "leaky", words)
    spec = SimpleNamespace(backend="causal_lm", path=leaky, build={}, prompt=prompt)
    original = SimpleNamespace(backend="causal_lm", path=folder, build={}, prompt=prompt)
    assert (
        fingerprints_for(spec, SimpleNamespace(path=leaky))[0]
        != (fingerprints_for(original, SimpleNamespace(path=folder))[0])
    )
    backend = _load(leaky, prompt)
    assert _answers(backend, 4) == before
    effective = backend.describe()["generation_config_effective"]
    assert effective["max_new_tokens"] == 3 and effective["do_sample"] is False
    assert "suppress_tokens" not in effective and "min_new_tokens" not in effective
    overridden = backend.describe()["generation_config_folder_overridden"]
    assert {"suppress_tokens", "min_new_tokens", "bad_words_ids"} <= set(overridden)


def test_a_chat_template_file_is_part_of_the_tokenizer_revision(tmp_path) -> None:
    """chat_template.jinja changes the rendered prompt, so it changes the tokenizer revision."""
    from gpubench_nb.engine.backends import fingerprints_for

    folder = tiny_causal_lm(tmp_path / "chat", "llama", chat_template=True)
    assert (folder / "chat_template.jinja").is_file()
    spec = SimpleNamespace(backend="causal_lm", path=folder, build={}, prompt=None)
    before = fingerprints_for(spec, SimpleNamespace(path=folder))
    template = folder / "chat_template.jinja"
    template.write_text(template.read_text().replace(" : ", " :: "))
    after = fingerprints_for(spec, SimpleNamespace(path=folder))
    assert after[0] == before[0] and after[1] != before[1]


_OPENED = r"""
import json, sys
from pathlib import Path
from types import SimpleNamespace
folder = Path(sys.argv[1]).resolve()
opened = set()
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)):
        path = Path(args[0].decode() if isinstance(args[0], bytes) else args[0])
        if path.is_absolute() and folder in path.resolve().parents:
            opened.add(str(path.resolve()))
sys.addaudithook(hook)
from gpubench_nb.engine.backends import load_backend
from gpubench_nb.engine.backends.registry import fingerprinted_files
from gpubench_nb.protocol.prompting import PromptSpec
prompt = PromptSpec(template="text : {text} section :", chat_template=True,
    verbalisations=(" games", " net"), decision="generate", length_normalisation="none",
    max_new_tokens=2, stop=(), normalise=("strip",))
model = SimpleNamespace(backend="causal_lm", path=folder, build={}, prompt=prompt)
tok = SimpleNamespace(path=folder)
listed = {str(p.resolve()) for files in fingerprinted_files(model, tok)[0] for p in files}
opened.clear()  # the hashing's opens: only the load's count
load_backend(model, tok, classes=("games", "net"), device="cpu", precision="fp32")
print(json.dumps({"opened": sorted(opened), "unlisted": sorted(opened - listed)}))
"""


def test_every_file_transformers_opens_is_fingerprinted(tmp_path) -> None:
    """An audit hook sees every file Python opens while the model and tokenizer load: each
    one in the folder is among the fingerprinted files (weights are opened by safetensors'
    Rust code, outside the hook, and were always listed)."""
    import json
    import subprocess
    import sys

    folder = tiny_causal_lm(tmp_path / "m", "gpt2", chat_template=True)
    done = subprocess.run(
        [sys.executable, "-c", _OPENED, str(folder)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    names = {Path(p).name for p in out["opened"]}
    assert {"config.json", "generation_config.json", "chat_template.jinja"} <= names
    assert out["unlisted"] == []

"""Backends: offline loading, truncation counts (R2.3), batching order (R2.1), fingerprints
(R1.1), label mapping by name (R1.3), reproducible preset builds on train/tune only (R1.4)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file, save_file

from gpubench_nb.engine.backends import (
    build_model,
    device_errors,
    fingerprints_for,
    load_backend,
    resolve_device,
)
from gpubench_nb.engine.backends.base import batch_order, check_precision, native_bf16
from gpubench_nb.engine.backends.bow import build_bow
from gpubench_nb.engine.backends.minilm import build_minilm
from gpubench_nb.engine.backends.presets import (
    BuildSpec,
    macro_f1,
    minilm_source_dir,
    select_subset,
)
from gpubench_nb.engine.backends.tokenization import TextTokenizer, tokenizer_files
from gpubench_nb.errors import BackendError, ProtocolError
from gpubench_nb.protocol import corpus
from gpubench_nb.protocol import corpus as corpus_module
from gpubench_nb.protocol.fingerprint import sha256_file, sha256_files
from tests.support.models import tiny_bert_folder

DATA = Path(__file__).resolve().parents[2] / "data" / "debian-sections"
CLASSES = ("admin", "games", "graphics", "mail", "math", "net", "science", "sound", "text", "web")
SEED = 20261202
# A few hundred items and two epochs: enough to show determinism, a second or two to build.
SMALL_BOW = {"train_limit": 300, "tune_limit": 100, "max_epochs": 2}


def _split(name: str) -> tuple[list[str], list[str]]:
    with open(DATA / f"{name}.jsonl", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    return [r["text"] for r in rows], [r["label"] for r in rows]


def _specs(backend: str, path: Path, tokenizer: Path | None = None) -> tuple:
    return (
        SimpleNamespace(backend=backend, path=path, build={}),
        SimpleNamespace(path=tokenizer or path),
    )


def _load(backend: str, path: Path, precision: str = "fp32", classes=CLASSES):
    model, tokenizer = _specs(backend, path)
    return load_backend(model, tokenizer, classes=classes, device="cpu", precision=precision)


def _predict_in_corpus_order(backend, texts, batch: int, batching: str) -> list[int]:
    """What measure does: run the batches, put each prediction at its corpus position."""
    tokenized = backend.tokenize(texts, 128)
    out = [-1] * len(texts)
    for b in backend.batches(tokenized, batch, batching):
        for position, label in zip(b.indices, backend.predict(b).tolist(), strict=True):
            out[position] = label
    return out


@pytest.fixture(scope="module")
def splits():
    return {name: _split(name) for name in ("train", "tune", "eval")}


@pytest.fixture(scope="module")
def bow_build(splits, tmp_path_factory):
    """The real bow build: full train, epochs chosen on tune, context 128."""
    out = tmp_path_factory.mktemp("bow") / "model"
    report = build_bow(BuildSpec(*splits["train"], *splits["tune"], CLASSES, SEED, 128), out)
    return report


@pytest.fixture(scope="module")
def bow(bow_build):
    return _load("bow", bow_build.path)


@pytest.fixture(scope="module")
def eval_predictions(bow, splits):
    return {
        b: _predict_in_corpus_order(bow, splits["eval"][0], b, "corpus_order") for b in (1, 4, 8)
    }


# --- fingerprints (R1.1) ------------------------------------------------------------------


def test_sha256_helpers_known_values(tmp_path) -> None:
    # Empty-input SHA-256 (FIPS 180-2 test vectors / NIST CSRC examples).
    (tmp_path / "empty").write_bytes(b"")
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sha256_file(tmp_path / "empty") == empty
    (tmp_path / "a").write_bytes(b"abc")
    abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert sha256_file(tmp_path / "a") == abc


def test_sha256_files_order_free_but_name_and_content_bound(tmp_path) -> None:
    (tmp_path / "a").write_text("one")
    (tmp_path / "b").write_text("two")
    base = sha256_files([tmp_path / "a", tmp_path / "b"], tmp_path)
    assert sha256_files([tmp_path / "b", tmp_path / "a"], tmp_path) == base
    (tmp_path / "c").write_text("two")
    assert sha256_files([tmp_path / "a", tmp_path / "c"], tmp_path) != base  # renamed
    (tmp_path / "b").write_text("two!")
    assert sha256_files([tmp_path / "a", tmp_path / "b"], tmp_path) != base  # changed


# --- bow: build, quality, reproducibility -----------------------------------------------


def test_bow_builds_in_seconds_and_passes_the_demo_threshold(bow_build, splits, eval_predictions):
    gold = [CLASSES.index(label) for label in splits["eval"][1]]
    value = macro_f1(gold, eval_predictions[8], len(CLASSES))
    from sklearn.metrics import f1_score

    assert value == pytest.approx(f1_score(gold, eval_predictions[8], average="macro"), abs=1e-12)
    meta = bow_build.metadata
    print(
        f"\nbow build {bow_build.build_seconds:.1f} s, {meta['chosen']['epochs']} epochs, "
        f"tune macro-F1 {bow_build.tune_macro_f1:.4f}, eval macro-F1 {value:.4f}"
    )
    assert bow_build.build_seconds > 0  # recorded; its speed is benchmarks' job, not a unit test's
    assert bow_build.train_count == 5107 and bow_build.tune_count == 1000  # R1.4: no eval
    assert meta["tune_macro_f1"] == max(meta["tune_macro_f1_by_epoch"])
    assert value >= 0.70  # the demo's declared threshold (parameters/demo.yaml)


def test_bow_rebuild_from_the_same_seed_is_byte_identical(splits, tmp_path) -> None:
    threads = torch.get_num_threads()
    folders = []
    for name, seed in (("a", SEED), ("b", SEED), ("c", SEED + 1)):
        out = tmp_path / name
        build_bow(
            BuildSpec(*splits["train"], *splits["tune"], CLASSES, seed, options=SMALL_BOW), out
        )
        folders.append(out)
    a, b, c = ((f / "model.safetensors").read_bytes() for f in folders)
    assert a == b
    assert (folders[0] / "gpubench_model.json").read_bytes() == (
        folders[1] / "gpubench_model.json"
    ).read_bytes()
    assert a != c  # the seed matters, so the equality above is not vacuous
    # The build restored the caller's global settings (it runs single-threaded inside).
    assert torch.are_deterministic_algorithms_enabled() is False
    assert torch.get_num_threads() == threads


def test_a_changed_weight_changes_model_revision(bow_build, bow, tmp_path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(bow_build.path, copy)
    assert _load("bow", copy).model_revision == bow.model_revision  # path-independent
    weights = load_file(str(copy / "model.safetensors"))
    weights["head.bias"][0] += 1e-3
    save_file(weights, str(copy / "model.safetensors"))
    changed = _load("bow", copy)
    assert changed.model_revision != bow.model_revision
    assert changed.tokenizer_revision == bow.tokenizer_revision
    assert fingerprints_for(*_specs("bow", copy)) == (
        changed.model_revision,
        changed.tokenizer_revision,
    )


def test_bow_predictions_identical_across_batch_sizes(eval_predictions) -> None:
    differing = [
        i
        for i in range(len(eval_predictions[1]))
        if len({eval_predictions[b][i] for b in (1, 4, 8)}) > 1
    ]
    print(f"\nitems whose bow prediction differs between batch 1/4/8 on CPU: {len(differing)}")
    assert differing == []


def test_describe_counts_parameters_and_weight_bytes(bow) -> None:
    info = bow.describe()
    vocab, dim = bow.module.embedding.weight.shape
    assert info["parameter_count"] == vocab * dim + dim * len(CLASSES) + len(CLASSES)
    assert info["weight_bytes"] == 4 * info["parameter_count"]  # fp32
    assert (info["backend"], info["device"], info["precision"]) == ("bow", "cpu", "fp32")


# --- tokenisation and truncation (R2.3) ---------------------------------------------------


def test_truncation_counts_match_the_corpus_readme(bow, splits) -> None:
    texts = splits["eval"][0]
    hf = TextTokenizer(bow.tokenizer.path).hf  # transformers' own tokenizer, the reference
    full = [len(ids) for ids in hf(texts, verbose=False)["input_ids"]]
    # data/debian-sections/README.md: special tokens included, 262 / 37 / 2 truncated.
    for context, expected in ((128, 262), (256, 37), (512, 2)):
        tokenized = bow.tokenize(texts, context)
        assert tokenized.truncated_texts == expected
        assert tokenized.dropped_tokens == sum(max(0, n - context) for n in full)
        assert max(len(ids) for ids in tokenized.input_ids) == context
    cut = bow.tokenize(texts[:300], 128).input_ids  # 300 items hold 70+ truncated texts
    reference = hf(texts[:300], truncation=True, max_length=128)["input_ids"]
    assert cut == reference  # the one-pass cut equals the tokenizer's own truncation


def test_context_too_small_or_too_large_is_an_error(bow) -> None:
    with pytest.raises(BackendError, match="R2.3"):
        bow.tokenize(["text"], 2)  # [CLS] + [SEP] leave no room
    tokenizer = TextTokenizer(minilm_source_dir())
    with pytest.raises(BackendError, match="<= 512"):
        tokenizer.tokenize(["text"], 513, max_context=512)


# --- batching order (R2.1) ---------------------------------------------------------------


def test_length_sorted_batches_map_back_to_corpus_order(bow, splits, eval_predictions) -> None:
    texts = splits["eval"][0]
    tokenized = bow.tokenize(texts, 128)
    batches = bow.batches(tokenized, 8, "length_sorted")
    order = [i for b in batches for i in b.indices]
    assert sorted(order) == list(range(len(texts)))
    assert order != list(range(len(texts)))  # it really reordered
    lengths = [len(tokenized.input_ids[i]) for i in order]
    assert lengths == sorted(lengths)
    assert _predict_in_corpus_order(bow, texts, 8, "length_sorted") == eval_predictions[8]


def test_corpus_order_is_the_default_order_and_unknown_batching_is_refused() -> None:
    assert batch_order([5, 1, 3, 2, 4], 2, "corpus_order") == [[0, 1], [2, 3], [4]]
    assert batch_order([5, 1, 3, 2, 4], 2, "length_sorted") == [[1, 3], [2, 4], [0]]
    with pytest.raises(BackendError, match="R2.1"):
        batch_order([1, 2], 2, "fastest")
    with pytest.raises(BackendError, match="R2.1"):
        batch_order([1, 2], 0, "corpus_order")


# --- precision and device -----------------------------------------------------------------


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_bow_runs_reduced_precision_on_cpu(bow_build, splits, eval_predictions, precision):
    backend = _load("bow", bow_build.path, precision)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    assert backend.module.embedding.weight.dtype == dtype  # the EmbeddingBag too
    assert backend.describe()["weight_bytes"] == 2 * backend.describe()["parameter_count"]
    predicted = _predict_in_corpus_order(backend, splits["eval"][0], 8, "corpus_order")
    agree = sum(p == q for p, q in zip(predicted, eval_predictions[8], strict=True))
    print(f"\nbow {precision} on CPU agrees with fp32 on {agree} of 1000 eval items")
    assert agree >= 980


def test_unknown_precision_is_a_clear_error(bow_build) -> None:
    with pytest.raises(BackendError, match="precision 'fp8' is not supported"):
        _load("bow", bow_build.path, "fp8")


class FakeCuda:
    """torch.cuda as far as the bf16 check goes: a current device and a capability."""

    def __init__(self, native: dict[int, bool], *, old_torch: bool = False) -> None:
        self.native, self.old_torch, self.current, self.asked = native, old_torch, 0, []

    def device(self, device):
        fake = self

        class Select:
            def __enter__(self):
                fake.previous, fake.current = fake.current, torch.device(device).index

            def __exit__(self, *exc):
                fake.current = fake.previous

        return Select()

    def is_bf16_supported(self, **kwargs):
        if self.old_torch and kwargs:
            raise TypeError("is_bf16_supported() got an unexpected keyword argument")
        self.asked.append((self.current, kwargs))
        return self.native[self.current] or kwargs.get("including_emulation", True)

    def get_device_name(self, device=None):
        return "Fake T4"


def test_bf16_is_checked_natively_on_the_selected_device() -> None:
    """The selected device is asked, without emulation (R2.2); torch < 2.4 has no argument."""
    cuda = FakeCuda({0: True, 1: False})
    assert native_bf16(torch.device("cuda", 0), cuda) is True
    assert native_bf16(torch.device("cuda", 1), cuda) is False
    assert cuda.asked == [(0, {"including_emulation": False}), (1, {"including_emulation": False})]
    assert cuda.current == 0  # the current device is restored
    with pytest.raises(BackendError, match=r"R2\.2: backend bow: precision bf16 .*Fake T4"):
        check_precision("bow", torch.device("cuda", 1), "bf16", cuda)
    check_precision("bow", torch.device("cuda", 1), "fp16", cuda)  # only bf16 is asked about
    old = FakeCuda({0: False}, old_torch=True)
    assert native_bf16(torch.device("cuda", 0), old) is True  # old torch: its own answer
    assert old.asked == [(0, {})]


def test_load_runs_no_forward_pass(bow_build, monkeypatch) -> None:
    """The first forward of a fresh process must be the timed cold pass (R3.2)."""
    from gpubench_nb.engine.backends.bow import BowBackend

    def forbidden(self, tensors):
        raise AssertionError("a forward pass ran during load")

    monkeypatch.setattr(BowBackend, "forward", forbidden)
    backend = _load("bow", bow_build.path, "fp16")
    assert backend.module.head.weight.dtype == torch.float16


def test_bow_imports_decide_from_the_folder_s_declaration_without_hashing(
    bow_build, tmp_path, monkeypatch
) -> None:
    """import_seconds holds imports only: whether bow needs transformers is read from its
    built folder's declared tokenizer revision, not hashed (issue 25); a folder declaring
    another tokenizer gets transformers."""
    import json
    import shutil

    from gpubench_nb.engine.backends.base import METADATA_FILE
    from gpubench_nb.engine.backends.imports import import_backend_modules
    from gpubench_nb.protocol import fingerprint

    def no_hash(path):
        raise AssertionError(f"hashed {path} while importing")

    monkeypatch.setattr(fingerprint, "sha256_file", no_hash)
    asked = import_backend_modules(*_specs("bow", bow_build.path))
    assert "tokenizers" in asked and "transformers" not in asked
    other = tmp_path / "other"
    shutil.copytree(bow_build.path, other)
    meta = json.loads((other / METADATA_FILE).read_text(encoding="utf-8"))
    meta["tokenizer_revision"] = "0" * 64
    (other / METADATA_FILE).write_text(json.dumps(meta), encoding="utf-8")
    assert "transformers" in import_backend_modules(*_specs("bow", other))


def test_load_with_revisions_hashes_nothing_and_parses_the_tokenizer_once(
    bow_build, monkeypatch
) -> None:
    """Fingerprints taken before the timed load are passed in, so the load reads each file
    once and hashes none (R3.2). bow reads its shipped WordPiece tokenizer.json once with
    ``tokenizers`` and never imports transformers for it (issue 25)."""
    from tokenizers import Tokenizer

    from gpubench_nb.protocol import fingerprint

    revisions = fingerprints_for(*_specs("bow", bow_build.path))
    parses: list[str] = []
    real_from_file, real_from_str = Tokenizer.from_file, Tokenizer.from_str

    def no_hash(path):
        raise AssertionError(f"hashed {path} inside the load")

    def counting_file(path):
        parses.append("file")
        return real_from_file(path)

    def counting_str(text):
        parses.append("str")
        return real_from_str(text)

    monkeypatch.setattr(Tokenizer, "from_file", staticmethod(counting_file))
    monkeypatch.setattr(Tokenizer, "from_str", staticmethod(counting_str))
    monkeypatch.setattr(fingerprint, "sha256_file", no_hash)
    model, tokenizer = _specs("bow", bow_build.path)
    backend = load_backend(
        model, tokenizer, classes=CLASSES, device="cpu", precision="fp32", revisions=revisions
    )
    assert parses == ["file"]
    assert backend.tokenizer.hf is None  # the plain route: no transformers object
    assert (backend.model_revision, backend.tokenizer_revision) == revisions
    cut = backend.tokenize(["word " * 50, "a"], 16)
    assert len(cut.input_ids[0]) == 16 and cut.truncated_texts == 1
    assert len(cut.input_ids[1]) == 3  # tokenizer.json's own padding to 128 is cleared


def test_a_transformers_tokenizer_is_shared_not_reparsed(bow_build, monkeypatch) -> None:
    """Through transformers (any folder but the shipped files), the fast tokenizer's Rust
    object is used as is, not re-parsed from its JSON (R3.2), and padding/truncation left by
    a transformers call are cleared before encoding."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    from gpubench_nb.engine.backends.tokenization import TextTokenizer

    parses: list[int] = []
    real_from_str = Tokenizer.from_str

    def counting(text):
        parses.append(1)
        return real_from_str(text)

    monkeypatch.setattr(Tokenizer, "from_str", staticmethod(counting))
    AutoTokenizer.from_pretrained(str(bow_build.path), local_files_only=True)
    by_transformers = len(parses)
    tokenizer = TextTokenizer(bow_build.path)  # plain=False: the transformers route
    assert len(parses) == 2 * by_transformers  # transformers' own parse(s), no copy of ours
    tokenizer.hf(["a b c", "a"], padding=True, truncation=True, max_length=3)
    cut = tokenizer.tokenize(["word " * 50, "a"], 16)
    assert len(cut.input_ids[0]) == 16 and cut.truncated_texts == 1
    assert len(cut.input_ids[1]) == 3


@pytest.mark.parametrize(
    ("error", "kind", "rule"),
    [
        (
            RuntimeError("CUDA error: no kernel image is available for execution on the device"),
            "architecture",
            "R2.4",
        ),
        (RuntimeError("\"addmm_impl_cpu_\" not implemented for 'Half'"), "precision", "R2.2"),
        (RuntimeError("CUDA error: an illegal memory access was encountered"), "device", "R3.6"),
        (ValueError("weights have an unexpected shape"), "other", "R3.6"),
    ],
)
def test_load_errors_say_what_failed(bow_build, monkeypatch, error, kind, rule) -> None:
    """Not every RuntimeError at load is a precision problem; a ValueError is clear too."""
    from gpubench_nb.engine.backends.bow import BowBackend

    def fail(self, *args, **kwargs):
        raise error

    monkeypatch.setattr(BowBackend, "__init__", fail)
    assert device_errors.failure_kind(error) == kind
    with pytest.raises(BackendError) as caught:
        _load("bow", bow_build.path)
    assert caught.value.rule == rule
    assert "backend bow load on cpu at fp32" in str(caught.value)
    assert str(error) in str(caught.value)


def test_out_of_memory_at_load_propagates_for_r5_8(bow_build, monkeypatch) -> None:
    from gpubench_nb.engine.backends.bow import BowBackend

    def fail(self, *args, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(BowBackend, "__init__", fail)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        _load("bow", bow_build.path)


def test_resolve_device(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(BackendError, match="CUDA is not available"):
        resolve_device("cuda")
    with pytest.raises(BackendError, match="not supported"):
        resolve_device("meta")


# --- label mapping by name (R1.3) and tokenizer identity (R1.1) ---------------------------


def test_bow_refuses_a_tokenizer_other_than_its_own(bow_build, tmp_path) -> None:
    other = tmp_path / "tok"
    other.mkdir()
    for path in tokenizer_files(bow_build.path):
        shutil.copyfile(path, other / path.name)
    with open(other / "vocab.txt", "a", encoding="utf-8") as handle:
        handle.write("[NEWTOKEN]\n")
    model, _ = _specs("bow", bow_build.path)
    with pytest.raises(BackendError, match="R1.1.*not the tokenizer"):
        load_backend(
            model, SimpleNamespace(path=other), classes=CLASSES, device="cpu", precision="fp32"
        )


def test_declared_class_order_is_mapped_by_name(bow, bow_build, splits) -> None:
    reordered = tuple(reversed(CLASSES))
    backend = _load("bow", bow_build.path, classes=reordered)
    texts = splits["eval"][0][:64]
    ours = _predict_in_corpus_order(bow, texts, 8, "corpus_order")
    theirs = _predict_in_corpus_order(backend, texts, 8, "corpus_order")
    assert [reordered[i] for i in theirs] == [CLASSES[i] for i in ours]
    with pytest.raises(BackendError, match=r"R1\.3.*missing \['misc'\]"):
        _load("bow", bow_build.path, classes=(*CLASSES[:-1], "misc"))


def test_hf_backend_loads_offline_and_maps_labels_by_name(tmp_path, splits) -> None:
    shuffled = dict(enumerate(reversed(CLASSES)))  # model index 0 is 'web'
    folder = tiny_bert_folder(tmp_path / "hf", shuffled)
    backend = _load("hf", folder)
    texts = splits["eval"][0][:12]
    tokenized = backend.tokenize(texts, 64)
    predicted = [-1] * len(texts)
    model_argmax = [-1] * len(texts)
    for b in backend.batches(tokenized, 4, "corpus_order"):
        assert set(b.tensors) == {"input_ids", "attention_mask"}
        labels = backend.predict(b)
        assert labels.shape == (len(b.indices),) and labels.device.type == "cpu"
        with torch.inference_mode():
            raw = backend.module(**b.tensors).logits.argmax(-1).tolist()
        for i, label, r in zip(b.indices, labels.tolist(), raw, strict=True):
            predicted[i], model_argmax[i] = label, r
    assert [CLASSES[p] for p in predicted] == [shuffled[r] for r in model_argmax]
    assert backend.model_revision == fingerprints_for(*_specs("hf", folder))[0]
    assert backend.describe()["parameter_count"] > 0


def test_hf_loading_prints_no_progress_bar_and_restores_the_setting(tmp_path, capsys) -> None:
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging

    from gpubench_nb.engine.backends.hf import from_pretrained

    folder = tiny_bert_folder(tmp_path / "hf", dict(enumerate(CLASSES)))
    capsys.readouterr()  # drop what saving printed
    hf_logging.enable_progress_bar()
    from_pretrained(AutoModelForSequenceClassification, folder, torch.float32)
    assert "Loading weights" not in capsys.readouterr().err  # no bar in a notebook's stderr
    assert hf_logging.is_progress_bar_enabled()  # the caller's setting is left as it was


def test_hf_class_name_mismatch_is_a_clear_error(tmp_path) -> None:
    folder = tiny_bert_folder(tmp_path / "hf", {i: f"LABEL_{i}" for i in range(len(CLASSES))})
    with pytest.raises(BackendError, match=r"R1\.3.*matched by name") as info:
        _load("hf", folder)
    assert "missing ['admin'" in str(info.value)


# --- minilm preset -----------------------------------------------------------------------


@pytest.mark.slow
def test_minilm_builds_on_a_subset_and_predicts(splits, tmp_path) -> None:
    started = time.perf_counter()
    out = tmp_path / "minilm"
    options = {"train_limit": 40, "tune_limit": 40, "device": "cpu", "c_grid": [10.0, 1000.0]}
    report = build_minilm(
        BuildSpec(*splits["train"], *splits["tune"], CLASSES, SEED, 32, options), out
    )
    assert (report.train_count, report.tune_count) == (40, 40)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            "config.json",
            "model.safetensors",
            "head.safetensors",
            "gpubench_model.json",
            "special_tokens_map.json",
            "tokenizer.json",
            "tokenizer_config.json",
            "vocab.txt",
        ]
    )
    # The encoder weights are the package's, byte for byte (R1.1).
    source = minilm_source_dir() / "model.safetensors"
    assert sha256_file(out / "model.safetensors") == sha256_file(source)
    backend = _load("minilm", out)
    texts, labels = splits["eval"][0][:32], splits["eval"][1][:32]
    predicted = [-1] * len(texts)
    for b in backend.batches(backend.tokenize(texts, 32), 8, "corpus_order"):
        for i, p in zip(b.indices, backend.predict(b).tolist(), strict=True):
            predicted[i] = p
    assert all(0 <= p < len(CLASSES) for p in predicted)
    value = macro_f1([CLASSES.index(x) for x in labels], predicted, len(CLASSES))
    accuracy = sum(CLASSES[p] == x for p, x in zip(predicted, labels, strict=True)) / len(texts)
    print(
        f"\nminilm 40+40 build: C={report.chosen['C']}, tune macro-F1 "
        f"{report.tune_macro_f1:.3f}; first 32 eval items: accuracy {accuracy:.2f}, "
        f"macro-F1 {value:.3f}; {time.perf_counter() - started:.1f} s"
    )
    assert accuracy > 0.3  # chance is ~0.1: mean pooling + head does work on 40 items
    assert backend.describe()["weight_bytes"] > 80_000_000  # 22.7 M fp32 parameters


# --- build_model: reuse, refuse, force (R1.1) ---------------------------------------------


@pytest.fixture
def small_exp(splits, tmp_path, monkeypatch):
    corpora = {
        name: SimpleNamespace(texts=tuple(t), labels=tuple(y), revision=f"rev-{name}")
        for name, (t, y) in splits.items()
    }
    monkeypatch.setattr(corpus, "load_experiment_corpus", lambda exp, split: corpora[split])
    monkeypatch.setattr(corpus_module, "check_disjoint", lambda eval, others: None)
    return SimpleNamespace(
        model=SimpleNamespace(backend="bow", path=tmp_path / "models" / "bow", build=SMALL_BOW),
        tokenizer=SimpleNamespace(path=tmp_path / "models" / "bow"),
        seed=SEED,
        classes=CLASSES,
        fixed={"context": 96, "precision": "fp32"},
        variants=(),
    )


def test_build_model_reuses_a_matching_build_and_refuses_a_different_one(small_exp) -> None:
    path = build_model(small_exp)
    weights = path / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    meta = json.loads((path / "gpubench_model.json").read_text())
    assert meta["declaration"]["context"] == 96
    assert meta["declaration"]["train_revision"] == "rev-train"
    assert build_model(small_exp) == path and weights.stat().st_mtime_ns == stamp  # reused
    changed = SimpleNamespace(**{**vars(small_exp), "seed": SEED + 1})
    with pytest.raises(BackendError, match=r"R1\.1.*differs in: seed.*--force"):
        build_model(changed)
    assert weights.stat().st_mtime_ns == stamp  # untouched without --force
    build_model(changed, force=True)
    assert json.loads((path / "gpubench_model.json").read_text())["declaration"]["seed"] == (
        SEED + 1
    )


@pytest.mark.parametrize(
    ("umask", "folder", "file"), [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600)]
)
def test_build_model_gives_the_bundle_modes_under_the_umask(
    small_exp, umask: int, folder: int, file: int
) -> None:
    # Issue 25: under umask 022 the model folder was 0700 and its weights 0600 (mkdtemp), while
    # the README promises files a colleague can read: the rule of bundles, 0777/0666 & ~umask.
    previous = os.umask(umask)
    try:
        path = build_model(small_exp)
    finally:
        os.umask(previous)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in [path, *path.rglob("*")]}
    assert modes.pop(path.name) == folder
    assert "model.safetensors" in modes and "gpubench_model.json" in modes
    assert all(mode == (folder if (path / name).is_dir() else file) for name, mode in modes.items())


def test_build_model_never_deletes_a_foreign_folder(small_exp) -> None:
    small_exp.model.path.mkdir(parents=True)
    (small_exp.model.path / "notes.txt").write_text("mine")
    with pytest.raises(BackendError, match="not written by build-model"):
        build_model(small_exp, force=True)
    assert (small_exp.model.path / "notes.txt").read_text() == "mine"


def test_build_model_rejects_hf_and_unknown_options(small_exp) -> None:
    small_exp.model.backend = "hf"
    with pytest.raises(BackendError, match="nothing to build"):
        build_model(small_exp)
    small_exp.model.backend = "bow"
    small_exp.model.build = {"epochs": 3}  # refused as validate refuses it (one declaration)
    with pytest.raises(ProtocolError, match=r"model.build.epochs: unknown key.*'max_epochs'"):
        build_model(small_exp)


def test_bad_build_option_values_fail_before_building(splits, tmp_path) -> None:
    with pytest.raises(ProtocolError, match="max_epochs: must be an integer >= 1, got 0"):
        build_bow(
            BuildSpec(*splits["train"], *splits["tune"], CLASSES, 1, options={"max_epochs": 0}),
            tmp_path / "m",
        )
    with pytest.raises(BackendError, match="R1.3.*'misc'"):
        build_bow(BuildSpec(["a"], ["misc"], ["b"], ["web"], CLASSES, 1), tmp_path / "m")
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_stratified_subset_keeps_every_class_and_is_deterministic() -> None:
    labels = [0] * 50 + [1] * 30 + [2] * 15 + [3] * 5
    picked = select_subset(labels, 10, "stratified")
    assert len(picked) == 10 and picked == sorted(picked)
    counts = [sum(labels[i] == c for i in picked) for c in range(4)]
    assert counts == [5, 3, 1, 1]  # 5 / 3 / 1.5 / 0.5, one per class guaranteed
    assert select_subset(labels, 10, "stratified") == picked
    assert select_subset(labels, 3, "first") == [0, 1, 2]
    assert select_subset(labels, None, "stratified") == list(range(100))


# --- GPU ----------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
def test_bow_on_cuda(bow_build, splits, eval_predictions, precision) -> None:
    model, tokenizer = _specs("bow", bow_build.path)
    backend = load_backend(model, tokenizer, classes=CLASSES, device="cuda", precision=precision)
    assert backend.device.type == "cuda"
    tokenized = backend.tokenize(splits["eval"][0], 128)
    batches = backend.batches(tokenized, 8, "corpus_order")
    assert all(t.device.type == "cuda" for b in batches for t in b.tensors.values())
    predicted = torch.cat([backend.predict(b) for b in batches]).cpu().tolist()
    agree = sum(p == q for p, q in zip(predicted, eval_predictions[8], strict=True))
    print(f"\nbow {precision} on CUDA agrees with CPU fp32 on {agree} of 1000")
    assert agree >= 980
    assert torch.cuda.memory_allocated(backend.device) >= backend.describe()["weight_bytes"]


def test_unreadable_model_metadata_names_the_file_r1_1_and_the_rebuild(tmp_path) -> None:
    from gpubench_nb.engine.backends.base import METADATA_FILE, read_metadata

    (tmp_path / METADATA_FILE).write_text("{not json", encoding="utf-8")
    with pytest.raises(BackendError) as caught:
        read_metadata(tmp_path)
    message = str(caught.value)
    assert str(tmp_path / METADATA_FILE) in message and "unreadable JSON" in message
    assert "R1.1" in message and "build-model --force" in message

"""The ``minilm`` preset: all-MiniLM-L6-v2, mean pooling, a logistic head fitted on train."""

from __future__ import annotations

import shutil
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gpubench_nb.engine.backends.presets as presets
from gpubench_nb.engine.backends.base import (
    LoadSpec,
    built_files,
    padded_batches,
    resolve_device,
    torch_dtype,
)
from gpubench_nb.engine.backends.hf import TransformersBackend, from_pretrained, max_context
from gpubench_nb.engine.backends.tokenization import TextTokenizer, tokenizer_files
from gpubench_nb.errors import BackendError
from gpubench_nb.protocol.experiment import build_options
from gpubench_nb.protocol.fingerprint import sha256_files

if TYPE_CHECKING:
    import torch

ENCODER_FILES = ("config.json", "model.safetensors")
HEAD_FILE = "head.safetensors"
# Imported before the load clock starts (imports.py, R3.2)
AUTO_CLASSES = ("AutoModel",)
MODEL_MAPPING = "MODEL_MAPPING_NAMES"
DEFAULT_MODEL_TYPE = "bert"  # the shipped encoder


def model_files(folder: Path) -> list[Path]:
    """The files a minilm model is loaded from, fingerprinted as its model_revision (R1.1)."""
    return built_files(folder, "minilm", (*ENCODER_FILES, HEAD_FILE))


def minilm_module(encoder: torch.nn.Module, head: torch.nn.Linear) -> torch.nn.Module:
    """Encoder -> mean over real tokens -> L2 normalisation (as all-MiniLM-L6-v2 is trained,
    its modules.json) -> linear head."""
    import torch

    class MinilmClassifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder
            self.head = head

        def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask)[0]
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.head(self.embed(input_ids, attention_mask))

    return MinilmClassifier()


def _embed(
    module: Any, texts: Sequence[str], tokenizer: TextTokenizer, context: int, batch: int, device
) -> Any:
    """fp32 sentence embeddings in corpus order (length-sorted batches: build time only)."""
    import torch

    config = module.encoder.config
    tokenized = tokenizer.tokenize(texts, context, max_context=config.max_position_embeddings)
    out = torch.empty((len(texts), config.hidden_size), dtype=torch.float32)
    with torch.inference_mode():
        for b in padded_batches(tokenized, batch, "length_sorted", tokenizer.pad_id, device):
            out[b.indices] = module.embed(**b.tensors).float().cpu()
    return out.numpy()


def build_minilm(spec: presets.BuildSpec, out_dir: Path) -> presets.BuildReport:
    """Embed train and tune (fp32), fit a logistic head per C of the grid on train, keep the
    best on tune macro-F1 (R1.4); write the encoder verbatim, the head, tokenizer, metadata."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModel

    started = time.perf_counter()
    opts = build_options("minilm", spec.options)
    classes = tuple(spec.classes)
    source = presets.minilm_source_dir()
    tokenizer = TextTokenizer(source)
    subsets = presets.build_subsets(spec, opts)
    absent = [c for i, c in enumerate(classes) if i not in set(subsets.y_train)]
    if absent:  # a logistic head cannot learn a class train never shows (R1.4)
        raise BackendError(
            f"classes {absent} have no item in the train split used ({len(subsets.y_train)} "
            "items); raise model.build.train_limit or use subset: stratified",
            rule="R1.4",
        )
    device = resolve_device(opts["device"])  # the fp32 encoder and an untrained head
    encoder = from_pretrained(AutoModel, source, torch.float32).to(device).eval()
    head = torch.nn.Linear(encoder.config.hidden_size, len(classes)).to(device)
    module = minilm_module(encoder, head)
    embed = (tokenizer, spec.context, opts["embed_batch"], device)
    x_train = _embed(module, subsets.train_texts, *embed)
    x_tune = _embed(module, subsets.tune_texts, *embed)
    scores, unconverged, tune_score, chosen = _fit_head(
        x_train, subsets.y_train, x_tune, subsets.y_tune, len(classes), opts, spec.seed
    )
    dim = module.encoder.config.hidden_size
    weight, bias = _head_rows(chosen, len(classes), dim)
    metadata = presets.preset_metadata(
        spec,
        "minilm",
        opts,
        architecture={"pooling": "mean", "normalize": True, "hidden_size": dim},
        encoder_revision=sha256_files([source / n for n in ENCODER_FILES], source),
        tokenizer_revision=tokenizer.revision,
        chosen={"C": float(chosen.C)},
        tune_macro_f1_by_c=scores,
        unconverged_c=unconverged,
        tune_macro_f1=tune_score,
        train_count=len(subsets.y_train),
        tune_count=len(subsets.y_tune),
    )
    with presets.staged_build(out_dir, source, metadata) as staged:
        for name in ENCODER_FILES:  # verbatim: the encoder's fingerprint stays the package's
            shutil.copyfile(source / name, staged / name)
        save_file({"weight": weight, "bias": bias}, str(staged / HEAD_FILE))
    return presets.built_report(out_dir, started, metadata)


def preset_source() -> tuple[Path, list[Path]]:
    """The MiniLM package's tokenizer and encoder, hashed as the source_revision (R1.1)."""
    source = presets.minilm_source_dir()
    return source, [*tokenizer_files(source), *(source / name for name in ENCODER_FILES)]


def _fit_head(
    x_train: Any,
    y_train: list[int],
    x_tune: Any,
    y_tune: list[int],
    n_classes: int,
    opts: Mapping[str, Any],
    seed: int,
) -> tuple[dict[str, float], list[float], float, Any]:
    """A logistic regression on train for each C of the grid: tune macro-F1 by C, the Cs that
    did not converge, and the best tune score with its fitted model."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    scores: dict[str, float] = {}
    unconverged: list[float] = []
    fits: list[tuple[float, Any]] = []
    for c in opts["c_grid"]:
        fitted = LogisticRegression(C=float(c), max_iter=int(opts["max_iter"]), random_state=seed)
        with warnings.catch_warnings(record=True) as caught:
            # an unconverged C is still scored on tune, and recorded in the metadata
            warnings.simplefilter("always", ConvergenceWarning)
            fitted.fit(x_train, y_train)
        if any(issubclass(w.category, ConvergenceWarning) for w in caught):
            unconverged.append(float(c))
        score = presets.macro_f1(y_tune, fitted.predict(x_tune).tolist(), n_classes)
        scores[repr(float(c))] = score
        fits.append((score, fitted))
    best, chosen = max(fits, key=lambda fit: fit[0])  # ties keep the first C of the grid
    return scores, unconverged, best, chosen


def _head_rows(fitted: Any, n_classes: int, dim: int) -> tuple[Any, Any]:
    """sklearn's fit as a [n_classes, dim] head in declared order (two classes: rows 0, w)."""
    import torch

    coef = torch.tensor(fitted.coef_, dtype=torch.float32)
    intercept = torch.tensor(fitted.intercept_, dtype=torch.float32)
    if coef.shape[0] == 1 and n_classes == 2:
        coef = torch.cat([torch.zeros(1, dim), coef])
        intercept = torch.cat([torch.zeros(1), intercept])
    order = [int(c) for c in fitted.classes_]
    weight = torch.zeros((n_classes, dim), dtype=torch.float32)
    bias = torch.zeros(n_classes, dtype=torch.float32)
    weight[order] = coef
    bias[order] = intercept
    return weight.contiguous(), bias.contiguous()


class MinilmBackend(TransformersBackend):
    """A built minilm folder on a device at a precision (encoder and head alike)."""

    name = "minilm"

    def __init__(self, spec: LoadSpec) -> None:
        import torch
        from safetensors.torch import load_file
        from transformers import AutoModel

        self._open_built_folder(spec)
        device, dtype = spec.device, torch_dtype(spec.precision)
        encoder = from_pretrained(AutoModel, self.model_path, dtype)
        state = load_file(str(self.model_path / HEAD_FILE))
        head = torch.nn.Linear(state["weight"].shape[1], state["weight"].shape[0])
        head.load_state_dict(state)
        self.module = minilm_module(encoder, head).to(device=device, dtype=dtype).eval()
        self._max_context = max_context(encoder.config, self.tokenizer)


BACKEND = MinilmBackend
build_preset = build_minilm

"""The ``bow`` preset: EmbeddingBag over MiniLM WordPiece IDs (shipped) + linear, from the seed."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpubench_nb.engine.backends.base import (
    Backend,
    Batch,
    LoadSpec,
    Tokenized,
    batch_order,
    built_files,
    torch_dtype,
)
from gpubench_nb.engine.backends.presets import (
    BuildReport,
    BuildSpec,
    build_subsets,
    built_report,
    macro_f1,
    preset_metadata,
    staged_build,
    wordpiece_dir,
)
from gpubench_nb.engine.backends.tokenization import TextTokenizer, tokenizer_files
from gpubench_nb.protocol.experiment import build_options

if TYPE_CHECKING:
    import torch

WEIGHTS_FILE = "model.safetensors"


def bow_module(
    vocab_size: int, dim: int, n_classes: int, *, sparse: bool = False
) -> torch.nn.Module:
    """Mean of token embeddings (bags + offsets, no padding) -> linear; ``sparse`` gradients
    while training."""
    import torch

    class BowClassifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = torch.nn.EmbeddingBag(vocab_size, dim, mode="mean", sparse=sparse)
            self.head = torch.nn.Linear(dim, n_classes)

        def forward(self, input_ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
            return self.head(self.embedding(input_ids, offsets))

    return BowClassifier()


def bags(rows: Sequence[Sequence[int]], device: torch.device | str = "cpu") -> dict:
    """Flat token IDs + start offsets of each text (EmbeddingBag's input form)."""
    import torch

    offsets = list(itertools.accumulate([0, *(len(row) for row in rows[:-1])]))
    flat = [token for row in rows for token in row]
    return {
        "input_ids": torch.tensor(flat, dtype=torch.long, device=device),
        "offsets": torch.tensor(offsets, dtype=torch.long, device=device),
    }


def model_files(folder: Path) -> list[Path]:
    """The files a bow model is loaded from, fingerprinted as its model_revision (R1.1)."""
    return built_files(folder, "bow", (WEIGHTS_FILE,))


@contextmanager
def _deterministic(seed: int) -> Iterator[None]:
    """A seeded, deterministic, one-thread region (bytes independent of the core count), the
    caller's RNG, determinism and threads restored after."""
    import torch

    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    threads = torch.get_num_threads()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        torch.use_deterministic_algorithms(True)
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(threads)
            torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


def _predict_all(module: torch.nn.Module, rows: list[list[int]], batch: int = 256) -> list[int]:
    import torch

    out: list[int] = []
    with torch.inference_mode():
        for start in range(0, len(rows), batch):
            out.extend(module(**bags(rows[start : start + batch])).argmax(-1).tolist())
    return out


def build_bow(spec: BuildSpec, out_dir: Path) -> BuildReport:
    """Train on train, choose the epoch count on tune macro-F1 (R1.4) and write ``out_dir``;
    deterministic on CPU: the same seed gives byte-identical files."""
    from safetensors.torch import save_file

    started = time.perf_counter()
    opts = build_options("bow", spec.options)
    tokenizer_dir = wordpiece_dir()
    tokenizer = TextTokenizer(tokenizer_dir, plain=True)  # no transformers for WordPiece
    subsets = build_subsets(spec, opts)
    x_train = tokenizer.tokenize(subsets.train_texts, spec.context).input_ids
    x_tune = tokenizer.tokenize(subsets.tune_texts, spec.context).input_ids
    shape = (tokenizer.vocab_size, opts["dim"], len(spec.classes))
    best_state, scores = _train(
        x_train, subsets.y_train, x_tune, subsets.y_tune, shape, opts, spec.seed
    )
    metadata = preset_metadata(
        spec,
        "bow",
        opts,
        architecture={"vocab_size": tokenizer.vocab_size, "dim": opts["dim"], "mode": "mean"},
        tokenizer_revision=tokenizer.revision,
        chosen={"epochs": scores.index(max(scores)) + 1},
        tune_macro_f1_by_epoch=scores,
        tune_macro_f1=max(scores),
        train_count=len(x_train),
        tune_count=len(x_tune),
    )
    with staged_build(out_dir, tokenizer_dir, metadata) as staged:
        weights = {k: v.contiguous() for k, v in best_state.items()}
        save_file(weights, str(staged / WEIGHTS_FILE))
    return built_report(out_dir, started, metadata)


def preset_source() -> tuple[Path, list[Path]]:
    """The shipped WordPiece files, hashed as the source_revision (R1.1)."""
    return wordpiece_dir(), tokenizer_files(wordpiece_dir())


def _train(
    x_train: list[list[int]],
    y_train: list[int],
    x_tune: list[list[int]],
    y_tune: list[int],
    shape: tuple[int, int, int],
    opts: Mapping[str, Any],
    seed: int,
) -> tuple[dict[str, torch.Tensor], list[float]]:
    """Up to ``max_epochs`` seeded epochs of a bow module of ``shape`` (vocabulary, dim,
    classes): the weights of the best tune macro-F1 epoch (R1.4), and every epoch's score."""
    import torch

    scores: list[float] = []
    with _deterministic(seed):
        module = bow_module(*shape, sparse=True)
        # SparseAdam: only the rows of the batch's tokens (a dense step dominated the build)
        optimisers = [
            torch.optim.SparseAdam(module.embedding.parameters(), lr=opts["learning_rate"]),
            torch.optim.Adam(module.head.parameters(), lr=opts["learning_rate"]),
        ]
        shuffler = torch.Generator().manual_seed(seed)
        labels = torch.tensor(y_train, dtype=torch.long)
        best_state: dict[str, torch.Tensor] = {}
        for _epoch in range(opts["max_epochs"]):
            order = torch.randperm(len(x_train), generator=shuffler)
            module.train()
            for chunk in order.split(opts["train_batch"]):  # one optimiser step each
                rows = [x_train[i] for i in chunk.tolist()]
                loss = torch.nn.functional.cross_entropy(module(**bags(rows)), labels[chunk])
                for optimiser in optimisers:
                    optimiser.zero_grad()
                loss.backward()
                for optimiser in optimisers:
                    optimiser.step()
            module.eval()
            scores.append(macro_f1(y_tune, _predict_all(module, x_tune), shape[2]))
            if scores[-1] > max(scores[:-1], default=-1.0):  # ties keep the earlier training
                best_state = {k: v.detach().clone() for k, v in module.state_dict().items()}
    return best_state, scores


class BowBackend(Backend):
    """A built bow folder, loaded on a device at a precision (the EmbeddingBag included)."""

    name = "bow"
    plain_tokenizer = True

    def __init__(self, spec: LoadSpec) -> None:
        from safetensors.torch import load_file

        meta = self._open_built_folder(spec)
        arch = meta.architecture or {}
        module = bow_module(arch["vocab_size"], arch["dim"], len(meta.classes))
        module.load_state_dict(load_file(str(self.model_path / WEIGHTS_FILE)))
        self.module = module.to(device=spec.device, dtype=torch_dtype(spec.precision)).eval()

    def batches(self, tokenized: Tokenized, batch: int, batching: str) -> list[Batch]:
        """Bags (flat IDs + offsets) on the device: no padding, so batch size adds no work."""
        ids = tokenized.input_ids
        return [
            Batch(indices=indices, tensors=bags([ids[i] for i in indices], self.device))
            for indices in batch_order([len(row) for row in ids], batch, batching)
        ]


BACKEND = BowBackend
build_preset = build_bow

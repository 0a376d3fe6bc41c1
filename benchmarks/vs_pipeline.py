"""End-to-end speed vs transformers.pipeline on the same hf folder, batch and texts (R3.1).

Both sides do the same chain inside the timer: read the corpus file, tokenise (truncating to
the same context), classify, write predictions.jsonl. Ours is ``measure_pass`` with scope
``end_to_end``; theirs is ``pipeline("text-classification")``. Interleaved (ABAB, BABA ...),
one unrecorded warm-up each, ``--repeats`` of each per batch size; prints the speed ratio
pipeline/ours (> 1 = ours faster) of the medians, and how often the two agree on the label.

Model: a BertForSequenceClassification folder with random weights built from MiniLM's config
(``--shape minilm``, the default on a GPU) or a 2-layer, 64-wide one (``--shape tiny``, the
default on CPU, where MiniLM is compute-bound and the Python overhead would not show).
Targets: >= 1.0 on CPU with ``tiny``; >= 1.5 on a GPU with ``minilm``.

    python benchmarks/vs_pipeline.py [--device cpu|cuda] [--batches 1,8,32] [--repeats 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from gpubench_nb.atomic import write_text_atomic  # noqa: E402
from gpubench_nb.engine.backends import load_backend  # noqa: E402
from gpubench_nb.engine.backends.shaped import random_hf_folder  # noqa: E402
from gpubench_nb.engine.measure import measure_pass, prediction_lines  # noqa: E402
from gpubench_nb.engine.timing import synchronizer  # noqa: E402
from gpubench_nb.protocol.corpus import load_experiment_corpus  # noqa: E402
from gpubench_nb.protocol.experiment import load_experiment  # noqa: E402
from gpubench_nb.protocol.experiment_spec import ModelSpec, TokenizerSpec  # noqa: E402
from scripts.gpu_check import minilm_source  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batches", default="1,8,32")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--shape", choices=("tiny", "minilm"), default=None)
    parser.add_argument("--limit", type=int, default=None, help="first N eval items only")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args(argv)
    import torch
    from transformers import pipeline
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    threads = args.threads or (1 if args.device == "cpu" else None)
    if threads:  # one thread on a shared CPU: less contention noise, same for both sides
        torch.set_num_threads(threads)
    shape = args.shape or ("tiny" if args.device == "cpu" else "minilm")
    exp = load_experiment(ROOT / "parameters" / "demo.yaml")
    corpus = load_experiment_corpus(exp, "eval")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if args.limit:
            lines = corpus.path.read_text(encoding="utf-8").splitlines()[: args.limit]
            small = tmp / "eval.jsonl"
            small.write_text("\n".join(lines) + "\n", encoding="utf-8")
            exp = dataclasses.replace(exp, corpus=dataclasses.replace(exp.corpus, path=small))
            corpus = load_experiment_corpus(exp, "eval")
        folder = random_hf_folder(tmp / "hf", exp.classes, minilm_source(), shape=shape)
        spec = ModelSpec(backend="hf", path=folder, build={})
        backend = load_backend(
            spec,
            TokenizerSpec(path=folder),
            classes=exp.classes,
            device=args.device,
            precision="fp32",
        )
        pipe = pipeline(
            "text-classification", model=str(folder), tokenizer=str(folder), device=backend.device
        )
        sync = synchronizer(backend.device)

        def reader():
            return load_experiment_corpus(exp, "eval")

        print(
            f"device={backend.device} shape={shape} items={len(corpus)} context={args.context} "
            f"torch={torch.__version__} threads={torch.get_num_threads()} repeats={args.repeats}"
        )
        for batch in [int(b) for b in args.batches.split(",")]:
            settings = dataclasses.replace(
                exp.variants[0].settings, batch=batch, context=args.context, device=args.device
            )
            ours_path, theirs_path = tmp / "ours.jsonl", tmp / "theirs.jsonl"

            def ours(settings=settings, path=ours_path) -> float:
                result = measure_pass(backend, corpus, settings, "end_to_end", path, reader=reader)
                if not result.ok:
                    raise SystemExit(f"measure_pass failed: {result.error}")
                return result.elapsed_seconds

            def theirs(batch=batch, path=theirs_path) -> float:
                sync()
                start = time.perf_counter_ns()
                current = reader()
                outputs = pipe(
                    list(current.texts),
                    batch_size=batch,
                    truncation=True,
                    max_length=args.context,
                )
                labels = [o["label"] for o in outputs]
                write_text_atomic(path, prediction_lines(current.ids, labels))
                sync()
                return (time.perf_counter_ns() - start) / 1e9

            ours(), theirs()  # one unrecorded warm-up of each
            times: dict[str, list[float]] = {"ours": [], "pipeline": []}
            for i in range(args.repeats):
                order = (("ours", ours), ("pipeline", theirs))
                for name, fn in order if i % 2 == 0 else order[::-1]:
                    times[name].append(fn())
            med = {k: statistics.median(v) for k, v in times.items()}
            a = ours_path.read_text(encoding="utf-8").splitlines()
            b = theirs_path.read_text(encoding="utf-8").splitlines()
            agree = sum(x == y for x, y in zip(a, b, strict=True)) / len(a)
            ratio = med["pipeline"] / med["ours"]
            print(
                f"batch={batch:>3} median ours={med['ours']:.3f} s  "
                f"pipeline={med['pipeline']:.3f} s  speed ratio pipeline/ours={ratio:.2f}  "
                f"same labels={agree:.1%}"
            )
            raw = {k: " ".join(f"{x:.3f}" for x in v) for k, v in times.items()}
            print(f"    raw s: ours [{raw['ours']}]  pipeline [{raw['pipeline']}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

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

``--case causal``: the ``causal_lm`` backend's ``loglik`` path (parameters/llm-prompted.yaml's
prompt and verbalisations) against the plain transformers loop a user would write: left-padded
``tokenizer(prompts)``, ``position_ids`` from the mask, ``model(...).logits[:, -1]`` restricted
to the verbalisations' token ids. Same model object, same batches in corpus order, same
end-to-end chain; predictions must be identical. The model is a random GPT-2 or Llama
(``--family``, ``--width``) with a word-level tokenizer over the corpus's words, built here.

    python benchmarks/vs_pipeline.py [--device cpu|cuda] [--batches 1,8,32] [--repeats 5]
    python benchmarks/vs_pipeline.py --case causal [--family gpt2|llama] [--width 256]
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from gpubench_nb.atomic import write_text_atomic  # noqa: E402
from gpubench_nb.engine.backends import load_backend  # noqa: E402
from gpubench_nb.engine.measure import measure_pass, prediction_lines  # noqa: E402
from gpubench_nb.engine.timing import synchronizer  # noqa: E402
from gpubench_nb.protocol.corpus import load_experiment_corpus  # noqa: E402
from gpubench_nb.protocol.experiment import load_experiment  # noqa: E402
from gpubench_nb.protocol.experiment_spec import ModelSpec, TokenizerSpec  # noqa: E402
from scripts.gpu_check import minilm_source  # noqa: E402
from scripts.shaped_models import random_hf_folder  # noqa: E402


def first_texts(exp: Any, corpus: Any, limit: int, tmp: Path) -> tuple[Any, Any]:
    """The experiment and its eval corpus cut to the first ``limit`` texts (a copy in ``tmp``)."""
    lines = corpus.path.read_text(encoding="utf-8").splitlines()[:limit]
    small = tmp / "eval.jsonl"
    small.write_text("\n".join(lines) + "\n", encoding="utf-8")
    exp = dataclasses.replace(exp, corpus=dataclasses.replace(exp.corpus, path=small))
    return exp, load_experiment_corpus(exp, "eval")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batches", default="1,8,32")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--shape", choices=("tiny", "minilm"), default=None)
    parser.add_argument("--limit", type=int, default=None, help="first N eval items only")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--case", choices=("encoder", "causal"), default="encoder")
    parser.add_argument("--family", choices=("gpt2", "llama"), default="llama")
    parser.add_argument("--width", type=int, default=128, help="causal: hidden size")
    args = parser.parse_args(argv)
    if args.case == "causal":
        return causal(args)
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
            exp, corpus = first_texts(exp, corpus, args.limit, tmp)
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


def _interleaved(ours, theirs, repeats: int) -> dict[str, list[float]]:
    """One unrecorded warm-up each, then ABAB / BABA ... (R3.4)."""
    ours(), theirs()
    times: dict[str, list[float]] = {"ours": [], "theirs": []}
    for i in range(repeats):
        order = (("ours", ours), ("theirs", theirs))
        for name, fn in order if i % 2 == 0 else order[::-1]:
            times[name].append(fn())
    return times


def causal(args: argparse.Namespace) -> int:
    """Our loglik path against the plain transformers loop, same model and batches."""
    import torch
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    from scripts.tiny_decoders import tiny_causal_lm

    hf_logging.set_verbosity_error()
    if args.threads or args.device == "cpu":
        torch.set_num_threads(args.threads or 1)
    exp = load_experiment(ROOT / "parameters" / "llm-prompted.yaml")
    prompt = exp.model.prompt
    corpus = load_experiment_corpus(exp, "eval")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if args.limit:
            exp, corpus = first_texts(exp, corpus, args.limit, tmp)
        seen = " ".join([*corpus.texts, prompt.template, *prompt.verbalisations]).lower()
        words = sorted(set(seen.split()))
        folder = tiny_causal_lm(
            tmp / "lm", args.family, positions=4096, width=args.width, words=words
        )
        spec = dataclasses.replace(exp.model, path=folder)
        backend = load_backend(
            spec, TokenizerSpec(path=folder), classes=exp.classes, device=args.device,
            precision="fp32",
        )  # fmt: skip
        model, device, sync = backend.module, backend.device, synchronizer(backend.device)
        tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        tok.padding_side = "left"
        label_ids = [tok(v, add_special_tokens=False).input_ids[-1] for v in prompt.verbalisations]
        context = args.context if args.context != 128 else 4000

        def reader():
            return load_experiment_corpus(exp, "eval")

        print(
            f"case=causal family={args.family} width={args.width} device={device} "
            f"items={len(corpus)} vocab={len(tok)} loglik fast path={backend.fast_path} "
            f"torch={torch.__version__} threads={torch.get_num_threads()} repeats={args.repeats}"
        )
        for batch in [int(b) for b in args.batches.split(",")]:
            settings = dataclasses.replace(
                exp.variants[0].settings, batch=batch, context=context, device=args.device,
                precision="fp32",
            )  # fmt: skip
            ours_path, theirs_path = tmp / "ours.jsonl", tmp / "theirs.jsonl"

            def ours(settings=settings, path=ours_path) -> float:
                result = measure_pass(backend, corpus, settings, "end_to_end", path, reader=reader)
                if not result.ok or result.truncated_texts:
                    raise SystemExit(f"measure_pass: {result.error or 'texts were truncated'}")
                return result.elapsed_seconds

            def theirs(batch=batch, path=theirs_path) -> float:
                sync()
                start = time.perf_counter_ns()
                current = reader()
                labels = []
                for i in range(0, len(current.texts), batch):
                    prompts = [
                        prompt.template.replace("{text}", t) for t in current.texts[i : i + batch]
                    ]
                    enc = tok(prompts, return_tensors="pt", padding=True).to(device)
                    positions = (enc["attention_mask"].cumsum(-1) - 1).clamp(min=0)
                    with torch.inference_mode():
                        logits = model(**enc, position_ids=positions).logits[:, -1, :]
                    picked = logits[:, label_ids].argmax(-1).tolist()
                    labels += [exp.classes[j] for j in picked]
                write_text_atomic(path, prediction_lines(current.ids, labels))
                sync()
                return (time.perf_counter_ns() - start) / 1e9

            times = _interleaved(ours, theirs, args.repeats)
            med = {k: statistics.median(v) for k, v in times.items()}
            a = ours_path.read_text(encoding="utf-8").splitlines()
            b = theirs_path.read_text(encoding="utf-8").splitlines()
            same = sum(x == y for x, y in zip(a, b, strict=True))
            print(
                f"batch={batch:>3} median ours={med['ours']:.3f} s  plain loop="
                f"{med['theirs']:.3f} s  speed ratio plain/ours={med['theirs'] / med['ours']:.2f}"
                f"  identical predictions={same}/{len(a)}"
            )
            raw = {k: " ".join(f"{x:.3f}" for x in v) for k, v in times.items()}
            print(f"    raw s: ours [{raw['ours']}]  plain loop [{raw['theirs']}]")
            if same != len(a):
                raise SystemExit("predictions differ between our loglik path and the plain loop")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

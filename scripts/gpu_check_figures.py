"""GPU checks of issue 23: every figure means what it says (run by scripts/gpu_check.py).

One ``VERDICT`` line per check, printed as soon as it is known:

- ``load/imports-outside-clock`` (§1): in every fresh cold-row process, no module was imported
  while the load clock ran, no pandas / scikit-learn / matplotlib / papermill was imported,
  and ``import_seconds`` is recorded apart from ``load_seconds``.
- ``load/page-cache-residency`` (§2): the weight files' residency at load start is observed
  (mincore) in every row; fingerprinting has just read them, so 100 % is expected.
- ``clocks/sampled-during-pass`` (§3): NVML sampled on the side thread during a busy pass:
  samples, min/median SM clock, reasons, energy per pass (J), flags; and
  ``clocks/sampler-outside-timed-path``: the same pass with and without the sampler, alternated,
  median ratio <= 1.02.
- ``cuda/module-loading-effective`` (§4): after CUDA init the effective CUDA_MODULE_LOADING is
  a value (LAZY / EAGER), not "unset", and says who set it.
- ``errors/async-located`` and ``errors/diagnosis-blocking`` (§5): a device-side assert
  launched at batch 2 of 5 is reported at the synchronisation (or launch) where it surfaced with
  the batches launched since the last synchronisation; rerun in a fresh process with
  CUDA_LAUNCH_BLOCKING=1, it is located at batch 2.
- ``memory/cublas-workspace`` (§6): in a fresh process, the first matrix product leaves the
  cuBLAS workspace allocated (the figure the cold note states: 32 MiB on Hopper).
- ``generation/folder-options-ignored`` (§7): a tiny GPT-2 on the GPU with a model folder whose
  generation_config.json sets ``cache_implementation: static``, ``min_new_tokens: 2`` and
  ``suppress_tokens`` answers exactly as without them (no torch.compile pass), and its model
  revision differs.

What only a GPU can prove, and what the CPU tests already prove (issue 23's closing note):

- §1: CPU tests prove the load clock imports nothing and the bow kernel imports no pandas /
  scikit-learn / scipy / sympy / matplotlib / papermill (sys.modules in a fresh process); the
  GPU check proves it for the CUDA build of torch and the hf / MiniLM-shaped rows, and gives
  the import vs load seconds on the server.
- §2: CPU tests prove residency is recorded (100 % after fingerprinting, "not observable"
  without mincore); the GPU server's filesystem (e.g. network storage) only shows on it.
- §3: CPU tests prove the sampler with a fake NVML (statistics, reasons, energy, flags, order
  around the timer) and the report's flags; only a GPU proves real NVML answers, the energy
  counter, and that the side thread does not slow the timed pass (the side-by-side ratio).
- §4: CPU tests prove the reading with a fake CUDA and a real C-level setenv; only a GPU proves
  the value torch really sets at CUDA initialisation.
- §5: CPU tests prove the location and the blocking diagnosis with the ``cudaerror`` fault
  (which imitates CUDA's asynchrony); only a GPU proves it with a real device-side assert.
- §6: the cuBLAS workspace size exists only on a GPU (CPU tests check the notes say it).
- §7: CPU tests prove revisions and answers with tiny GPT-2 / Llama; the GPU check adds
  ``cache_implementation: static`` (a torch.compile path on CUDA) to the folder.
- §8 is proven on the CPU (a bow run and the GPU tests' collection with the package hidden);
  the device run itself is the final proof on a bare server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("pandas", "sklearn", "matplotlib", "papermill", "nbformat")
CHILD_TAG = "GPU_FIGURES_CHILD "
Verdict = Callable[[str, str, str], None]


# --- §1, §2: judged from the cold rows' fresh processes ----------------------------------------


def judge_imports(rows: list[dict[str, Any]], verdict: Verdict) -> None:
    """§1 over every cold row: nothing imported inside the load clock, no heavy module."""
    bad, figures = [], []
    for row in rows:
        name = row.get("name", "?")
        if row.get("error") or row.get("import_seconds") is None:
            bad.append(f"{name}: not measured ({str(row.get('error'))[:80]})")
            continue
        if row.get("imported_during_load"):
            bad.append(f"{name}: imported during load {row['imported_during_load'][:5]}")
        if row.get("heavy_modules"):
            bad.append(f"{name}: imported {row['heavy_modules']}")
        figures.append(
            f"{name} import {row['import_seconds']:.2f} s / load {row['load_seconds']:.3f} s"
        )
    verdict(
        "load/imports-outside-clock",
        "FAIL" if bad or not figures else "PASS",
        "; ".join(bad) if bad else "; ".join(figures) or "no row measured",
    )


def judge_residency(rows: list[dict[str, Any]], verdict: Verdict) -> None:
    """§2 over every cold row: residency observed; the fractions are reported."""
    seen = [r for r in rows if isinstance(r.get("residency"), dict)]
    unobserved = [r.get("name") for r in seen if not r["residency"].get("observable")]
    fractions = [f"{r.get('name')} {r['residency'].get('resident_fraction')}" for r in seen]
    verdict(
        "load/page-cache-residency",
        "FAIL" if unobserved or not seen else "PASS",
        (f"not observable in {unobserved}; " if unobserved else "")
        + "resident fraction at load start: "
        + (", ".join(fractions) or "no row")
        + " (fingerprinting just read the files: 1.0 expected)",
    )


# --- §3, §4: in the main process ------------------------------------------------------------------


class _BusyBackend:
    """Each batch is a few large matrix products: enough work to load the GPU's clocks."""

    name = "busy"

    def __init__(self, torch: Any, device: Any) -> None:
        self.torch, self.device, self.classes = torch, device, ("a",)
        self.a = torch.randn(4096, 4096, device=device)

    def tokenize(self, texts: Any, context: int) -> Any:
        from gpubench_nb.engine.backends.base import Tokenized

        return Tokenized([[1] for _ in texts], 0, 0)

    def batches(self, tokenized: Any, batch: int, batching: str) -> list[Any]:
        from gpubench_nb.engine.backends.base import Batch, batch_order

        return [
            Batch(ix, {}) for ix in batch_order([1] * len(tokenized.input_ids), batch, batching)
        ]

    def predict(self, batch: Any) -> Any:
        x = self.a
        for _ in range(8):
            x = (x @ self.a).tanh_()
        return self.torch.zeros(len(batch.indices), dtype=self.torch.long, device=self.device)


def check_clocks(torch: Any, device: Any, corpus: Any, settings: Any, verdict: Verdict) -> None:
    """§3: the default sampler of a measured pass on the GPU records what the GPU ran at."""
    import dataclasses

    from gpubench_nb.engine.clocks import ClockSampler, telemetry_text
    from gpubench_nb.engine.measure import measure_pass

    backend = _BusyBackend(torch, device)
    small = dataclasses.replace(settings, batch=1)
    result = measure_pass(backend, corpus, small, "processing", None)
    record = result.gpu_telemetry
    print("GPU_TELEMETRY", json.dumps(record), flush=True)
    ok = (
        result.ok
        and isinstance(record, dict)
        and record.get("observable")
        and record.get("samples", 0) >= 3
        and isinstance(record.get("sm_clock_mhz"), dict)
    )
    verdict(
        "clocks/sampled-during-pass",
        "PASS" if ok else "FAIL",
        f"pass {result.elapsed_seconds} s; " + (telemetry_text(record) or f"error {result.error}"),
    )
    # The sampler runs beside the timed code, never in it: the same pass with and without it,
    # alternated, must take the same time (a ratio, measured side by side).
    import statistics

    times: dict[str, list[float]] = {"with": [], "without": []}
    for _ in range(3):
        for kind in ("without", "with"):
            sampler = None if kind == "with" else ClockSampler(None, None)
            run = measure_pass(backend, corpus, small, "processing", None, sampler=sampler)
            times[kind].append(run.elapsed_seconds or float("nan"))
    ratio = statistics.median(times["with"]) / statistics.median(times["without"])
    verdict(
        "clocks/sampler-outside-timed-path",
        "PASS" if ratio <= 1.02 else "FAIL",
        f"median pass with sampler / without = {ratio:.4f} (target <= 1.02); raw s with "
        f"{[round(t, 4) for t in times['with']]} without {[round(t, 4) for t in times['without']]}",
    )


def check_module_loading(verdict: Verdict) -> None:
    """§4: read after CUDA init (the caller has initialised CUDA)."""
    from gpubench_nb.engine.numerics import module_loading

    record = module_loading()
    ok = record["effective"] in ("LAZY", "EAGER")
    verdict(
        "cuda/module-loading-effective",
        "PASS" if ok else "FAIL",
        f"effective {record['effective']} ({record['source']}); at process start "
        f"{record['at_start'] or 'unset'} (os.environ); before issue 23 the record said "
        "'unset'",
    )


# --- §5, §6: small fresh processes (torch + gpubench_nb.engine only) ---------------------------


def _child(mode: str, *, env: dict[str, str] | None = None, timeout: int = 60) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), mode]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
        )
    except subprocess.TimeoutExpired:
        return {"error": f"child {mode} timed out after {timeout} s"}
    for line in done.stdout.splitlines():
        if line.startswith(CHILD_TAG):
            return json.loads(line[len(CHILD_TAG) :])
    return {"error": f"child {mode} exited {done.returncode}: {done.stderr.strip()[-400:]}"}


def _async_child() -> dict:
    """A pass of 5 batches whose batch 2 launches an out-of-bounds gather (device assert)."""
    import torch

    from gpubench_nb.engine.measure import measure_pass
    from gpubench_nb.protocol.corpus import CorpusItem, make_corpus

    device = torch.device("cuda")
    corpus = make_corpus(Path("async.jsonl"), [CorpusItem(f"i{n}", "x", "a") for n in range(5)])

    class Assert(_BusyBackend):
        calls = 0

        def predict(self, batch: Any) -> Any:
            Assert.calls += 1
            if Assert.calls == 2:
                table = torch.zeros(4, device=device)
                bad = torch.tensor([1 << 20], device=device)
                table.index_select(0, bad)  # device-side assert, reported asynchronously
            return super().predict(batch)

    class Settings:
        precision, context, batch, device, batching = "fp32", 8, 1, "cuda", "corpus_order"

    result = measure_pass(Assert(torch, device), corpus, Settings(), "processing", None)
    return {"error": result.error, "note": result.notes[0] if result.notes else None}


def _cublas_child() -> dict:
    """Allocated bytes left by the first matrix product of a fresh process (output freed)."""
    import torch

    device = torch.device("cuda")
    x = torch.ones(64, 64, device=device)
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    y = x @ x
    del y
    torch.cuda.synchronize(device)
    return {"workspace_bytes": torch.cuda.memory_allocated(device) - before}


def check_async_errors(verdict: Verdict) -> None:
    """§5: the truthful location, then the blocking diagnosis in a fresh process."""
    plain = _child("--child-async", env={"CUDA_LAUNCH_BLOCKING": "0"})
    note = str(plain.get("note"))
    ok = "CUDA error" in str(plain.get("error")) and "since the last synchronisation" in note
    verdict("errors/async-located", "PASS" if ok else "FAIL", note[:400])
    blocking = _child("--child-async", env={"CUDA_LAUNCH_BLOCKING": "1"})
    note = str(blocking.get("note"))
    ok = "batch 2 of 5 (a CUDA error; CUDA_LAUNCH_BLOCKING=1" in note
    verdict("errors/diagnosis-blocking", "PASS" if ok else "FAIL", note[:300])


def check_cublas_workspace(verdict: Verdict) -> None:
    """§6: what the cold note states; PASS when a workspace of 8-80 MiB stays allocated."""
    from gpubench_nb.pipeline.run import CUBLAS_NOTE

    out = _child("--child-cublas")
    size = out.get("workspace_bytes")
    ok = isinstance(size, int) and (8 << 20) <= size <= (80 << 20)
    verdict(
        "memory/cublas-workspace",
        "PASS" if ok else "FAIL",
        f"first matmul left {size} B ({(size or 0) / 2**20:.1f} MiB) allocated; cold note: "
        f"{CUBLAS_NOTE}"
        if not out.get("error")
        else out["error"],
    )


# --- §7: generation options from the folder are ignored ----------------------------------------


def check_generation(device: Any, tmp: Path, verdict: Verdict) -> None:
    from types import SimpleNamespace

    from gpubench_nb.engine.backends import fingerprints_for, load_backend
    from gpubench_nb.protocol.prompting import PromptSpec
    from scripts.tiny_decoders import sample_texts, tiny_causal_lm

    plain = tiny_causal_lm(tmp / "gen-plain", "gpt2")
    prompt = PromptSpec(
        template="text : {text} section :",
        chat_template=False,
        verbalisations=(" games", " net"),
        decision="generate",
        length_normalisation="none",
        max_new_tokens=3,
        stop=(),
        normalise=("strip",),
    )
    texts = sample_texts(24)

    def answers(folder: Path) -> tuple[list[str], float, str]:
        model = SimpleNamespace(backend="causal_lm", path=folder, build={}, prompt=prompt)
        tok = SimpleNamespace(path=folder)
        backend = load_backend(
            model, tok, classes=("games", "net"), device=str(device), precision="fp32"
        )
        started = time.perf_counter()
        out: list[str] = [""] * len(texts)
        for batch in backend.batches(backend.tokenize(texts, 64), 8, "corpus_order"):
            for position, text in zip(batch.indices, backend.generated_texts(batch), strict=True):
                out[position] = text
        return out, time.perf_counter() - started, fingerprints_for(model, tok)[0]

    before, plain_seconds, plain_revision = answers(plain)
    leaky = tmp / "gen-leaky"
    shutil.copytree(plain, leaky)
    config_path = leaky / "generation_config.json"
    config = json.loads(config_path.read_text())
    config.update(
        cache_implementation="static", min_new_tokens=2, suppress_tokens=list(range(4, 40))
    )
    config_path.write_text(json.dumps(config))
    after, leaky_seconds, leaky_revision = answers(leaky)
    changed = sum(a != b for a, b in zip(before, after, strict=True))
    ok = changed == 0 and plain_revision != leaky_revision
    verdict(
        "generation/folder-options-ignored",
        "PASS" if ok else "FAIL",
        f"{changed} of {len(texts)} answers changed by the folder's generation_config.json; "
        f"revision changed: {plain_revision != leaky_revision}; first pass {plain_seconds:.2f} s "
        f"plain vs {leaky_seconds:.2f} s with cache_implementation=static in the folder",
    )


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--child-async":
        print(CHILD_TAG + json.dumps(_async_child()), flush=True)
        return 0
    if argv and argv[0] == "--child-cublas":
        print(CHILD_TAG + json.dumps(_cublas_child()), flush=True)
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    raise SystemExit(main(sys.argv[1:]))

"""The GPU check's verdict rules (``JUDGES``) and the checks of the run's figures.

Every check compares what the project records with a measurement taken independently of it,
and every check can fail: ``PLANTED`` holds, for each, a good case and a planted fault, and
``python scripts/gpu_check.py --device cpu`` (the CPU smoke mode, tests/test_gpu_check_script.py)
runs each judge on both and prints ``PLANTED <name>: FAIL (<fault>)``. A judge takes the
measured data and returns ``(ok, detail)``; the caller prints ``VERDICT`` at once.

The independent measurements: CUDA events recorded on the stream (timers), a 1 GiB allocation
of known size (peak resets), nvidia-smi (the environment record; SM clock and power sampled by
a separate process during a pass, energy as its power x time), a shell started after CUDA
initialisation (the C-level CUDA_MODULE_LOADING it inherits), fincore(1) after evicting and
reading half a file (page-cache residency), a fresh ``python -c "import torch"`` measured beside
each cold row (import_seconds), the pass with the sampler against the same pass without it and
against a GIL-hogging sampler that must be caught (sampler cost), the batch the check itself
made fail (asynchronous errors), the bytes the first matrix product leaves allocated (the cold
note's cuBLAS workspace), and the answers without the folder's generation options.
"""

from __future__ import annotations

import json
import os
import re
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
Judged = tuple[bool, str]


def within(timer: float, events: float, *, rel: float = 0.05, abs_s: float = 0.002) -> bool:
    """The timer covers the GPU work (never shorter than the events, 50 us slack for the
    two clocks) and adds little to it."""
    return events - 50e-6 <= timer <= events * (1 + rel) + abs_s


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f} ms"


# --- the judges: measured data -> (ok, detail) --------------------------------------------------


def judge_stopwatch(d: dict) -> Judged:
    ok = within(d["timer"], d["events"])
    return ok, f"timer {_ms(d['timer'])}, CUDA events {_ms(d['events'])}"


def judge_negative_control(d: dict) -> Judged:
    """The comparison must catch a timer that skipped the synchronise."""
    caught = not within(d["timer"], d["events"]) and d["timer"] < 0.5 * d["events"]
    flag = "flags it" if caught else "does NOT flag it"
    return caught, f"no-sync timer {_ms(d['timer'])}, events {_ms(d['events'])}: comparison {flag}"


def judge_measure_pass(d: dict) -> Judged:
    ok = within(d["timer"], d["events"]) and d["timer"] >= 0.98 * d["truth"]
    return ok, f"timer {_ms(d['timer'])}, events {_ms(d['events'])}, known delay {_ms(d['truth'])}"


def judge_peak_reset(d: dict) -> Judged:
    ok = d["before"] >= d["gib"] and d["base"] + d["small"] <= d["peak"] < d["base"] + d["gib"] // 2
    return ok, (
        f"max before reset {d['before']} B (>= 1 GiB expected), baseline {d['base']} B, peak "
        f"after reset {d['peak']} B (must exclude the GiB, include the {d['small']} B)"
    )


def judge_environment(d: dict) -> Judged:
    """environment.json against nvidia-smi: name, driver, UUID; no empty field."""
    diff = [k for k in ("name", "driver", "uuid") if d["project"].get(k) != d["smi"].get(k)]
    ok = not diff and not d["empty"]
    return (
        ok,
        f"project {d['project']} vs nvidia-smi {d['smi']}; differ: {diff}; empty: {d['empty']}",
    )


_SOURCES = {
    "unset": "set by torch",
    "start": "set before the process started",
    "python": "set from Python",
}


def judge_module_loading(d: dict) -> Judged:
    """Per case (unset / set at start / set from Python): the project's effective value equals
    what a shell started after CUDA init inherits, and its label says where it came from."""
    bad = [
        f"{c['case']}: project {c['effective']} ({c['source']}) vs shell {c['shell']}"
        for c in d["cases"]
        if c["effective"] != c["shell"] or not str(c["source"]).startswith(_SOURCES[c["case"]])
    ]
    text = "; ".join(f"{c['case']}: {c['effective']} ({c['source']})" for c in d["cases"])
    return not bad and len(d["cases"]) == 3, "; ".join(bad) or text


def judge_clocks(d: dict) -> Judged:
    """The project's in-span SM clock median and energy against nvidia-smi's, sampled by a
    separate process during the same pass: within 10 % and 25 %."""
    p, s = d["project"], d["smi"]
    bad = []
    if not p.get("samples") or p["samples"] < 3:
        bad.append(f"{p.get('samples')} samples in the span")
    if (
        not s.get("sm_median")
        or abs(p.get("sm_median", 0) - s["sm_median"]) > 0.10 * s["sm_median"]
    ):
        bad.append(f"SM median {p.get('sm_median')} vs nvidia-smi {s.get('sm_median')} MHz")
    energy, truth = p.get("energy"), s.get("energy")
    if not isinstance(energy, (int, float)) or not truth or abs(energy - truth) > 0.25 * truth:
        bad.append(f"energy {energy} J vs nvidia-smi power x time {truth} J")
    return not bad, "; ".join(bad) or (
        f"SM median {p['sm_median']} vs {s['sm_median']} MHz, energy {energy:.2f} vs "
        f"{truth:.2f} J over {d['seconds']:.3f} s, {p['samples']} samples"
    )


def judge_sampler_cost(d: dict) -> Judged:
    """A launch-bound pass: with the sampler / without <= 1.03, and a GIL-hogging sampler
    (the control) must show > 1.03, or this comparison could not see a host-side cost."""
    ok = d["ratio"] <= 1.03 and d["control_ratio"] > 1.03
    return (
        ok,
        f"median ratio with sampler {d['ratio']:.4f}, GIL-hogging control {d['control_ratio']:.4f}",
    )


def _batch_range(note: str) -> tuple[int, int] | None:
    found = re.search(r"launched in batch(?:es)? (\d+)(?:-(\d+))?", note)
    return None if found is None else (int(found[1]), int(found[2] or found[1]))


def judge_async_located(d: dict) -> Judged:
    """The note's range of batches launched since the last synchronisation holds the batch
    that really failed."""
    span = _batch_range(str(d["note"]))
    ok = "CUDA error" in str(d["error"]) and span is not None and span[0] <= d["truth"] <= span[1]
    return ok, f"failing batch {d['truth']}, note's range {span}: {str(d['note'])[:240]}"


def judge_async_blocking(d: dict) -> Judged:
    found = re.match(r"R3\.6 \w+ during batch (\d+) of", str(d["note"]))
    ok = found is not None and int(found[1]) == d["truth"]
    return (
        ok,
        f"failing batch {d['truth']}, located at {found and found[1]}: {str(d['note'])[:200]}",
    )


def judge_cublas(d: dict) -> Judged:
    """The cold note's stated workspace (Hopper/Blackwell) against the bytes measured."""
    stated = int(re.search(r"(\d+) MiB", d["note"])[1]) << 20
    hopper = d["capability"] >= 9
    ok = d["measured"] == stated if hopper else 0 < d["measured"] <= stated
    return (
        ok,
        f"measured {d['measured']} B; the note states {stated} B on Hopper/Blackwell "
        f"(this GPU: sm {d['capability']})",
    )


def judge_generation(d: dict) -> Judged:
    ok = d["changed"] == 0 and d["revision_changed"]
    return (
        ok,
        f"{d['changed']} of {d['n']} answers changed; revision changed: {d['revision_changed']}",
    )


def judge_imports(d: dict) -> Judged:
    """One cold row: import_seconds (torch included) >= half a fresh `import torch` measured
    beside it, larger than the load, and nothing imported inside the load clock."""
    bad = []
    if d["import_seconds"] is None or d["import_seconds"] < 0.5 * d["fresh_torch_seconds"]:
        bad.append("import_seconds below half of a fresh import torch")
    if d["import_seconds"] is not None and d["import_seconds"] <= (d["load_seconds"] or 0):
        bad.append("import_seconds not larger than the load")
    if d["imported_during_load"]:
        bad.append(f"imported during load {d['imported_during_load'][:5]}")
    if d["heavy"]:
        bad.append(f"imported {d['heavy']}")
    return not bad, "; ".join([*bad, ""]) + (
        f"import_seconds {d['import_seconds']:.3f} s, fresh `import torch` "
        f"{d['fresh_torch_seconds']:.3f} s, load {d['load_seconds']:.3f} s"
    )


def judge_residency(d: dict) -> Judged:
    """The project's resident fraction against fincore(1) after eviction and after reading the
    first half, within 2 points; and >= 0.99 at every cold row's load start (fingerprinting has
    just read the files; another process may evict a few pages in between)."""
    pairs = [(p, f) for p, f in zip(d["project"], d["fincore"], strict=True)]
    bad = [f"project {p} vs fincore {f}" for p, f in pairs if f is None or abs(p - f) > 0.02]
    bad += [f"{name}: {frac} at load start" for name, frac in d["rows"] if not (frac or 0) >= 0.99]
    shown = f"evicted, half read: project {d['project']}, fincore {d['fincore']}; " * bool(pairs)
    return not bad, "; ".join(bad) or shown + f"at load start: {d['rows']}"


JUDGES: dict[str, Callable[[dict], Judged]] = {
    "timing/stopwatch": judge_stopwatch,
    "timing/negative-control": judge_negative_control,
    "timing/measure_pass": judge_measure_pass,
    "memory/peak-reset": judge_peak_reset,
    "environment": judge_environment,
    "cuda/module-loading": judge_module_loading,
    "clocks/sampled-during-pass": judge_clocks,
    "clocks/sampler-cost": judge_sampler_cost,
    "errors/async-located": judge_async_located,
    "errors/diagnosis-blocking": judge_async_blocking,
    "memory/cublas-workspace": judge_cublas,
    "generation/folder-options-ignored": judge_generation,
    "load/imports": judge_imports,
    "load/page-cache-residency": judge_residency,
}

_CASES = [
    {
        "case": "unset",
        "effective": "LAZY",
        "source": "set by torch when it initialised CUDA",
        "shell": "LAZY",
    },
    {
        "case": "start",
        "effective": "EAGER",
        "source": "set before the process started",
        "shell": "EAGER",
    },
    {
        "case": "python",
        "effective": "EAGER",
        "source": "set from Python (os.environ)",
        "shell": "EAGER",
    },
]
_CLOCKS = {
    "project": {"samples": 40, "sm_median": 1980, "energy": 410.0},
    "smi": {"sm_median": 1965, "energy": 400.0},
    "seconds": 0.8,
}
_IMPORTS = {
    "import_seconds": 8.3,
    "load_seconds": 0.15,
    "fresh_torch_seconds": 7.9,
    "imported_during_load": [],
    "heavy": [],
}
_NOTE = "after batch 5 of 5 (...; the failing kernel was launched in batches 1-5, since ...)"
# name -> (good data, planted fault described, faulty data)
PLANTED: dict[str, tuple[dict, str, dict]] = {
    "timing/stopwatch": (
        {"timer": 0.0503, "events": 0.05},
        "timer without a synchronise",
        {"timer": 0.00004, "events": 0.05},
    ),
    "timing/negative-control": (
        {"timer": 0.00004, "events": 0.05},
        "a comparison that cannot see a missing sync",
        {"timer": 0.0502, "events": 0.05},
    ),
    "timing/measure_pass": (
        {"timer": 0.401, "events": 0.4, "truth": 0.4},
        "a pass timer shorter than its known delay",
        {"timer": 0.2, "events": 0.2, "truth": 0.4},
    ),
    "memory/peak-reset": (
        {"before": 1 << 30, "base": 0, "peak": 16 << 20, "small": 16 << 20, "gib": 1 << 30},
        "a peak that kept the freed GiB",
        {
            "before": 1 << 30,
            "base": 0,
            "peak": (1 << 30) + (16 << 20),
            "small": 16 << 20,
            "gib": 1 << 30,
        },
    ),
    "environment": (
        {
            "project": {"name": "NVIDIA H200", "driver": "570.1", "uuid": "GPU-1"},
            "smi": {"name": "NVIDIA H200", "driver": "570.1", "uuid": "GPU-1"},
            "empty": [],
        },
        "a UUID copied from another GPU",
        {
            "project": {"name": "NVIDIA H200", "driver": "570.1", "uuid": "GPU-0"},
            "smi": {"name": "NVIDIA H200", "driver": "570.1", "uuid": "GPU-1"},
            "empty": [],
        },
    ),
    "cuda/module-loading": (
        {"cases": _CASES},
        "a value set from Python labelled 'set before the process started'",
        {"cases": [*_CASES[:2], dict(_CASES[2], source="set before the process started")]},
    ),
    "clocks/sampled-during-pass": (
        _CLOCKS,
        "idle samples from outside the span (median 345 MHz)",
        {**_CLOCKS, "project": {**_CLOCKS["project"], "sm_median": 345}},
    ),
    "clocks/sampler-cost": (
        {"ratio": 1.004, "control_ratio": 1.6},
        "a sampler that slows the pass by 20 %",
        {"ratio": 1.2, "control_ratio": 1.6},
    ),
    "errors/async-located": (
        {"error": "RuntimeError: CUDA error: device-side assert", "note": _NOTE, "truth": 2},
        "a note whose range misses the failing batch",
        {
            "error": "RuntimeError: CUDA error: x",
            "note": _NOTE.replace("batches 1-5", "batches 3-5"),
            "truth": 2,
        },
    ),
    "errors/diagnosis-blocking": (
        {"note": "R3.6 RuntimeError during batch 2 of 5 (a CUDA error; ...)", "truth": 2},
        "the blocking rerun located at batch 3",
        {"note": "R3.6 RuntimeError during batch 3 of 5 (a CUDA error; ...)", "truth": 2},
    ),
    "memory/cublas-workspace": (
        {"measured": 32 << 20, "note": "(32 MiB on Hopper/Blackwell)", "capability": 9},
        "a note stating 32 MiB where 8 MiB stays allocated",
        {"measured": 8 << 20, "note": "(32 MiB on Hopper/Blackwell)", "capability": 9},
    ),
    "generation/folder-options-ignored": (
        {"changed": 0, "revision_changed": True, "n": 24},
        "folder options that changed 3 answers",
        {"changed": 3, "revision_changed": True, "n": 24},
    ),
    "load/imports": (
        _IMPORTS,
        "torch imported before the import clock (9 ms recorded)",
        {**_IMPORTS, "import_seconds": 0.009},
    ),
    "load/page-cache-residency": (
        {"project": [0.0, 0.5], "fincore": [0.0, 0.5], "rows": [("bow", 1.0)]},
        "a fraction that ignores eviction",
        {"project": [1.0, 1.0], "fincore": [0.0, 0.5], "rows": [("bow", 1.0)]},
    ),
}


def smoke(verdict: Verdict) -> bool:
    """Each judge on its good case (must PASS) and its planted fault (must FAIL)."""
    shown = True
    for name, judge in JUDGES.items():
        good, fault, bad = PLANTED[name]
        good_ok, _ = judge(good)
        bad_ok, detail = judge(bad)
        print(
            f"PLANTED {name}: {'PASS' if bad_ok else 'FAIL'} ({fault}: {detail[:160]})", flush=True
        )
        shown &= good_ok and not bad_ok
        verdict(
            f"planted/{name}",
            "PASS" if good_ok and not bad_ok else "FAIL",
            f"good case {'PASS' if good_ok else 'FAIL'}, planted fault "
            f"{'FAIL' if not bad_ok else 'PASS'}",
        )
    return shown


def report(verdict: Verdict, name: str, data: dict, judge_name: str | None = None) -> None:
    """Judge ``data`` now and print the verdict (a failure to judge is a FAIL, with why)."""
    try:
        ok, detail = JUDGES[judge_name or name](data)
    except Exception as exc:
        ok, detail = False, f"cannot judge: {type(exc).__name__}: {exc}; data {str(data)[:200]}"
    verdict(name, "PASS" if ok else "FAIL", detail)


# --- the measurements ----------------------------------------------------------------------------


class _Backend:
    """Batches of 1 item; ``predict`` runs ``work`` (GPU-bound matmuls or host-bound launches)."""

    name, classes = "check", ("a",)

    def __init__(self, torch: Any, device: Any, work: str, loops: int) -> None:
        self.torch, self.device, self.work, self.loops = torch, device, work, loops
        size = 4096 if work == "matmul" else 1
        self.a = torch.randn(size, size, device=device) / size**0.5

    def tokenize(self, texts: Any, context: int) -> Any:
        from gpubench_nb.engine.backends.base import Tokenized

        return Tokenized([[1] for _ in texts], 0, 0)

    def batches(self, tokenized: Any, batch: int, batching: str) -> list[Any]:
        from gpubench_nb.engine.backends.base import Batch, batch_order

        order = batch_order([1] * len(tokenized.input_ids), batch, batching)
        return [Batch(ix, {}) for ix in order]

    def predict(self, batch: Any) -> Any:
        x = self.a
        for _ in range(self.loops):
            x = (x @ self.a).tanh_() if self.work == "matmul" else x + 1
        return self.torch.zeros(len(batch.indices), dtype=self.torch.long, device=self.device)


class FakeNvml:
    """Constant answers, so that a CPU run samples like a GPU one (the sampler's host cost)."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args: 1000


def _settings(settings: Any) -> Any:
    import dataclasses

    return dataclasses.replace(settings, batch=1)


def _smi(*args: str) -> list[list[str]]:
    done = subprocess.run(
        ["nvidia-smi", *args, "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=20,
    )
    return [[x.strip() for x in line.split(",")] for line in done.stdout.splitlines() if line]


def _uuid(torch: Any, device: Any) -> str:
    uuid = str(torch.cuda.get_device_properties(device).uuid)
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


def check_environment(torch: Any, device: Any, verdict: Verdict) -> None:
    from gpubench_nb.engine.environment import capture_environment

    env = capture_environment(used=[device])
    empty = [
        k
        for k in ("cuda_driver_runtime", "gpu_process_survey_start", "numerics", "gpu_details")
        if env.get(k) in (None, "", [])
    ]
    for row in env.get("gpu_details") or []:
        empty += [f"{row['device']}.{k}" for k, v in row.items() if v in (None, "")]
    project = {
        "name": env.get("gpu_model"),
        "driver": str(env.get("driver_version")).removeprefix("nvidia "),
        "uuid": (env.get("gpu_uuids") or [None])[0],
    }
    answer = _smi("-i", _uuid(torch, device), "--query-gpu=name,driver_version,uuid")
    smi = dict(zip(("name", "driver", "uuid"), answer[0] if answer else (), strict=False))
    report(verdict, "environment", {"project": project, "smi": smi, "empty": empty})


def check_clocks(torch: Any, device: Any, corpus: Any, settings: Any, verdict: Verdict) -> None:
    """A 2-3 s GPU-bound pass with nvidia-smi sampling SM clock and power beside it (its own
    process, 50 ms): the project's in-span median and energy against nvidia-smi's."""
    from datetime import datetime

    from gpubench_nb.engine.measure import measure_pass

    backend = _Backend(torch, device, "matmul", 24)
    fields = subprocess.run(
        ["nvidia-smi", "--help-query-gpu"], capture_output=True, text=True
    ).stdout
    power = "power.draw.instant" if "power.draw.instant" in fields else "power.draw"
    query = ["-i", _uuid(torch, device), f"--query-gpu=timestamp,clocks.sm,{power}", "-lms", "50"]
    smi = subprocess.Popen(
        ["nvidia-smi", *query, "--format=csv,noheader,nounits"], stdout=subprocess.PIPE, text=True
    )
    time.sleep(0.5)
    t0 = time.time()
    result = measure_pass(backend, corpus, _settings(settings), "processing", None)
    t1 = time.time()
    time.sleep(0.2)
    smi.terminate()
    rows = []
    for line in smi.communicate(timeout=10)[0].splitlines():
        stamp, sm, power = (x.strip() for x in line.split(","))
        if t0 <= datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp() <= t1:
            rows.append((float(sm), float(power)))
    record = result.gpu_telemetry or {}
    print("GPU_TELEMETRY", json.dumps(record), flush=True)
    sm = record.get("sm_clock_mhz")
    seconds = result.elapsed_seconds or 0.0
    project = {
        "samples": record.get("samples"),
        "sm_median": sm.get("median") if isinstance(sm, dict) else None,
        "energy": record.get("energy_joules"),
    }
    ordered = sorted(r[0] for r in rows)
    independent = {
        "sm_median": ordered[len(ordered) // 2] if rows else None,
        "energy": sum(r[1] for r in rows) / len(rows) * seconds if rows else None,
    }
    report(
        verdict,
        "clocks/sampled-during-pass",
        {"project": project, "smi": independent, "seconds": seconds},
    )


class _HogSampler:
    """The control: a 'sampler' whose thread spins in Python, taking the GIL from the pass."""

    observable, reason = True, None

    def start(self) -> None:
        import threading

        self.done = threading.Event()
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        while not self.done.is_set():
            sum(range(10_000))

    def stop(self, span: Any = None) -> None:
        self.done.set()
        self.thread.join()

    def summary(self) -> dict:
        return {"observable": False, "reason": "control", "flags": []}


def check_sampler_cost(
    torch: Any, device: Any, corpus: Any, settings: Any, verdict: Verdict
) -> None:
    """A launch-bound pass (tiny operations: the host is the bottleneck) with the project's
    sampler, without it, and with a GIL-hogging control, alternated 3 times; median ratios."""
    import statistics

    from gpubench_nb.engine.clocks import ClockSampler, sampler_for
    from gpubench_nb.engine.measure import measure_pass

    backend = _Backend(torch, device, "launch", 200)
    gpu = device.type == "cuda"
    make = {
        "without": lambda: ClockSampler(None, None),
        "with": (lambda: sampler_for(device)) if gpu else (lambda: ClockSampler(FakeNvml(), 0)),
        "control": _HogSampler,
    }
    times: dict[str, list[float]] = {k: [] for k in make}
    for _ in range(3):
        for kind, new in make.items():
            run = measure_pass(
                backend, corpus, _settings(settings), "processing", None, sampler=new()
            )
            times[kind].append(run.elapsed_seconds or float("nan"))
    base = statistics.median(times["without"])
    print("SAMPLER_COST", json.dumps(times), flush=True)
    report(
        verdict,
        "clocks/sampler-cost",
        {
            "ratio": statistics.median(times["with"]) / base,
            "control_ratio": statistics.median(times["control"]) / base,
        },
    )


def _fincore(path: Path) -> float | None:
    try:
        done = subprocess.run(
            ["fincore", "--bytes", "--noheadings", "--output", "RES,SIZE", str(path)],
            capture_output=True,
            text=True,
            timeout=20,
        )
        res, size = map(int, done.stdout.split())
        return round(res / size, 4)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def check_residency(folder: Path, rows: list[dict], verdict: Verdict) -> None:
    """Evict a 64 MiB file, then read its first half: the project's fraction against fincore's
    at both points; and the cold rows' fraction at load start."""
    from gpubench_nb.engine.residency import residency

    path = folder / "residency-check.bin"
    path.write_bytes(os.urandom(64 << 20))
    project, independent = [], []
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        for step in ("evicted", "half read"):
            if step == "half read":
                os.pread(fd, 32 << 20, 0)
            project.append(residency([path])["resident_fraction"])
            independent.append(_fincore(path))
    finally:
        os.close(fd)
        path.unlink()
    fractions = [(r["name"], (r.get("residency") or {}).get("resident_fraction")) for r in rows]
    report(
        verdict,
        "load/page-cache-residency",
        {"project": project, "fincore": independent, "rows": fractions},
    )


def fresh_torch_seconds() -> float:
    """`import torch` in a fresh process, timed inside it (the independent import figure)."""
    code = "import time; t = time.perf_counter(); import torch; print(time.perf_counter() - t)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return float(done.stdout.strip().splitlines()[-1])


# --- small fresh processes (torch + gpubench_nb.engine only) -------------------------------------


def _children(specs: list[tuple[str, dict[str, str]]], timeout: int = 90) -> list[dict]:
    """Fresh processes ``gpu_check_figures.py MODE [ARG]`` with their environments, started
    together (each pays torch's import and CUDA's start: ~10 s on a GPU server); their JSON."""
    procs = []
    for mode, env in specs:
        command = [sys.executable, str(Path(__file__).resolve()), *mode.split()]
        procs.append(
            subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
            )
        )
    out = []
    for (mode, _), proc in zip(specs, procs, strict=True):
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out.append({"error": f"child {mode} timed out after {timeout} s"})
            continue
        tagged = [line for line in stdout.splitlines() if line.startswith(CHILD_TAG)]
        out.append(
            json.loads(tagged[-1][len(CHILD_TAG) :])
            if tagged
            else {"error": f"child {mode} exited {proc.returncode}: {stderr.strip()[-400:]}"}
        )
    return out


def _loading_child(case: str) -> dict:
    """After CUDA init: the project's record, and what a shell started now inherits."""
    if case == "python":
        os.environ["CUDA_MODULE_LOADING"] = "EAGER"
    import torch

    from gpubench_nb.engine.numerics import module_loading

    torch.zeros(1, device="cuda")
    record = module_loading()
    shell = subprocess.run(
        ["sh", "-c", 'printf %s "${CUDA_MODULE_LOADING-unset}"'], capture_output=True, text=True
    ).stdout
    return {
        "case": case,
        "effective": record["effective"],
        "source": record["source"],
        "shell": shell,
    }


def _async_child() -> dict:
    """A pass of 5 batches whose batch 2 launches an out-of-bounds gather (device assert)."""
    import torch

    from gpubench_nb.engine.measure import measure_pass
    from gpubench_nb.protocol.corpus import CorpusItem, make_corpus

    device = torch.device("cuda")
    corpus = make_corpus(Path("async.jsonl"), [CorpusItem(f"i{n}", "x", "a") for n in range(5)])

    class Assert(_Backend):
        calls = 0

        def predict(self, batch: Any) -> Any:
            Assert.calls += 1
            if Assert.calls == 2:
                table = torch.zeros(4, device=device)
                table.index_select(0, torch.tensor([1 << 20], device=device))  # async assert
            return super().predict(batch)

    class Settings:
        precision, context, batch, device, batching = "fp32", 8, 1, "cuda", "corpus_order"

    result = measure_pass(
        Assert(torch, device, "matmul", 8), corpus, Settings(), "processing", None
    )
    return {"error": result.error, "note": result.notes[0] if result.notes else None, "truth": 2}


def _cublas_child() -> dict:
    """Allocated bytes left by the first matrix product of a fresh process (output freed)."""
    import torch

    from gpubench_nb.pipeline.run_record import CUBLAS_NOTE

    device = torch.device("cuda")
    x = torch.ones(64, 64, device=device)
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    y = x @ x
    del y
    torch.cuda.synchronize(device)
    return {
        "measured": torch.cuda.memory_allocated(device) - before,
        "note": CUBLAS_NOTE,
        "capability": torch.cuda.get_device_capability(device)[0],
    }


def check_children(verdict: Verdict) -> None:
    """Module loading (unset / set at start / set from Python), the asynchronous error without
    and with CUDA_LAUNCH_BLOCKING=1, and the cuBLAS workspace: six fresh processes at once."""
    base = {k: v for k, v in os.environ.items() if k != "CUDA_MODULE_LOADING"}
    specs = [
        ("--child-cublas", base),
        ("--child-async", {**base, "CUDA_LAUNCH_BLOCKING": "0"}),
        ("--child-async", {**base, "CUDA_LAUNCH_BLOCKING": "1"}),
        ("--child-loading unset", base),
        ("--child-loading start", {**base, "CUDA_MODULE_LOADING": "EAGER"}),
        ("--child-loading python", base),
    ]
    cublas, located, blocking, *cases = _children(specs)
    report(verdict, "memory/cublas-workspace", cublas)
    report(verdict, "errors/async-located", located)
    report(verdict, "errors/diagnosis-blocking", blocking)
    report(verdict, "cuda/module-loading", {"cases": cases})


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
    data = {
        "changed": changed,
        "revision_changed": plain_revision != leaky_revision,
        "n": len(texts),
    }
    print(
        f"GENERATION first pass {plain_seconds:.2f} s plain, {leaky_seconds:.2f} s with the options"
    )
    report(verdict, "generation/folder-options-ignored", data)


def main(argv: list[str]) -> int:
    children = {"--child-async": _async_child, "--child-cublas": _cublas_child}
    if argv and argv[0] == "--child-loading":
        out = _loading_child(argv[1])
    elif argv and argv[0] in children:
        out = children[argv[0]]()
    else:
        print(__doc__)
        return 2
    print(CHILD_TAG + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    raise SystemExit(main(sys.argv[1:]))

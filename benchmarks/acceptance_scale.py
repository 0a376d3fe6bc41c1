"""Acceptance at scale: the full check of 10^6 predictions vs a bare JSON-lines parse (R1.5).

Both are timed in one process, interleaved, on the same file; the ratio of their medians is
printed. Target: the full check (parse, type checks, ID set equality, duplicates, macro-F1)
costs at most 1.5 times the bare ``[json.loads(line) for line in f]``.

``--command`` times the whole `gpubench-nb accept` instead (issue 25): reading and checking
a corpus of ``--n`` items with texts of ``--text-bytes`` each, then the predictions, each
command in a fresh process, interleaved with a bare parse of the same two files in a fresh
process. Prints the time ratio (target <= 2) and each one's peak memory (ru_maxrss) against
the two files' size (target <= 2x).

    .venv/bin/python benchmarks/acceptance_scale.py [--n 1000000] [--repeats 5]
    .venv/bin/python benchmarks/acceptance_scale.py --command [--n 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpubench_nb.protocol.acceptance import check_predictions, summarise
from gpubench_nb.protocol.corpus import CorpusItem, make_corpus

CLASSES = ("admin", "games", "graphics", "mail", "math", "net", "science", "sound", "text", "web")
TARGET = 1.5
COMMAND_TARGET = 2.0  # issue 25: `accept` <= 2x a bare parse of corpus + predictions
MEMORY_TARGET = 2.0  # peak memory <= 2x the two files' size
ROOT = Path(__file__).resolve().parent.parent

# Each measured in a fresh interpreter: peak memory is the process's own (ru_maxrss, KiB).
_ACCEPT = """
import json, resource, sys, time
from gpubench_nb.cli import main
start = time.perf_counter()
code = main(["accept", sys.argv[1], sys.argv[2], "--checks", sys.argv[3]])
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"code": code, "seconds": seconds, "peak_bytes": peak}))
"""
_BARE = """
import json, resource, sys, time
start = time.perf_counter()
for name in sys.argv[1:]:
    with open(name, encoding="utf-8") as handle:
        parsed = [json.loads(line) for line in handle]
    del parsed
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"code": 0, "seconds": seconds, "peak_bytes": peak}))
"""


@dataclass(frozen=True)
class Quality:  # the fields of experiment.QualitySpec that acceptance reads
    metric: str = "macro_f1"
    threshold: float = 0.70
    tolerance: float = 0.01


def bare_parse(path: Path) -> int:
    with open(path, encoding="utf-8") as handle:
        return len([json.loads(line) for line in handle])


def _fresh(script: str, *argv: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", script, *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if out.returncode not in (0, 1):
        raise SystemExit(f"failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def command(n: int, repeats: int, text_bytes: int) -> int:
    """The whole `gpubench-nb accept` vs a bare parse of its two files, fresh processes."""
    rng = random.Random(20261202)
    words = [f"w{rng.randrange(10**6)}" for _ in range(5000)]
    pool = [" ".join(rng.choices(words, k=text_bytes // 8))[:text_bytes] for _ in range(997)]
    with tempfile.TemporaryDirectory(prefix="gpubench-accept-") as tmp:
        folder = Path(tmp)
        corpus = folder / "corpus.jsonl"
        predictions = folder / "predictions.jsonl"
        with open(corpus, "w", encoding="utf-8") as c, open(predictions, "w") as p:
            for i in range(n):
                item_id, label = f"deb:package-{i:07d}", CLASSES[i % len(CLASSES)]
                text = f"{i} {pool[i % len(pool)]}"
                c.write(json.dumps({"id": item_id, "text": text, "label": label}) + "\n")
                guess = label if rng.random() < 0.8 else rng.choice(CLASSES)
                p.write(json.dumps({"id": item_id, "label": guess}) + "\n")
        declaration = yaml.safe_load((ROOT / "parameters" / "demo.yaml").read_text())
        declaration["corpus"] = {"path": str(corpus), "format": "jsonl"}
        declaration.pop("pricing", None)
        experiment = folder / "scale.yaml"
        experiment.write_text(yaml.safe_dump(declaration), encoding="utf-8")
        size = corpus.stat().st_size + predictions.stat().st_size
        runs: dict[str, list[dict]] = {"accept": [], "bare": []}
        for i in range(repeats):
            for name in ("accept", "bare") if i % 2 == 0 else ("bare", "accept"):
                if name == "accept":
                    args = (str(experiment), str(predictions), str(folder / "checks.json"))
                    runs[name].append(_fresh(_ACCEPT, *args))
                else:
                    runs[name].append(_fresh(_BARE, str(corpus), str(predictions)))
    if any(r["code"] != 0 for r in runs["accept"]):
        raise SystemExit("the generated predictions must be accepted")
    seconds = {k: statistics.median(r["seconds"] for r in v) for k, v in runs.items()}
    peak = {k: max(r["peak_bytes"] for r in v) for k, v in runs.items()}
    ratio = seconds["accept"] / seconds["bare"]
    print(
        f"corpus {n:,} items + predictions: {size / 1e6:.0f} MB in all; {repeats} interleaved "
        f"pairs, fresh processes; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )
    for name, values in runs.items():
        times = " ".join(f"{r['seconds']:.2f}" for r in values)
        print(
            f"{name:<7} median {seconds[name]:.2f} s ({times}); peak memory "
            f"{peak[name] / 1e6:.0f} MB = {peak[name] / size:.2f}x the files"
        )
    print(
        f"accept / bare parse = {ratio:.2f} (target <= {COMMAND_TARGET}); accept peak memory "
        f"{peak['accept'] / size:.2f}x the files (target <= {MEMORY_TARGET})"
    )
    return 0 if ratio <= COMMAND_TARGET and peak["accept"] <= MEMORY_TARGET * size else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="predictions (default 10^6)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved pairs (default 5)")
    parser.add_argument("--command", action="store_true", help="the whole `accept` command")
    parser.add_argument("--text-bytes", type=int, default=500, help="text length (--command)")
    args = parser.parse_args(argv)
    if args.command:
        return command(args.n, args.repeats, args.text_bytes)

    rng = random.Random(20261202)
    items = [
        CorpusItem(f"deb:package-{i:07d}", "text not read by acceptance", rng.choice(CLASSES))
        for i in range(args.n)
    ]
    corpus = make_corpus(Path("in-memory"), items)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "predictions.jsonl"
        with open(path, "w", encoding="utf-8") as handle:
            for item in items:  # ~80 % right, the rest drawn at random
                label = item.label if rng.random() < 0.8 else rng.choice(CLASSES)
                handle.write(json.dumps({"id": item.id, "label": label}) + "\n")
        size = path.stat().st_size

        full: list[float] = []
        bare: list[float] = []
        report = None
        for _ in range(args.repeats):
            for name in ("full", "bare"):
                gc.collect()
                start = time.perf_counter()
                if name == "full":
                    report = check_predictions(corpus, path, CLASSES, Quality())
                    full.append(time.perf_counter() - start)
                else:
                    bare_parse(path)
                    bare.append(time.perf_counter() - start)

    assert report is not None and report.corpus_accepted, "the generated run must be accepted"
    ratio = statistics.median(full) / statistics.median(bare)
    print(f"predictions: {args.n:,} lines, {size / 1e6:.1f} MB; {args.repeats} interleaved pairs")
    print(f"check:  {summarise(report)}")
    print("full acceptance s: " + " ".join(f"{t:.3f}" for t in full))
    print("bare json parse s: " + " ".join(f"{t:.3f}" for t in bare))
    print(
        f"median full {statistics.median(full):.3f} s / median bare "
        f"{statistics.median(bare):.3f} s = ratio {ratio:.2f} (target <= {TARGET})"
    )
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())

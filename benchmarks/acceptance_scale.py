"""Acceptance at scale: the full check of 10^6 predictions vs a bare JSON-lines parse (R1.5).

Both are timed in one process, interleaved, on the same file; the ratio of their medians is
printed. Target: the full check (parse, type checks, ID set equality, duplicates, macro-F1)
costs at most 1.5 times the bare ``[json.loads(line) for line in f]``.

    .venv/bin/python benchmarks/acceptance_scale.py [--n 1000000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from gpubench_nb.protocol.acceptance import check_predictions, summarise
from gpubench_nb.protocol.corpus import CorpusItem, make_corpus

CLASSES = ("admin", "games", "graphics", "mail", "math", "net", "science", "sound", "text", "web")
TARGET = 1.5


@dataclass(frozen=True)
class Quality:  # the fields of experiment.QualitySpec that acceptance reads
    metric: str = "macro_f1"
    threshold: float = 0.70
    tolerance: float = 0.01


def bare_parse(path: Path) -> int:
    with open(path, encoding="utf-8") as handle:
        return len([json.loads(line) for line in handle])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="predictions (default 10^6)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved pairs (default 5)")
    args = parser.parse_args(argv)

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

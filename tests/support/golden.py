"""Hand-made bundles with worked-by-hand values, shared by the report tests (R2.1, R5.8).

:func:`write_bundle` writes a golden bundle (lock, environment, economics, run.json + checks.json,
the CSV) whose medians and ranges the report tests check by hand; :data:`LEDGER` is a ledger as
`gpubench-nb ledger --out` writes it.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from gpubench_nb.protocol.results import COLUMNS

MIB = 2**20
EXPECTED = 1000
# The golden GPU bundle's elapsed seconds, runs 1..5; None = the failed (OOM) run (R5.8).
ELAPSED = {
    ("b1", "load"): [0.40, 0.42, 0.41, 0.45, 0.43],  # median 0.42, range 0.40-0.45
    ("b1", "cold"): [2.00, 1.00, 1.10, 0.90, 1.05],  # median 1.05, range 0.90-2.00
    ("b1", "warm"): [0.80, 0.82, 0.81, 0.79, 0.83],  # median 0.81, range 0.79-0.83
    ("b4", "load"): [0.40, 0.41, 0.42, 0.43, 0.44],
    ("b4", "cold"): [0.60, 0.58, 0.62, 0.61, 0.59],  # median 0.60
    ("b4", "warm"): [0.50, 0.52, 0.48, 0.51, 0.49],  # median 0.50, range 0.48-0.52
    ("b8", "load"): [0.40, 0.41, 0.42, 0.43, 0.44],
    ("b8", "cold"): [0.35, 0.34, 0.36, 0.33, 0.37],  # median 0.35
    ("b8", "warm"): [0.30, 0.45, 0.28, 0.31, None],  # 4 timed: median 0.305, range 0.28-0.45
}
QUALITY = {"b1": 0.78, "b4": 0.78, "b8": 0.66}  # threshold 0.70: b8 is fast but not accepted
OOM = "CUDA out of memory. Tried to allocate 2.00 GiB"
FINGERPRINTS = {
    "corpus_revision": "c" * 64,
    "model_revision": "m" * 64,
    "tokenizer_revision": "t" * 64,
}


def _peak_allocated(variant: str, run_index: int) -> int:
    # b4: 100, 110, 120, 130, 140 MiB -> median 120 MiB, range 100-140 MiB; b8: 200 MiB up.
    return ({"b1": 50, "b4": 100, "b8": 200}[variant] + 10 * (run_index - 1)) * MIB


def _machine(*, heavy: bool) -> dict:
    """What a run.json records of the machine around the run (engine/environment.py)."""
    load = 3.1 if heavy else 0.2
    busy = [{"pid": 4242, "name": "python3", "cpu_share": 0.97}] if heavy else []
    activity = {"load_average_1min": load, "cpu_count": 2, "busy_processes": busy}
    return {
        "load_average_start": [load, load, load],
        "load_average_end": [load, load, load],
        "cpu_activity_start": activity,
        "cpu_activity_end": activity,
    }


def write_bundle(root: Path, name: str, *, gpu: bool, scale: float = 1.0, **lock_changes) -> Path:
    """A golden bundle: lock, environment, economics, runs/*/run.json + checks.json, the CSV."""
    bundle = root / name
    prints = {**FINGERPRINTS, **{k: v for k, v in lock_changes.items() if k != "scope"}}
    declaration = {
        "experiment_id": "demo-bow-batch",
        "seed": 20261202,
        "knob": "batch",
        "variants": [{"id": v, "batch": int(v[1:])} for v in ("b1", "b4", "b8")],
        "quality": {
            "metric": "macro_f1",
            "threshold": 0.70,
            "tolerance": 0.01,
            "reference_variant": "b1",
        },
        "timing": {
            "scope": lock_changes.get("scope", "processing"),
            "warmup_iterations": 2,
            "repeats": 5,
            "order": "drawn",
            "order_seed": 7,
        },
    }
    lock = {"experiment_id": "demo-bow-batch", "declaration": declaration, "fingerprints": prints}
    env = {
        "gpu_model": "NVIDIA H100 80GB HBM3" if gpu else None,
        "gpu_count": 1 if gpu else 0,
        "visible_gpu_count": 2 if gpu else 0,
        "device": "cuda:0" if gpu else "cpu",
        "driver_version": "550.54.15" if gpu else None,
        "runtime_version": "12.4" if gpu else None,
        "python_version": "3.11.2",
        "torch_version": "2.13.0",
        "code_revision": "abc1234",
        "cpu_model": "Golden CPU",
    }
    rows = []
    for (variant, phase), values in ELAPSED.items():
        for run_index, seconds in enumerate(values, start=1):
            if seconds is None and not gpu:
                seconds = 0.29  # an OOM is a GPU event: the CPU bundle timed its fifth run
            seconds = None if seconds is None else round(seconds * scale, 6)
            failed = seconds is None
            row = dict.fromkeys(COLUMNS, "")
            row.update(
                experiment_id="demo-bow-batch",
                variant_id=variant,
                seed="20261202",
                gpu_count=str(env["gpu_count"]),
                device=env["device"],
                python_version="3.11.2",
                torch_version="2.13.0",
                precision="fp32",
                batch=variant[1:],
                context="128",
                phase=phase,
                run_index=str(run_index),
                warmup_iterations="2",
                elapsed_seconds="" if failed else repr(seconds),
                notes=f"OOM: {OOM}, row kept (R5.8)" if failed else "scope: processing",
                **{k: v for k, v in prints.items()},
            )
            if gpu:
                row.update(gpu_model=env["gpu_model"], driver_version="550.54.15")
                row.update(runtime_version="12.4")
                if not failed:
                    peak = _peak_allocated(variant, run_index)
                    row.update(
                        baseline_allocated_bytes=str(10 * MIB),
                        baseline_reserved_bytes=str(20 * MIB),
                        peak_allocated_bytes=str(peak),
                        peak_reserved_bytes=str(peak + 64 * MIB),
                    )
            checks = None
            if phase != "load":
                accepted = not failed and QUALITY[variant] >= 0.70
                row.update(
                    expected_ids=str(EXPECTED),
                    observed_ids="0" if failed else str(EXPECTED),
                    ids_match="false" if failed else "true",
                    format_valid="false" if failed else "true",
                    quality_metric="macro_f1",
                    quality_threshold="0.7",
                    quality_tolerance="0.01",
                    quality_value="" if failed else str(QUALITY[variant]),
                    corpus_accepted="true" if accepted else "false",
                )
                if not failed:
                    checks = {  # a whole checks.json record (protocol.acceptance, R1.6)
                        "expected_count": EXPECTED,
                        "observed_count": EXPECTED,
                        **dict.fromkeys(("missing_ids", "extra_ids", "malformed_lines"), []),
                        "duplicated_ids": {},
                        "ids_match": True,
                        "format_valid": True,
                        "metric": "macro_f1",
                        "quality_value": QUALITY[variant],
                        "threshold": 0.70,
                        "tolerance": 0.01,
                        "bom": False,
                        "corpus_revision": prints["corpus_revision"],
                        "predictions_file": "predictions.jsonl",
                        "reference_value": 0.78,
                        "meets_threshold": QUALITY[variant] >= 0.70,
                        "within_tolerance": 0.78 - QUALITY[variant] <= 0.01,
                        "corpus_accepted": accepted,
                    }
            run_dir = bundle / "runs" / variant / f"{phase}-{run_index}"
            run_dir.mkdir(parents=True)
            run = {"elapsed_seconds": seconds, "error": OOM if failed else None, "notes": ""}
            run["out_of_memory"] = failed  # what the producers record (R5.8)
            run["environment"] = _machine(heavy=not gpu and variant == "b1")  # R2.5
            run.update(truncated_texts=3, dropped_tokens=41)
            (run_dir / "run.json").write_text(json.dumps(run), encoding="utf-8")
            if checks is not None:
                (run_dir / "checks.json").write_text(json.dumps(checks), encoding="utf-8")
            rows.append(row)
    rows.reverse()  # as drawn (R3.4): the report orders by the declaration, not the file
    with (bundle / "resultats-bruts.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    (bundle / "protocol.lock.json").write_text(json.dumps(lock), encoding="utf-8")
    (bundle / "environment.json").write_text(json.dumps(env), encoding="utf-8")
    status = {"b1": True, "b4": True, "b8": False}
    econ = {
        "unit_of_work": "one complete, accepted corpus",
        "note": "Package totals are whole packages x billed lots.",
        "variants": [
            {"variant_id": v, "accepted": ok, "reason": None if ok else "quality below 0.7"}
            for v, ok in status.items()
        ],
        "offers": [
            {
                "offer_id": offer_id,
                "gpu_model": offer_gpu,
                "gpus_per_lot": per_lot,
                "days": 7,
                "lots": 1,
                "package_total_usd_minor": total,
                "declared": offer_id == "h100-example",
                "variants": [
                    {"variant_id": v, "cost_per_accepted_usd_minor": total if ok else None}
                    for v, ok in status.items()
                ],
            }
            for offer_id, offer_gpu, per_lot, total in (
                ("h100-example", "NVIDIA H100 80GB", 1, 123456),
                ("b200-pair", "NVIDIA B200", 2, 250005),
            )
        ],
        # By hand: b200 needs n with 250005 / n < 123456 / 1, so n = 3 (250005 / 2 > 123456);
        # h100 already beats b200 at n = 1 (123456 < 250005).
        "break_even": {
            "label": "threshold, not a forecast",
            "reference_accepted_results": 1,
            "reason": None,
            "pairs": [
                {
                    "challenger": "b200-pair",
                    "reference": "h100-example",
                    "accepted_corpora_needed": 3,
                    "statement": "b200 needs 3",
                },
                {
                    "challenger": "h100-example",
                    "reference": "b200-pair",
                    "accepted_corpora_needed": 1,
                    "statement": "h100 needs 1",
                },
            ],
        },
    }
    (bundle / "economics.json").write_text(json.dumps(econ), encoding="utf-8")
    return bundle


# A ledger as `gpubench-nb ledger --out` writes it (economics.ledger.build_ledger).
LEDGER = {
    "offer_id": "h100-example",
    "gpu_model": "NVIDIA H100 80GB",
    "gpus_per_lot": 1,
    "days": 7,
    "lots": 1,
    "window": {
        "start_utc": "2026-12-01T00:00:00Z",
        "end_utc": "2026-12-08T00:00:00Z",
        "status": "so far",
        "as_of_utc": "2026-12-03T12:00:00Z",
    },
    "machine": {"hostname": "rented-node", "gpu_uuids": ["GPU-1"], "source": "--machine"},
    "package_total_usd_minor": 123456,
    "accepted_corpora": 2,
    "cost_per_accepted_usd_minor": 61728,
    "accepted_corpus_revisions": [
        {"corpus_revision": "c" * 64, "bundles": ["outputs/a", "outputs/b"]},
        {"corpus_revision": "d" * 64, "bundles": ["outputs/d"]},
    ],
    # A ledger as written before corpus identities (issue 22 §4): still readable, and checked
    # for consistency: its count, cost and statement agree with what it lists (§3).
    "kept": [
        {"bundle": b, "corpus_revision": r * 64, "accepted": True}
        for b, r in (("outputs/a", "c"), ("outputs/b", "c"), ("outputs/d", "d"))
    ],
    "left_out": [{"bundle": "outputs/x", "reason": "another machine: host 'other'"}],
    "statement": "h100-example, 7 days × 1 lot(s): USD 1,234.56; 2 distinct accepted corpora "
    "so far (the package window is still running), so USD 617.28 per accepted corpus (the same "
    "arithmetic as calcul-forfaits --accepted-results, R5.3).",
}

"""Hand-made finished bundles for the rental ledger tests (R5.3, R5.5, R5.6).

:func:`make_bundle` writes a lock, environment, run.json times, one row per cold/warm run and
(``sealed``) the manifest; the offer, window and GPU UUIDs are the ledger tests' worked example.
"""

from __future__ import annotations

import csv
import json
from datetime import datetime, timezone
from pathlib import Path

from gpubench_nb.economics.offers import Offer
from gpubench_nb.protocol.bundle import write_manifest
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.lock import build_lock
from gpubench_nb.protocol.results import COLUMNS

DEMO = Path(__file__).resolve().parents[2] / "parameters" / "demo.yaml"


def make_offer(
    offer_id: str, gpu_model: str, gpus_per_lot: int, prices: tuple[int, int, int]
) -> Offer:
    """A test offer: its 3-, 7- and 30-day package prices in cents (R5.1)."""
    return Offer(
        id=offer_id,
        provider="test",
        gpu_model=gpu_model,
        gpus_per_lot=gpus_per_lot,
        package_price_usd_minor=dict(zip((3, 7, 30), prices, strict=True)),
    )


H100 = make_offer("h100-test", "NVIDIA H100 80GB", 1, (30000, 65000, 250000))
OFFERS_YAML = """\
offers:
  - id: h100-test
    provider: test fixture
    gpu_model: NVIDIA H100 80GB
    gpus_per_lot: 1
    package_price_usd_minor: {3: 30000, 7: 65000, 30: 250000}
"""
RENTED = ["GPU-11111111-0000-0000-0000-000000000000", "GPU-22222222-0000-0000-0000-000000000000"]
FOREIGN = "GPU-99999999-0000-0000-0000-000000000000"
START = datetime(2026, 12, 1, tzinfo=timezone.utc)  # a 7-day window: [Dec 1, Dec 8)
AFTER = datetime(2026, 12, 20, tzinfo=timezone.utc)


def make_bundle(
    root: Path,
    name: str,
    *,
    corpus: str,
    date: str,
    accepted: bool = True,
    repeats: int = 5,
    used: str = RENTED[0],
    host: str = "rented-node",
    gpu: bool = True,
    sealed: bool = True,
) -> Path:
    """A finished bundle: lock, environment, run.json times, one row per cold/warm run, and
    (``sealed``) its manifest."""
    bundle = root / name
    (bundle / "runs").mkdir(parents=True)
    prints = {"corpus_revision": corpus * 64, "model_revision": "m" * 64}
    lock = build_lock(load_experiment(DEMO), prints, corpus_identity=corpus * 64)
    (bundle / "protocol.lock.json").write_text(json.dumps(lock), encoding="utf-8")
    env = {
        "captured_utc": f"{date}T10:00:00Z",
        "hostname": host,
        "gpu_model": "NVIDIA H100 80GB HBM3" if gpu else None,
        "gpu_count": 1 if gpu else 0,
        "gpu_uuids": [used] if gpu else [],
        "visible_gpu_uuids": RENTED if gpu and used in RENTED else [used] if gpu else [],
    }
    (bundle / "environment.json").write_text(json.dumps(env), encoding="utf-8")
    rows = []
    for phase in ("cold", "warm"):
        for index in range(1, repeats + 1):
            row = dict.fromkeys(COLUMNS, "")
            row.update(
                experiment_id=name, variant_id="b4", corpus_revision=corpus * 64,
                gpu_model=env["gpu_model"] or "", gpu_count=str(env["gpu_count"]),
                phase=phase, run_index=str(index), elapsed_seconds="0.5", expected_ids="100",
                observed_ids="100", ids_match="true", format_valid="true",
                quality_metric="macro_f1", quality_threshold="0.7", quality_tolerance="0.01",
                quality_value="0.8" if accepted else "0.5",
                corpus_accepted="true" if accepted else "false",
            )  # fmt: skip
            rows.append(row)
            folder = bundle / "runs" / "b4" / f"{phase}-{index}"
            folder.mkdir(parents=True)
            times = {
                "started_utc": f"{date}T10:0{index}:00Z",
                "finished_utc": f"{date}T10:0{index}:30Z",
            }
            (folder / "run.json").write_text(json.dumps(times), encoding="utf-8")
    with (bundle / "resultats-bruts.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    if sealed:
        write_manifest(bundle)
    return bundle


def written_ledger(tmp_path: Path) -> Path:
    """`gpubench-nb ledger` over one hand-made bundle (corpus "a") on the h100 offer, 7 days."""
    from gpubench_nb.cli import main

    bundle = make_bundle(tmp_path, "a", corpus="a", date="2026-12-02")
    offers = tmp_path / "offers.yaml"
    offers.write_text(OFFERS_YAML, encoding="utf-8")
    out = tmp_path / "ledger.json"
    argv = ["ledger", "--offers", str(offers), "--offer", "h100", "--days", "7", "--lots", "1",
            "--start", "2026-12-01", "--out", str(out), str(bundle)]  # fmt: skip
    assert main(argv) == 0
    return out

"""One rule per fact (issue 21): summary, decision table, economics.json and ledger agree.

Golden bundles, made by hand: a variant accepted on every run, one with a run refused, one whose
acceptance is not recorded yet (empty corpus_accepted cells, R4.3), and a bundle measured on
another GPU than an offer's. Each fact is read from every screen that shows it and compared:
"is this variant accepted" (R1.5, R5.7), "which offer earned the cost" (R5.3, R5.7) and "cost
per accepted corpus" (package total / accepted distinct corpora, R5.3, R5.5).

Before issue 21 the run summary decided acceptance with its own rule (`all(corpus_accepted)`),
so a variant whose acceptance was not recorded was printed "NOT accepted" while economics, the
decision table and the report said "acceptance not recorded":
``test_unrecorded_acceptance_reads_the_same_everywhere`` fails on that code.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest

from gpubench_nb import cli
from gpubench_nb.economics.ledger import build_ledger
from gpubench_nb.economics.offers import cost_per_accepted_usd_minor, load_offers
from gpubench_nb.pipeline import orchestrate
from gpubench_nb.protocol.bundle import write_manifest
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.lock import build_lock
from gpubench_nb.protocol.results import COLUMNS, read_rows
from gpubench_nb.report.bundles import load_bundles, summary_of
from gpubench_nb.report.decision import decision_view_of
from gpubench_nb.report.economics import economics_table
from tests.support.economics import write_bundle_economics

OFFERS_YAML = """\
offers:
  - id: h100-test
    provider: test fixture
    gpu_model: NVIDIA H100 80GB
    gpus_per_lot: 1
    package_price_usd_minor: {3: 30000, 7: 65000, 30: 250000}
  - id: h200-test
    provider: test fixture
    gpu_model: NVIDIA H200
    gpus_per_lot: 1
    package_price_usd_minor: {3: 40000, 7: 90000, 30: 300000}
"""
DEMO = Path(__file__).resolve().parents[1] / "parameters" / "demo.yaml"
GPU = "NVIDIA H100 80GB HBM3"
UUID = "GPU-11111111-0000-0000-0000-000000000000"
START = datetime(2026, 12, 1, tzinfo=timezone.utc)
AFTER = datetime(2026, 12, 20, tzinfo=timezone.utc)
# per variant: corpus_accepted of cold-1, cold-2, warm-1, warm-2 (None = not recorded, R4.3)
ACCEPTED = {"b1": [True, True, True, True], "b4": [True, False, True, True]}
UNRECORDED = {"b1": [True, True, True, True], "b8": [True, None, True, None]}


@dataclass(frozen=True)
class Pricing:
    offers: Path
    offer: str
    days: int
    lots: int | None = 1
    gpus: int | None = None


def make_bundle(root: Path, name: str, verdicts: dict[str, list[bool | None]]) -> Path:
    """A finished bundle of one corpus on one H100: lock, environment, run.json, the CSV."""
    bundle = root / name
    (bundle / "runs").mkdir(parents=True)
    # a sealed lock (sha256 and lock_sha256 over its fields): the ledger counts only bundles
    # whose seal verifies (issue 22 §3), by the corpus identity the lock records (§4)
    prints = {"corpus_revision": "c" * 64, "model_revision": "m" * 64}
    lock = build_lock(load_experiment(DEMO), prints, corpus_identity="c" * 64)
    (bundle / "protocol.lock.json").write_text(json.dumps(lock), encoding="utf-8")
    env = {
        "captured_utc": "2026-12-02T10:00:00Z",
        "hostname": "rented-node",
        "gpu_model": GPU,
        "gpu_count": 1,
        "gpu_uuids": [UUID],
        "visible_gpu_uuids": [UUID],
    }
    (bundle / "environment.json").write_text(json.dumps(env), encoding="utf-8")
    rows = []
    for variant, cells in verdicts.items():
        for number, accepted in enumerate(cells):
            phase, index = ("cold", "warm")[number // 2], number % 2 + 1
            row = dict.fromkeys(COLUMNS, "")
            row.update(
                experiment_id=name, variant_id=variant, corpus_revision="c" * 64,
                gpu_model=GPU, gpu_count="1", device="cuda:0", phase=phase,
                run_index=str(index), elapsed_seconds=f"0.{5 + number}",
                quality_metric="macro_f1", quality_threshold="0.7", quality_tolerance="0.01",
            )  # fmt: skip
            if accepted is not None:  # a real check ran (R1.5); else the cells stay empty
                row.update(
                    expected_ids="100", observed_ids="100", ids_match="true",
                    format_valid="true", quality_value="0.8" if accepted else "0.5",
                    corpus_accepted="true" if accepted else "false",
                )  # fmt: skip
            rows.append(row)
            folder = bundle / "runs" / variant / f"{phase}-{index}"
            folder.mkdir(parents=True)
            record = {
                "variant_id": variant,
                "phase": phase,
                "run_index": index,
                "started_utc": f"2026-12-02T10:0{number}:00Z",
                "finished_utc": f"2026-12-02T10:0{number}:30Z",
                "elapsed_seconds": float(row["elapsed_seconds"]),
            }
            (folder / "run.json").write_text(json.dumps(record), encoding="utf-8")
    with (bundle / "resultats-bruts.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return bundle


@pytest.fixture
def offers(tmp_path: Path) -> Path:
    path = tmp_path / "offers.yaml"
    path.write_text(OFFERS_YAML, encoding="utf-8")
    return path


def summary_verdicts(bundle: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> dict[str, str]:
    """What `gpubench-nb run` prints per variant, with the run itself replaced by the bundle."""
    rows = read_rows(bundle / "resultats-bruts.csv")
    result = orchestrate.PipelineResult(bundle_dir=bundle, rows=rows, report_path=None)
    monkeypatch.setattr(orchestrate, "run_experiment", lambda *a, **k: result)
    assert (
        cli.main(["run", str(bundle / "experiment.yaml"), "--output-dir", str(bundle.parent)]) == 0
    )
    out = capsys.readouterr().out.splitlines()
    verdicts = {}
    for line in out:
        variant, _, rest = line.partition(" ")
        if variant in {row["variant_id"] for row in rows} and rest.strip().endswith("R1.5)"):
            verdicts[variant] = rest.strip().split(" (")[0]
    return verdicts


def every_screen(
    bundle: Path, offers: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> dict[str, dict[str, object]]:
    """The verdict per variant as economics.json, the decision table, the report, the ledger
    and the run summary each state it (True, False, None = acceptance not recorded)."""
    economics = write_bundle_economics(bundle, Pricing(offers, "h100-test", 7))
    write_manifest(bundle)  # sealed after its economics, as the pipeline does (R5.6)
    by_economics = {
        v["variant_id"]: {"accepted": True, "not accepted": False}.get(v["status"])
        for v in economics["variants"]
    }
    loaded = load_bundles([bundle])
    by_decision = {o.variant_id: o.accepted for o in decision_view_of(loaded).options}
    summary = summary_of(loaded)
    by_report = {p.variant_id: p.acceptance.verdict for p in summary.phases if p.acceptance}
    ledger = build_ledger(load_offers(offers)["h100-test"], 7, 1, START, [bundle], now=AFTER)
    kept = set(ledger["kept"][0]["accepted_variants"])
    by_ledger = {v: True if v in kept else "not counted" for v in by_economics}
    shown = {"accepted": True, "NOT accepted": False, "acceptance not recorded": None}
    by_summary = {
        v: shown[text] for v, text in summary_verdicts(bundle, monkeypatch, capsys).items()
    }
    return {
        "economics": by_economics,
        "decision": by_decision,
        "report": by_report,
        "ledger": by_ledger,
        "summary": by_summary,
    }


def test_accepted_and_refused_variants_read_the_same_everywhere(
    tmp_path: Path, offers: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    bundle = make_bundle(tmp_path, "accepted", ACCEPTED)
    screens = every_screen(bundle, offers, monkeypatch, capsys)
    expected = {"b1": True, "b4": False}  # b4: cold-2 refused, so the variant is not (R1.5)
    for name in ("economics", "decision", "report", "summary"):
        assert screens[name] == expected, name
    # The ledger counts the corpus once, from the accepted variant only (R5.3).
    assert screens["ledger"] == {"b1": True, "b4": "not counted"}


def test_unrecorded_acceptance_reads_the_same_everywhere(
    tmp_path: Path, offers: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """b8 has two runs whose acceptance is not recorded and none refused: unknown, not "no"
    (R4.3). The old summary printed "NOT accepted" here; every screen now says the same."""
    bundle = make_bundle(tmp_path, "unrecorded", UNRECORDED)
    screens = every_screen(bundle, offers, monkeypatch, capsys)
    expected = {"b1": True, "b8": None}
    for name in ("economics", "decision", "report", "summary"):
        assert screens[name] == expected, name
    assert screens["ledger"] == {"b1": True, "b8": "not counted"}  # never counted as accepted


def test_cost_and_attribution_read_the_same_everywhere(tmp_path: Path, offers: Path) -> None:
    """Package total / 1 accepted distinct corpus (R5.3) on the offer whose hardware accepted
    it; the H200 offer shows its total and no cost (R5.7), in economics.json, the decision
    table, the report's economics table and the ledger alike."""
    bundle = make_bundle(tmp_path, "priced", ACCEPTED)
    data = write_bundle_economics(bundle, Pricing(offers, "h100-test", 7))
    write_manifest(bundle)  # sealed after its economics, as the pipeline does (R5.6)
    cells = {
        (o["offer_id"], c["variant_id"]): c["cost_per_accepted_usd_minor"]
        for o in data["offers"]
        for c in o["variants"]
    }
    one_corpus = cost_per_accepted_usd_minor(65000, 1)
    assert cells == {
        ("h100-test", "b1"): one_corpus,
        ("h100-test", "b4"): None,  # not accepted: no cost (R5.7)
        ("h200-test", "b1"): None,  # not this hardware (R5.7)
        ("h200-test", "b4"): None,
    }
    options = {o.variant_id: o for o in decision_view_of(load_bundles([bundle])).options}
    assert options["b1"].cost_per_accepted_usd_minor == one_corpus
    assert options["b4"].cost_per_accepted_usd_minor is None
    table = economics_table(load_bundles([bundle]))
    label = load_bundles([bundle])[0].label
    h100, h200 = table.loc[(label, "h100-test")], table.loc[(label, "h200-test")]
    assert h100["b1: USD per accepted corpus"] == "USD 650.00"
    assert h200["b1: USD per accepted corpus"] == "not measured on this hardware"
    attribution = {o["offer_id"]: o["attribution"]["reason"] for o in data["offers"]}
    assert h200["measured on this hardware?"] == attribution["h200-test"]
    assert h100["measured on this hardware?"] == attribution["h100-test"]
    offers_table = load_offers(offers)
    ledger = build_ledger(offers_table["h100-test"], 7, 1, START, [bundle], now=AFTER)
    assert (ledger["accepted_corpora"], ledger["cost_per_accepted_usd_minor"]) == (1, one_corpus)
    other = build_ledger(offers_table["h200-test"], 7, 1, START, [bundle], now=AFTER)
    assert other["left_out"][0]["reason"] == attribution["h200-test"]

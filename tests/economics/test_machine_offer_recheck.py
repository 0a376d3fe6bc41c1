"""check-bundle re-prices a bundle priced by the demo's own machine offer with that same offer
(R5.6): the table it re-reads gains the machine's offer exactly as 30_economics' did."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from gpubench_nb.economics.offers import MACHINE_OFFER_ID
from gpubench_nb.economics.reprice import _pricing, price_bundle, verify_bundle
from gpubench_nb.protocol.bundle import write_manifest

ROOT = Path(__file__).resolve().parents[2]
MAIN_BUNDLE = ROOT / "tests" / "fixtures" / "main-bundle"


def _priced_by_the_machine_offer(tmp_path: Path) -> Path:
    bundle = Path(shutil.copytree(MAIN_BUNDLE, tmp_path / "b"))
    offers = ROOT / "parameters" / "offers.yaml"
    terms = {"offers": offers, "offer": MACHINE_OFFER_ID, "days": 7, "lots": 1, "gpus": None}
    price_bundle(bundle, _pricing(None, terms))
    write_manifest(bundle)
    return bundle


def test_a_bundle_priced_by_the_machine_offer_re_checks_cleanly(tmp_path: Path) -> None:
    assert verify_bundle(_priced_by_the_machine_offer(tmp_path)) == []


def test_an_edited_machine_offer_price_is_a_finding(tmp_path: Path) -> None:
    bundle = _priced_by_the_machine_offer(tmp_path)
    path = bundle / "economics.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    declared = next(o for o in data["offers"] if o["offer_id"] == MACHINE_OFFER_ID)
    declared["package_total_usd_minor"] = 1
    path.write_text(json.dumps(data), encoding="utf-8")
    write_manifest(bundle)
    assert [p.split(" (as kept")[0] for p in verify_bundle(bundle)] == [
        "economics.json: offers[3].package_total_usd_minor: 1 -> 3000"
    ]

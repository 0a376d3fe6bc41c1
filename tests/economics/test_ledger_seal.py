"""A ledger is sealed like a lock and re-priced from its offers table when shown (R5.1, R5.3):
a genuine ledger of a placeholder offer is shown with its mark; a consistent forgery (a package
of 1 cent, the mark dropped) is refused, resealed or not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpubench_nb.cli import main
from gpubench_nb.economics.ledger import read_ledger, seal_ledger
from gpubench_nb.economics.offers import cost_per_accepted_usd_minor
from gpubench_nb.errors import EconomicsError

ROOT = Path(__file__).resolve().parents[2]
MAIN_BUNDLE = ROOT / "tests" / "fixtures" / "main-bundle"


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    """`gpubench-nb ledger --out` over a real bundle, priced by the shipped (example) offers."""
    bundle = shutil.copytree(MAIN_BUNDLE, tmp_path / "main-bundle")
    offers = shutil.copy(ROOT / "parameters" / "offers.yaml", tmp_path / "offers.yaml")
    out = tmp_path / "ledger.json"
    argv = ["ledger", "--offers", str(offers), "--offer", "h100-example", "--days", "7",
            "--lots", "1", "--start", "2026-12-04", "--out", str(out), str(bundle)]  # fmt: skip
    assert main(argv) == 0
    return out


def test_a_genuine_placeholder_ledger_is_shown_with_its_mark(ledger_file: Path) -> None:
    data = read_ledger(ledger_file)
    assert data["placeholder"] is True and "invented" in data["statement"]
    assert data["ledger_sha256"] and data["offers_sha256"]


def _forge(data: dict, *, total: int | None = None, real: bool = False) -> dict:
    from gpubench_nb.economics.ledger import _statement

    if total is not None:
        data["package_total_usd_minor"] = total
        cost = cost_per_accepted_usd_minor(total, data["accepted_corpora"])
        data["cost_per_accepted_usd_minor"] = cost
    if real:
        data["placeholder"] = False
    data["statement"] = _statement(data)
    return data


@pytest.mark.parametrize("forgery", [{"total": 1}, {"real": True}])
@pytest.mark.parametrize("reseal", [False, True])
def test_a_consistent_forgery_is_refused(ledger_file: Path, forgery, reseal) -> None:
    data = _forge(json.loads(ledger_file.read_text(encoding="utf-8")), **forgery)
    ledger_file.write_text(json.dumps(seal_ledger(data) if reseal else data), encoding="utf-8")
    expected = "placeholder mark is not the one" if reseal else "ledger_sha256 is missing or"
    with pytest.raises(EconomicsError, match=expected):
        read_ledger(ledger_file)


def test_a_seal_removed_is_refused(ledger_file: Path) -> None:
    data = _forge(json.loads(ledger_file.read_text(encoding="utf-8")), real=True)
    del data["ledger_sha256"]
    ledger_file.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(EconomicsError, match="ledger_sha256 is missing"):
        read_ledger(ledger_file)

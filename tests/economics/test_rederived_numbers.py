"""check-bundle re-derives every number a bundle states (R5.6): the CSV's package columns from
the offers like economics.json, an older bundle's prices from the totals it states rather than
trusted; `report` refuses what check-bundle refuses, a ledger its gone or broken bundles; a time
that is not a number never ranks a variant (R3.6).

Each edit below is followed by a consistently rewritten manifest, as a careful forger would."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpubench_nb.cli import main as cli_main
from gpubench_nb.economics.ledger import read_ledger, seal_ledger
from gpubench_nb.economics.reprice import verify_bundle
from gpubench_nb.errors import BundleError, ResultsError
from gpubench_nb.protocol.bundle import write_manifest
from gpubench_nb.protocol.results import read_rows, write_rows_atomic
from gpubench_nb.report.economics import ledger_markdown
from gpubench_nb.report.render import render_comparison
from gpubench_nb.report.stats import summarise
from tests.support.ledger import written_ledger

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "main-bundle"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "main-bundle"))


def _economics(bundle: Path, edit) -> None:
    path = bundle / "economics.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    write_manifest(bundle)


def _csv(bundle: Path, **cells) -> None:
    path = bundle / "resultats-bruts.csv"
    write_rows_atomic(path, [{**row, **cells} for row in read_rows(path)])
    write_manifest(bundle)


def test_the_kept_bundle_still_verifies(bundle: Path) -> None:
    assert verify_bundle(bundle) == []


def test_an_older_bundle_with_its_cost_set_to_one_cent_is_refused(bundle: Path) -> None:
    """The fixture's offers table is gone: its prices are re-derived from the totals it
    states, not trusted (it used to verify with any cost per accepted corpus)."""

    def one_cent(data: dict) -> None:
        data["offers"][0]["variants"][0]["cost_per_accepted_usd_minor"] = 1

    _economics(bundle, one_cent)
    [problem] = verify_bundle(bundle)
    assert "offers[0].variants[0].cost_per_accepted_usd_minor: 1 -> None" in problem


def test_a_declared_package_total_that_is_not_the_csvs_is_refused(bundle: Path) -> None:
    def one_cent(data: dict) -> None:
        data["offers"][0]["package_total_usd_minor"] = 1

    _economics(bundle, one_cent)
    problems = "\n".join(verify_bundle(bundle))
    assert "package_total_usd_minor=42000, re-derived 1" in problems


@pytest.mark.parametrize(
    ("cells", "said"),
    [
        ({"package_total_usd_minor": 84000}, "package_total_usd_minor=84000, re-derived 42000"),
        ({"lots": 2}, "lots=2, re-derived 1"),
        ({"duration_days": 30}, "duration_days=30, re-derived 7"),
        ({"accepted_unique_corpora": 5}, "accepted_unique_corpora=5, re-derived 1"),
    ],
)
def test_the_csv_package_columns_are_re_derived(bundle: Path, cells: dict, said: str) -> None:
    _csv(bundle, **cells)  # every row, as a consistent forger would
    problems = verify_bundle(bundle)
    assert problems and all(said in p and "(R5.3)" in p for p in problems)
    assert cli_main(["check-bundle", str(bundle)]) == 1


def test_report_refuses_a_bundle_whose_csv_changed_after_sealing(
    bundle: Path, tmp_path: Path
) -> None:
    csv_path = bundle / "resultats-bruts.csv"
    csv_path.write_text(csv_path.read_text("utf-8").replace("0.239313617", "0.001"), "utf-8")
    out = tmp_path / "r.html"
    with pytest.raises(BundleError, match=r"R5\.6: .*check-bundle refuses it.*changed since"):
        render_comparison([bundle], out)
    assert not out.exists()  # refused before any kernel


def test_a_ledger_whose_counted_bundle_is_gone_or_tampered_is_marked(tmp_path: Path) -> None:
    """Was: shown as is after its counted bundle was edited or deleted."""
    ledger = written_ledger(tmp_path)
    assert read_ledger(ledger)["unverified"] == []
    csv_path = tmp_path / "a" / "resultats-bruts.csv"
    csv_path.write_text(csv_path.read_text("utf-8") + "\n", "utf-8")
    [said] = read_ledger(ledger)["unverified"]
    assert "resultats-bruts.csv: changed since the manifest was written" in said
    shown = ledger_markdown(str(ledger))
    assert "**Counted, but check-bundle refuses it now:**" in shown
    shutil.rmtree(tmp_path / "a")
    [said] = read_ledger(ledger)["unverified"]
    assert "not a bundle folder" in said


def test_a_forged_ledger_naming_a_bundle_that_does_not_exist_is_marked(tmp_path: Path) -> None:
    ledger = written_ledger(tmp_path)
    data = json.loads(ledger.read_text(encoding="utf-8"))
    nowhere = str(tmp_path / "never-made")
    data["kept"] = [{**entry, "bundle": nowhere} for entry in data["kept"]]
    for counted in data["accepted_corpus_identities"]:
        counted["bundles"] = [nowhere]
    ledger.write_text(json.dumps(seal_ledger(data)), encoding="utf-8")  # sealed as the tool does
    [said] = read_ledger(ledger)["unverified"]
    assert said.startswith(f"{nowhere}: {nowhere}: not a bundle folder")
    assert "**Counted, but check-bundle refuses it now:**" in ledger_markdown(str(ledger))


def _rows(times: list[float]) -> list[dict]:
    return [
        {"bundle": "x", "variant_id": v, "phase": "warm", "run_index": i, "elapsed_seconds": t}
        for v, base in (("a", 0.0), ("b", 1.0))
        for i, t in enumerate((base + t for t in times), start=1)
    ]


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_warm_time_that_is_not_a_number_never_ranks_a_variant(bad: float) -> None:
    summarise(_rows([0.1, 0.2, 0.3, 0.4, 0.5]))  # five finite times a side are compared
    with pytest.raises(ResultsError, match=r"R3\.6: x / a / warm run 3: elapsed_seconds (nan|inf)"):
        summarise(_rows([0.1, 0.2, bad, 0.4, 0.5]))


def test_a_csv_time_too_long_to_be_finite_is_refused(bundle: Path) -> None:
    csv_path = bundle / "resultats-bruts.csv"
    csv_path.write_text(csv_path.read_text("utf-8").replace("0.239313617", "9" * 400 + ".0"))
    with pytest.raises(ResultsError, match="is not a decimal number"):
        read_rows(csv_path)

"""The rental ledger on hand-made bundles: distinct accepted corpora on one machine (R5.3, R5.5)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from contextlib import redirect_stdout
from datetime import datetime, timezone
from pathlib import Path

import pytest

from gpubench_nb.cli import main as cli_main
from gpubench_nb.economics import calcul_forfaits
from gpubench_nb.economics.ledger import build_ledger, format_ledger, machine_from, parse_start
from gpubench_nb.errors import EconomicsError
from tests.support.ledger import AFTER, FOREIGN, H100, OFFERS_YAML, RENTED, START, make_bundle


@pytest.fixture
def rental(tmp_path: Path) -> list[Path]:
    """Worked by hand: corpora a (twice), d (once, one run) are accepted on the rented machine
    in the window -> 2 distinct; b never accepted; c foreign; e before the window; f on CPU."""
    return [
        make_bundle(tmp_path, "a-batch", corpus="a", date="2026-12-02"),
        make_bundle(
            tmp_path, "a-again", corpus="a", date="2026-12-03", used=RENTED[1]
        ),  # other GPU, same box
        make_bundle(tmp_path, "b-rejected", corpus="b", date="2026-12-03", accepted=False),
        make_bundle(
            tmp_path, "c-foreign", corpus="c", date="2026-12-04", used=FOREIGN, host="other-node"
        ),
        make_bundle(tmp_path, "e", corpus="e", date="2026-11-30"),  # before the package
        make_bundle(tmp_path, "d-classify", corpus="d", date="2026-12-05", repeats=1),
        make_bundle(tmp_path, "f-cpu", corpus="f", date="2026-12-05", gpu=False),
    ]


def test_ledger_counts_distinct_accepted_corpora_on_the_rented_machine(rental) -> None:
    ledger = build_ledger(H100, 7, 1, START, rental, now=AFTER)
    assert ledger["accepted_corpora"] == 2  # a (repeated 5x, and in 2 bundles) once; d once
    assert [e["corpus_identity"][0] for e in ledger["accepted_corpus_identities"]] == ["a", "d"]
    assert len(ledger["accepted_corpus_identities"][0]["bundles"]) == 2
    assert ledger["package_total_usd_minor"] == 65_000
    assert ledger["cost_per_accepted_usd_minor"] == 32_500  # 65000 / 2 distinct corpora
    assert ledger["window"]["status"] == "closed"
    kept = {Path(e["bundle"]).name: e["accepted"] for e in ledger["kept"]}
    assert kept == {"a-batch": True, "a-again": True, "b-rejected": False, "d-classify": True}
    left = {Path(e["bundle"]).name: e["reason"] for e in ledger["left_out"]}
    assert set(left) == {"c-foreign", "e", "f-cpu"}
    assert left["c-foreign"].startswith(f"another machine: GPU(s) {FOREIGN}")
    assert left["e"].startswith("outside the package window [2026-12-01T00:00:00Z, 2026-12-08")
    assert left["f-cpu"].startswith("not measured on this hardware: accepted on the CPU")


def test_totals_equal_calcul_forfaits(rental, capsys) -> None:
    ledger = build_ledger(H100, 7, 1, START, rental, now=AFTER)
    offers = rental[0].parent / "offers.yaml"
    offers.write_text(OFFERS_YAML, encoding="utf-8")
    argv = ["--offers", str(offers), "--offer", "h100-test", "--days", "7", "--lots", "1",
            "--accepted-results", str(ledger["accepted_corpora"]), "--format", "json"]  # fmt: skip
    assert calcul_forfaits.main(argv) == 0
    quote = json.loads(capsys.readouterr().out)
    assert quote["package_total_usd_minor"] == ledger["package_total_usd_minor"]
    assert quote["cost_per_accepted_usd_minor"] == ledger["cost_per_accepted_usd_minor"]


def test_a_running_window_says_so_far_and_nothing_is_extrapolated(rental) -> None:
    now = datetime(2026, 12, 6, tzinfo=timezone.utc)
    ledger = build_ledger(H100, 7, 1, START, rental, now=now)
    assert ledger["window"]["status"] == "so far"
    assert ledger["accepted_corpora"] == 2 and ledger["cost_per_accepted_usd_minor"] == 32_500
    assert (
        "2 distinct accepted corpora so far (the package window is still running)"
        in (ledger["statement"])
    )


def test_nothing_accepted_gives_only_the_package_total(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, "b", corpus="b", date="2026-12-02", accepted=False)
    ledger = build_ledger(H100, 7, 1, START, [bundle], now=AFTER)
    assert ledger["accepted_corpora"] == 0 and ledger["cost_per_accepted_usd_minor"] is None
    assert "no cost per accepted corpus (R5.5)" in ledger["statement"]


def test_machine_named_by_host_or_uuid(rental) -> None:
    by_uuid = build_ledger(H100, 7, 1, START, rental, machine=machine_from([FOREIGN]), now=AFTER)
    assert [Path(e["bundle"]).name for e in by_uuid["kept"]] == ["c-foreign"]
    by_host = build_ledger(
        H100, 7, 1, START, rental, machine=machine_from(["other-node"]), now=AFTER
    )
    # No UUID named: the host name decides, and only c-foreign ran on other-node.
    assert [Path(e["bundle"]).name for e in by_host["kept"]] == ["c-foreign"]
    assert all("host 'rented-node'" in e["reason"] for e in by_host["left_out"][:2])


def test_formats_table_csv_json(rental) -> None:
    ledger = build_ledger(H100, 7, 1, START, rental, now=AFTER)
    table = format_ledger(ledger, "table")
    assert "cost        32500 cents (USD 325.00) per accepted corpus" in table
    assert "left out:" in table and "c-foreign" in table
    rows = list(csv.DictReader(io.StringIO(format_ledger(ledger, "csv"))))
    assert len(rows) == 7 and {r["kept"] for r in rows} == {"true", "false"}
    assert json.loads(format_ledger(ledger, "json")) == ledger


def test_bad_input_is_refused_naming_the_fix(tmp_path: Path, rental) -> None:
    with pytest.raises(EconomicsError, match="R5.3: --start: not a date"):
        parse_start("first of December")
    with pytest.raises(EconomicsError, match="not a bundle folder"):
        build_ledger(H100, 7, 1, START, [tmp_path / "missing"])
    with pytest.raises(EconomicsError, match="R5.1"):
        build_ledger(H100, 5, 1, START, rental)
    with pytest.raises(EconomicsError, match="passed twice"):
        build_ledger(H100, 7, 1, START, [rental[0], rental[0]])


def test_cli_ledger_writes_json_and_exits_2_on_bad_input(rental, capsys) -> None:
    offers = rental[0].parent / "offers.yaml"
    offers.write_text(OFFERS_YAML, encoding="utf-8")
    out = rental[0].parent / "ledger.json"
    argv = ["ledger", "--offers", str(offers), "--offer", "h100", "--days", "7", "--lots", "1",
            "--start", "2026-12-01", "--out", str(out), *map(str, rental)]  # fmt: skip
    assert cli_main(argv) == 0
    assert "2 distinct accepted corpora" in capsys.readouterr().out
    assert json.loads(out.read_text(encoding="utf-8"))["accepted_corpora"] == 2
    bad = [*argv[:9], "--start", "soon", *map(str, rental)]
    assert cli_main(bad) == 2
    err = capsys.readouterr().err
    assert "R5.3: --start: not a date" in err and "Traceback" not in err
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        assert cli_main([*argv[: -len(rental)], "--format", "csv", *map(str, rental)]) == 0


def test_placeholder_prices_are_marked_in_every_ledger_format(rental) -> None:
    """Issue 24 §3: an example offer's price is never shown as a bare price."""
    example = dataclasses.replace(H100, placeholder=True)
    ledger = build_ledger(example, 7, 1, START, rental, now=AFTER)
    assert ledger["placeholder"] is True
    assert "USD 650.00 [PLACEHOLDER, not a quote]" in ledger["statement"]
    assert "USD 325.00 [PLACEHOLDER, not a quote] per accepted corpus" in ledger["statement"]
    assert "remove 'placeholder: true'" in ledger["statement"]  # how to enter a real quote
    table = format_ledger(ledger, "table")
    assert "cost        32500 cents (USD 325.00 [PLACEHOLDER, not a quote])" in table
    rows = list(csv.DictReader(io.StringIO(format_ledger(ledger, "csv"))))
    assert {r["placeholder"] for r in rows} == {"true"}
    real = build_ledger(H100, 7, 1, START, rental, now=AFTER)
    assert real["placeholder"] is False and "PLACEHOLDER" not in format_ledger(real, "table")

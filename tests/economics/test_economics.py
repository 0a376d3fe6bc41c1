"""Whole packages, lots and cost per accepted corpus: worked examples by hand (R5.1-R5.7)."""

from __future__ import annotations

import ast
import copy
import csv
import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpubench_nb.economics.bundle_economics import UNIT_OF_WORK, fill_package_columns
from gpubench_nb.economics.offers import (
    ROUNDING_RULE,
    Offer,
    break_even_accepted,
    cost_per_accepted_usd_minor,
    load_offers,
    package_quote,
    resolve_offer,
)
from gpubench_nb.economics.reprice import economics_notebook
from gpubench_nb.errors import EconomicsError, ResultsError
from gpubench_nb.protocol.records import FORMAT_VERSION
from gpubench_nb.protocol.results import COLUMNS
from tests.support.economics import write_bundle_economics
from tests.support.ledger import H100, make_offer

ROOT = Path(__file__).resolve().parents[2]

# Fixed test prices (the shipped table's example prices may be replaced by real quotes).
OFFERS_YAML = """\
offers:
  - id: h100-test
    provider: test fixture
    gpu_model: NVIDIA H100 80GB
    gpus_per_lot: 1
    package_price_usd_minor: {3: 30000, 7: 65000, 30: 250000}
  - id: b200-test
    provider: test fixture
    gpu_model: NVIDIA B200
    gpus_per_lot: 2
    package_price_usd_minor: {3: 90000, 7: 198765, 30: 780000}
"""
B200 = make_offer("b200-test", "NVIDIA B200", 2, (90000, 198765, 780000))


@dataclass(frozen=True)
class Pricing:
    """Stands in for experiment.PricingSpec (same attributes)."""

    offers: Path
    offer: str
    days: int
    lots: int | None = 1
    gpus: int | None = None


@pytest.fixture
def offers_file(tmp_path: Path) -> Path:
    path = tmp_path / "offers.yaml"
    path.write_text(OFFERS_YAML, encoding="utf-8")
    return path


# --- the offers table -----------------------------------------------------------------------


def test_shipped_offers_are_labelled_examples_with_a_b200_lot_of_two() -> None:
    path = ROOT / "parameters" / "offers.yaml"
    offers = load_offers(path)
    assert set(offers) == {"h100-example", "h200-example", "b200-example"}
    assert offers["b200-example"].gpus_per_lot == 2  # R5.2
    assert offers["h100-example"].gpus_per_lot == offers["h200-example"].gpus_per_lot == 1
    for offer in offers.values():
        assert sorted(offer.package_price_usd_minor) == [3, 7, 30]
        assert all(type(cents) is int for cents in offer.package_price_usd_minor.values())
    assert "placeholder" in path.read_text(encoding="utf-8").lower()
    assert all(offer.placeholder for offer in offers.values())  # declared, not parsed (issue 24)


def test_demo_experiment_names_its_machine_offer_over_the_shipped_table() -> None:
    from gpubench_nb.economics.offers import MACHINE_OFFER_ID

    demo = yaml.safe_load((ROOT / "parameters" / "demo.yaml").read_text(encoding="utf-8"))
    load_offers(ROOT / "parameters" / demo["pricing"]["offers"])
    assert demo["pricing"]["offer"] == MACHINE_OFFER_ID


BAD_TABLES = [
    # (what to replace in OFFERS_YAML, replacement, fragments the message must name)
    ("{3: 30000,", "{3: 30000, 14: 1000,", ["h100-test", "package_price_usd_minor.14", "3, 7, 30"]),
    ("7: 65000", "7: 650.5", ["h100-test", "package_price_usd_minor.7", "650.5", "123456"]),
    ("7: 65000", "7: '65000'", ["h100-test", "whole US cents", "'65000'"]),
    ("7: 65000", "7: -1", ["h100-test", "package_price_usd_minor.7", ">= 1", "-1"]),
    # R5.1: 0 is not a price, as the CSV schema says of package_total_usd_minor (issue 11.5).
    ("7: 65000", "7: 0", ["h100-test", "package_price_usd_minor.7", "0 is not a price"]),
    ("7: 65000", "7: true", ["h100-test", "package_price_usd_minor.7", "True"]),
    ("gpus_per_lot: 2", "gpus_per_lot: 0", ["R5.2", "b200-test", "gpus_per_lot", "got 0"]),
    ("gpus_per_lot: 2", "gpus_per_lot: 1.5", ["b200-test", "gpus_per_lot", "1.5"]),
    ("id: b200-test", "id: h100-test", ["offers[1]", "duplicate id 'h100-test'"]),
    (
        "provider: test fixture\n    gpu_model: NVIDIA B200",
        "price: 1\n    gpu_model: x",
        ["b200-test", "price': unknown key", "provider': missing"],
    ),
    (", 30: 250000}", "}", ["h100-test", "package_price_usd_minor.30': missing", "3, 7, 30"]),
    ("offers:", "offer:", ["key 'offer': unknown key", "did you mean 'offers'?"]),
    ("id: h100-test", "id: ''", ["offers[0].id'", "must be non-empty text"]),
    ("{3: 30000,", "{3: [30000,", ["not valid YAML"]),
]


@pytest.mark.parametrize(("old", "new", "fragments"), BAD_TABLES)
def test_bad_offers_tables_are_refused_naming_file_offer_field_and_value(
    tmp_path: Path, old: str, new: str, fragments: list[str]
) -> None:
    assert old in OFFERS_YAML  # the mutation really applies
    path = tmp_path / "bad-offers.yaml"
    path.write_text(OFFERS_YAML.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(EconomicsError) as info:
        load_offers(path)
    message = str(info.value)
    assert "bad-offers.yaml" in message
    assert message.startswith(("R5.1:", "R5.2:", "R4.2:"))
    for fragment in fragments:
        assert fragment in message


def test_missing_offers_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EconomicsError, match=r"R5\.1: .*nope\.yaml: cannot read"):
        load_offers(tmp_path / "nope.yaml")


def test_resolve_offer_takes_an_exact_id_or_a_unique_prefix() -> None:
    table = {"h100-test": H100, "b200-test": B200}
    assert resolve_offer(table, "b200-test") is B200
    assert resolve_offer(table, "b200") is B200  # the issue's `--offer b200`
    with pytest.raises(EconomicsError, match="unknown offer 'a100'; valid values: h100-test, b200"):
        resolve_offer(table, "a100")
    with pytest.raises(EconomicsError, match="ambiguous offer 'h100'"):
        resolve_offer({"h100-a": H100, "h100-b": H100}, "h100")


# --- package_quote: worked examples -----------------------------------------------------------


def test_b200_seven_days_two_lots() -> None:
    # R5.1, R5.2: 198765 cents per lot (a lot = 2 B200 GPUs) x 2 lots = 397530 cents.
    quote = package_quote(B200, 7, lots=2)
    assert quote.package_total_usd_minor == 397_530
    assert (quote.lots, quote.gpus_per_lot, quote.days) == (2, 2, 7)
    assert quote.cost_per_accepted_usd_minor is None  # nothing measured (R5.5)
    assert "198765 cents per lot x 2 lot(s) = 397530 cents (R5.1)" in quote.note
    # Stating GPUs instead: 4 GPUs -> ceil(4/2) = 2 lots, the same spend; 3 GPUs -> also 2 lots.
    assert package_quote(B200, 7, gpus=4).package_total_usd_minor == 397_530
    three = package_quote(B200, 7, gpus=3)
    assert three.lots == 2 and three.package_total_usd_minor == 397_530
    assert "ceil(3 / 2 GPUs per lot) = 2, so 1 billed GPU(s) beyond the need (R5.2)" in three.note


def test_h100_thirty_days_without_accepted_results_gives_only_the_total() -> None:
    quote = package_quote(H100, 30, lots=1)
    assert quote.package_total_usd_minor == 250_000  # 250000 x 1 lot
    assert quote.accepted_results is None
    assert quote.cost_per_accepted_usd_minor is None  # never 0, never estimated (R5.5)
    assert "only the package total is computed" in quote.note and "R5.5" in quote.note


def test_h100_thirty_days_with_accepted_results() -> None:
    # 250000 / 3 = 83333.33... -> 83333 cents; 250000 / 6 = 41666.67 -> 41667 cents.
    three = package_quote(H100, 30, lots=1, accepted_results=3)
    assert three.package_total_usd_minor == 250_000  # the count never changes the spend
    assert three.cost_per_accepted_usd_minor == 83_333
    assert package_quote(H100, 30, lots=1, accepted_results=6).cost_per_accepted_usd_minor == 41_667
    assert "250000 / 3 distinct accepted corpora = 83333 cents" in three.note
    assert three.rounding_rule == ROUNDING_RULE


def test_zero_accepted_results_means_no_cost_per_result() -> None:
    quote = package_quote(H100, 7, lots=1, accepted_results=0)
    assert quote.package_total_usd_minor == 65_000
    assert quote.cost_per_accepted_usd_minor is None
    assert "no accepted result, so no cost per result" in quote.note


@pytest.mark.parametrize(
    ("total", "count", "expected"),
    [
        (5, 2, 3),  # 2.5 -> 3: halves go up (banker's rounding would give 2)
        (7, 2, 4),  # 3.5 -> 4
        (10, 4, 3),  # 2.5 -> 3
        (1, 3, 0),  # 0.333 -> 0
        (2, 3, 1),  # 0.667 -> 1
        (15, 4, 4),  # 3.75 -> 4
        (65_000, 1, 65_000),
        (0, 5, 0),  # a free package costs 0 per result: zero is truly zero (R4.3)
        (100, 0, None),  # no accepted result
        (100, None, None),  # not measured (R5.5)
    ],
)
def test_cost_rounding_rule(total: int, count: int | None, expected: int | None) -> None:
    assert cost_per_accepted_usd_minor(total, count) == expected
    assert "halves rounded up" in ROUNDING_RULE


@pytest.mark.parametrize(
    ("days", "kwargs", "fragment"),
    [
        (5, {"lots": 1}, "days must be one of 3, 7, 30"),
        (True, {"lots": 1}, "days must be one of 3, 7, 30"),
        (7, {"lots": 0}, "lots must be a whole number >= 1, got 0"),
        (7, {"lots": 1.0}, "lots must be a whole number >= 1, got 1.0"),
        (7, {"gpus": 0}, "gpus must be a whole number >= 1"),
        (7, {"lots": 1, "gpus": 2}, "exactly one of lots"),
        (7, {}, "exactly one of lots"),
        (7, {"lots": 1, "accepted_results": -1}, "accepted_results must be a whole number >= 0"),
        (7, {"lots": 1, "accepted_results": 1.5}, "got 1.5"),
    ],
)
def test_package_quote_rejects_bad_arguments(
    days: Any, kwargs: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(EconomicsError, match=r"^R5\.[13]: ") as info:
        package_quote(H100, days, **kwargs)
    assert fragment in str(info.value)


# --- break-even: a threshold, not a forecast --------------------------------------------------


def test_break_even_counts_by_hand() -> None:
    h100_one = package_quote(H100, 7, lots=1, accepted_results=1)  # 65000 cents per corpus
    # B200 7 d x 2 lots = 397530; 397530 / 65000 = 6.12 -> 7 corpora (56790 < 65000; 6: 66255).
    assert break_even_accepted(package_quote(B200, 7, lots=2), h100_one) == 7
    # Equal cost does not beat: 2 H100 lots = 130000, at 2 corpora 65000 = 65000 -> 3 needed.
    assert break_even_accepted(package_quote(H100, 7, lots=2), h100_one) == 3
    # Reference with 3 accepted corpora on 250000: challenger 780000 needs n > 9.36 -> 10.
    h100_three = package_quote(H100, 30, lots=1, accepted_results=3)
    assert break_even_accepted(package_quote(B200, 30, lots=1), h100_three) == 10


def test_break_even_needs_a_measured_reference_count() -> None:
    for count in (None, 0):
        reference = package_quote(H100, 7, lots=1, accepted_results=count)
        with pytest.raises(EconomicsError, match=r"^R5\.5: .*measured count"):
            break_even_accepted(package_quote(B200, 7, lots=1), reference)


# --- properties -----------------------------------------------------------------------------


def _rows(variants: dict[str, list[bool | None]], repeats: int) -> list[dict[str, Any]]:
    """One load row, then `repeats` cold and warm rows per variant; acceptance cycles."""
    rows = []
    for variant, accepted in variants.items():
        rows.append({**dict.fromkeys(COLUMNS), "variant_id": variant, "phase": "load"})
        for phase in ("cold", "warm"):
            for index in range(1, repeats + 1):
                row = dict.fromkeys(COLUMNS)
                row.update(variant_id=variant, phase=phase, run_index=index)
                row["corpus_accepted"] = accepted[(index - 1) % len(accepted)]
                row["notes"] = f"{phase} run {index}"
                rows.append(row)
    return rows


offer_strategy = st.builds(
    lambda per_lot, prices: Offer(
        id="x-test",
        provider="p",
        gpu_model="GPU",
        gpus_per_lot=per_lot,
        package_price_usd_minor=dict(zip((3, 7, 30), prices, strict=True)),
    ),
    st.integers(1, 8),
    st.lists(st.integers(0, 10**9), min_size=3, max_size=3),
)


@settings(max_examples=40, deadline=None)
@given(
    offer=offer_strategy,
    days=st.sampled_from((3, 7, 30)),
    lots=st.integers(1, 64),
    repeats_a=st.integers(1, 7),
    repeats_b=st.integers(1, 7),
)
def test_package_total_never_depends_on_the_number_of_repeats(
    offer: Offer, days: int, lots: int, repeats_a: int, repeats_b: int
) -> None:
    pricing = Pricing(Path("unused.yaml"), "x-test", days, lots)
    table = {"x-test": offer}
    expected = offer.package_price_usd_minor[days] * lots  # R5.1
    variants = {"v1": [True], "v2": [True, False]}
    for repeats in (repeats_a, repeats_b):
        filled = fill_package_columns(_rows(variants, repeats), pricing, table)
        assert {row["package_total_usd_minor"] for row in filled} == {expected}  # R5.3
        by_variant = {(row["variant_id"], row["accepted_unique_corpora"]) for row in filled}
        # One corpus: 1 or 0 whatever the repeats, never the number of accepted runs.
        assert by_variant == {("v1", 1), ("v2", 0 if repeats > 1 else 1)}


@settings(max_examples=60, deadline=None)
@given(
    offer=offer_strategy,
    days=st.sampled_from((3, 7, 30)),
    lots=st.integers(1, 64),
    accepted=st.one_of(st.none(), st.integers(0, 10_000)),
)
def test_cost_per_result_exists_only_for_a_measured_positive_count(
    offer: Offer, days: int, lots: int, accepted: int | None
) -> None:
    quote = package_quote(offer, days, lots=lots, accepted_results=accepted)
    assert quote.package_total_usd_minor == offer.package_price_usd_minor[days] * lots
    if accepted is None or accepted == 0:
        assert quote.cost_per_accepted_usd_minor is None  # R5.5: never 0, never estimated
    else:
        cost = quote.cost_per_accepted_usd_minor
        assert cost is not None
        # Nearest cent, halves up: total/n - 1/2 < cost <= total/n + 1/2.
        assert 2 * quote.package_total_usd_minor - accepted < 2 * cost * accepted
        assert 2 * cost * accepted <= 2 * quote.package_total_usd_minor + accepted


# --- fill_package_columns (resultats-bruts.csv) -----------------------------------------------


def test_fill_package_columns_one_spend_on_every_row(offers_file: Path) -> None:
    rows = _rows({"b1": [True], "b4": [True, True, False], "b8": [True, None]}, repeats=5)
    before = copy.deepcopy(rows)
    pricing = Pricing(offers_file, "h100-test", 7, lots=1)
    filled = fill_package_columns(rows, pricing)  # offers read from pricing.offers
    assert rows == before  # not mutated
    assert len(filled) == len(rows) == 33
    assert {(r["duration_days"], r["lots"], r["package_total_usd_minor"]) for r in filled} == {
        (7, 1, 65_000)
    }
    accepted = {}
    for row in filled:
        accepted.setdefault(row["variant_id"], set()).add(row["accepted_unique_corpora"])
    # b1: all 10 measured runs accepted -> 1 (load row too); b4: warm-3 and cold-3 failed -> 0;
    # b8: some acceptance not recorded and none failed -> empty, not 0 (R4.3).
    assert accepted == {"b1": {1}, "b4": {0}, "b8": {None}}
    statement = (
        "package: one spend of 65000 cents (h100-test, 7 days x 1 lot(s)) for the whole "
        "experiment, not per run (R5.3)"
    )
    assert filled[0]["notes"] == statement  # load row had no notes
    assert filled[1]["notes"] == f"cold run 1; {statement}"
    again = fill_package_columns(filled, pricing)
    assert again == filled  # idempotent: the statement is not appended twice


def test_fill_package_columns_from_gpus_and_without_pricing(offers_file: Path) -> None:
    rows = _rows({"b1": [True]}, repeats=2)
    table = load_offers(offers_file)
    filled = fill_package_columns(rows, Pricing(offers_file, "b200-test", 3, None, gpus=3), table)
    # ceil(3 GPUs / 2 per lot) = 2 lots x 90000 = 180000 cents.
    assert {(r["lots"], r["package_total_usd_minor"]) for r in filled} == {(2, 180_000)}
    empty = fill_package_columns(rows, None, table)
    package = ("duration_days", "lots", "package_total_usd_minor", "accepted_unique_corpora")
    assert all(row[name] is None for row in empty for name in package)
    assert [row["notes"] for row in empty] == [row["notes"] for row in rows]


def test_fill_package_columns_rejects_unknown_offer_and_phase(offers_file: Path) -> None:
    rows = _rows({"b1": [True]}, repeats=1)
    with pytest.raises(EconomicsError, match="unknown offer 'a100'"):
        fill_package_columns(rows, Pricing(offers_file, "a100", 7))
    rows[1]["phase"] = "hot"
    # the phase is checked by the one acceptance rule (protocol.quality), a CSV fact (R3.2)
    with pytest.raises(ResultsError, match=r"R3\.2: .*'hot'"):
        fill_package_columns(rows, Pricing(offers_file, "h100-test", 7))


def test_a_variant_with_no_measured_run_has_no_accepted_corpus(offers_file: Path) -> None:
    rows = [{**dict.fromkeys(COLUMNS), "variant_id": "b1", "phase": "load"}]
    filled = fill_package_columns(rows, Pricing(offers_file, "h100-test", 7))
    assert filled[0]["accepted_unique_corpora"] == 0


# --- write_bundle_economics (economics.json) --------------------------------------------------

WARM_B1 = [0.50, 0.40, 0.45, 0.90, 0.42]  # sorted 0.40 0.42 0.45 0.50 0.90: median 0.45


H100_RECORDED = "NVIDIA H100 80GB HBM3"  # as torch.cuda.get_device_name names it


def _write_bundle(
    bundle: Path, repeats: int = 5, gpu_model: str | None = H100_RECORDED, gpu_count: int = 1
) -> None:
    rows = _rows({"b1": [True], "b8": [True, False], "b4": [None]}, repeats)
    for row in rows:
        row["gpu_model"] = gpu_model
        row["gpu_count"] = gpu_count
        if row["corpus_accepted"] is not None:  # a real check ran: the CSV rules hold (R1.5)
            row.update(
                expected_ids=1000,
                observed_ids=1000,
                ids_match=True,
                format_valid=True,
                quality_metric="macro_f1",
                quality_threshold=0.7,
                quality_tolerance=0.01,
                quality_value=0.8 if row["corpus_accepted"] else 0.5,
            )
        if row["phase"] == "warm":
            fast = {"b1": WARM_B1[(row["run_index"] - 1) % 5], "b8": 0.1, "b4": 0.2}
            row["elapsed_seconds"] = fast[row["variant_id"]]
        for key, value in row.items():
            row[key] = (
                "" if value is None else str(value).lower() if value in (True, False) else value
            )
    bundle.mkdir(parents=True, exist_ok=True)
    with (bundle / "resultats-bruts.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def _no_cost_without_measured_count(data: dict[str, Any]) -> None:
    accepted = {fact["variant_id"]: fact["accepted"] for fact in data["variants"]}
    for offer in data["offers"]:
        for cell in offer["variants"]:
            if cell["cost_per_accepted_usd_minor"] is not None:
                assert cell["accepted_results"] == 1 and accepted[cell["variant_id"]]
            else:
                assert cell["reason"]  # the report says why (R5.7, R5.5)


def test_write_bundle_economics_worked_example(tmp_path: Path, offers_file: Path) -> None:
    bundle = tmp_path / "bundle"
    _write_bundle(bundle)
    data = write_bundle_economics(bundle, Pricing(offers_file, "h100", 7, lots=1))
    written = json.loads((bundle / "economics.json").read_text(encoding="utf-8"))
    assert written == {**data, "format_version": FORMAT_VERSION}
    # R5.4: one unit of work, declared once for every variant and offer.
    assert data["unit_of_work"] == UNIT_OF_WORK and data["rounding_rule"] == ROUNDING_RULE
    assert data["pricing"]["offer"] == "h100-test"
    assert data["measured_on"]["gpu_model"] == [H100_RECORDED]

    facts = {fact["variant_id"]: fact for fact in data["variants"]}
    assert list(facts) == ["b1", "b8", "b4"]
    b1, b8, b4 = facts["b1"], facts["b8"], facts["b4"]
    assert (b1["status"], b1["accepted_unique_corpora"], b1["accepted_runs"]) == ("accepted", 1, 10)
    assert b1["median_seconds_per_accepted_corpus"] == 0.45  # a measured fact
    assert (b1["min_seconds"], b1["max_seconds"], b1["timed_warm_runs"]) == (0.40, 0.90, 5)
    # b8 is faster (0.1 s) but runs 2 and 4 of cold and warm failed acceptance (R5.7).
    assert b8["status"] == "not accepted" and b8["median_seconds_per_accepted_corpus"] is None
    assert "cold-2, cold-4, warm-2, warm-4" in b8["reason"] and "R5.7" in b8["reason"]
    assert b4["status"] == "acceptance not recorded" and b4["accepted_unique_corpora"] is None
    assert "R5.5" in b4["reason"]

    offers = {offer["offer_id"]: offer for offer in data["offers"]}
    assert offers["h100-test"]["package_total_usd_minor"] == 65_000  # 65000 x 1 lot
    assert offers["b200-test"]["package_total_usd_minor"] == 198_765  # 1 lot of 2 GPUs (R5.2)
    assert offers["h100-test"]["declared"] and not offers["b200-test"]["declared"]
    costs = {
        (offer_id, cell["variant_id"]): cell["cost_per_accepted_usd_minor"]
        for offer_id, offer in offers.items()
        for cell in offer["variants"]
    }
    # Only b1 has an accepted corpus: one distinct corpus, so the cost is the whole package;
    # and only on the H100 offer, whose GPU accepted it (R2.4, R5.7): the B200 package shows
    # its total and "not measured on this hardware".
    assert costs == {
        ("h100-test", "b1"): 65_000,
        ("h100-test", "b8"): None,
        ("h100-test", "b4"): None,
        ("b200-test", "b1"): None,
        ("b200-test", "b8"): None,
        ("b200-test", "b4"): None,
    }
    _no_cost_without_measured_count(data)

    even = data["break_even"]
    assert even["label"] == "threshold, not a forecast" and even["reference_accepted_results"] == 1
    needed = {
        (p["challenger"], p["reference"]): p["accepted_corpora_needed"] for p in even["pairs"]
    }
    assert offers["b200-test"]["variants"][0]["reason"].startswith("not measured on this")
    assert offers["h100-test"]["attribution"]["basis"] == "gpu model"
    # 198765 / 65000 = 3.06 -> 4 corpora (49691 < 65000). H100 is the only measured reference:
    # nothing was measured on the B200, so there is no B200 cost per result to beat.
    assert needed == {("b200-test", "h100-test"): 4}
    assert even["pairs"][0]["statement"] == (
        "b200-test's package costs less per accepted corpus than h100-test's single measured "
        "corpus (65000 cents) once b200-test delivers 4 accepted corpora; a threshold, not a "
        "forecast"
    )


def test_a_cpu_bundle_has_no_cost_per_corpus_on_gpu_offers(
    tmp_path: Path, offers_file: Path
) -> None:
    _write_bundle(tmp_path, gpu_model=None, gpu_count=0)  # accepted on the CPU (R2.4)
    data = write_bundle_economics(tmp_path, Pricing(offers_file, "h100-test", 7, lots=1))
    for offer in data["offers"]:
        assert offer["package_total_usd_minor"] > 0  # the package total is still shown
        assert not offer["attribution"]["attributable"]
        assert all(c["cost_per_accepted_usd_minor"] is None for c in offer["variants"])
        b1 = offer["variants"][0]
        assert b1["reason"].startswith("not measured on this hardware: accepted on the CPU")
    assert data["break_even"]["pairs"] == []
    assert "no offer's hardware accepted the corpus" in data["break_even"]["reason"]


def test_a_b200_lot_of_two_with_one_gpu_used_is_attributed_and_stated(
    tmp_path: Path, offers_file: Path
) -> None:
    _write_bundle(tmp_path, gpu_model="NVIDIA B200", gpu_count=1)
    data = write_bundle_economics(tmp_path, Pricing(offers_file, "b200", 7, lots=1))
    offers = {offer["offer_id"]: offer for offer in data["offers"]}
    b200, h100 = offers["b200-test"], offers["h100-test"]
    assert b200["variants"][0]["cost_per_accepted_usd_minor"] == 198_765
    assert b200["attribution"]["gpus_used"] == 1 and b200["attribution"]["gpus_billed"] == 2
    assert "2 GPUs billed (1 lot(s) of 2), 1 used" in b200["attribution"]["lot_note"]  # R2.5
    assert h100["variants"][0]["cost_per_accepted_usd_minor"] is None


@pytest.mark.parametrize("repeats", [1, 3])
def test_bundle_totals_and_costs_do_not_scale_with_repeats(
    tmp_path: Path, offers_file: Path, repeats: int
) -> None:
    _write_bundle(tmp_path, repeats=repeats)
    data = write_bundle_economics(tmp_path, Pricing(offers_file, "h100-test", 7, lots=1))
    h100 = data["offers"][0]
    assert h100["package_total_usd_minor"] == 65_000
    assert h100["variants"][0] == {
        "variant_id": "b1",
        "accepted_results": 1,
        "cost_per_accepted_usd_minor": 65_000,
        "reason": None,
    }


def test_bundle_without_pricing_or_without_accepted_variant(
    tmp_path: Path, offers_file: Path
) -> None:
    _write_bundle(tmp_path)
    data = write_bundle_economics(tmp_path, None)
    assert data["pricing"] is None and data["offers"] == [] and data["break_even"]["pairs"] == []
    assert "no pricing section" in data["break_even"]["reason"]
    assert data["variants"][0]["median_seconds_per_accepted_corpus"] == 0.45  # facts remain

    text = (tmp_path / "resultats-bruts.csv").read_text(encoding="utf-8")
    (tmp_path / "resultats-bruts.csv").write_text(text.replace(",true,", ",false,"), "utf-8")
    data = write_bundle_economics(tmp_path, Pricing(offers_file, "h100-test", 30, lots=2))
    assert data["offers"][0]["package_total_usd_minor"] == 500_000  # 250000 x 2 lots
    assert (
        data["break_even"]["pairs"] == []
        and "no variant was accepted" in data["break_even"]["reason"]
    )
    _no_cost_without_measured_count(data)
    assert all(
        c["cost_per_accepted_usd_minor"] is None for o in data["offers"] for c in o["variants"]
    )


def test_bundle_without_raw_csv_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(EconomicsError, match=r"R5\.6: .*resultats-bruts\.csv: cannot read"):
        write_bundle_economics(tmp_path, None)


def test_bundle_with_a_malformed_cell_is_refused_and_nothing_written(tmp_path: Path) -> None:
    _write_bundle(tmp_path)
    csv_path = tmp_path / "resultats-bruts.csv"
    lines = csv_path.read_text(encoding="utf-8").splitlines(keepends=True)
    warm = next(i for i, line in enumerate(lines) if ",warm," in line and ",0.45," in line)
    lines[warm] = lines[warm].replace(",0.45,", ",fast,")
    csv_path.write_text("".join(lines), encoding="utf-8")
    # The fixed schema (R4) is checked on read: the row, its line and the column are named.
    with pytest.raises(ResultsError, match=rf"R4: .*\(line {warm + 1}\), column elapsed_seconds"):
        write_bundle_economics(tmp_path, None)
    assert not (tmp_path / "economics.json").exists()


# --- the notebook -----------------------------------------------------------------------------


def _fake_experiment_module(pricing: Pricing) -> types.ModuleType:
    module = types.ModuleType("gpubench_nb.protocol.experiment")
    module.load_experiment = lambda path: types.SimpleNamespace(
        source=Path(path), pricing=pricing, normalised=lambda: FAKE_DECLARATION
    )
    return module


FAKE_DECLARATION = {"experiment_id": "econ-test", "fixed": {"context": 128}}


def _freeze_fake(bundle: Path) -> None:
    """The protocol lock of FAKE_DECLARATION: 30_economics refuses a bundle without one (R1.3)."""
    from gpubench_nb.protocol.lock import canonical_sha256

    frozen = {"declaration": FAKE_DECLARATION, "fingerprints": {}}
    lock = {**frozen, "sha256": canonical_sha256(frozen)}
    lock["experiment_id"] = FAKE_DECLARATION["experiment_id"]  # a lock names its experiment
    (bundle / "protocol.lock.json").write_text(json.dumps(lock), encoding="utf-8")


def test_economics_notebook_returns_one_table_per_offer(
    tmp_path: Path, offers_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_bundle(tmp_path)
    _freeze_fake(tmp_path)
    pricing = Pricing(offers_file, "h100-test", 7, lots=1)
    monkeypatch.setitem(
        sys.modules, "gpubench_nb.protocol.experiment", _fake_experiment_module(pricing)
    )
    tables = economics_notebook("exp.yaml", str(tmp_path))
    assert list(tables) == ["h100-test", "b200-test"]
    b200 = tables["b200-test"].set_index("variant_id")
    assert b200.loc["b1", "cost_per_accepted_usd_minor"] is None  # accepted on an H100 (R2.4)
    assert b200.loc["b1", "on this hardware"].startswith("not measured on this hardware")
    h100 = tables["h100-test"].set_index("variant_id")
    assert h100.loc["b1", "cost_per_accepted_usd_minor"] == 65_000
    assert b200.loc["b8", "cost_per_accepted_usd_minor"] is None
    assert b200.loc["b1", "break_even_vs_h100-test (threshold, not a forecast)"] == 4
    assert (tmp_path / "economics.json").is_file()


def test_notebook_is_thin_clean_and_runs_its_one_call(
    tmp_path: Path, offers_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notebook = nbformat.read(ROOT / "notebooks" / "30_economics.ipynb", as_version=4)
    nbformat.validate(notebook)
    assert notebook.nbformat == 4 and notebook.metadata["kernelspec"]["name"] == "python3"
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code)
    assert code[0].metadata["tags"] == ["parameters"]
    assert 'experiment = "parameters/demo.yaml"' in code[0].source
    assert 'bundle_dir = "outputs/demo-bow-batch"' in code[0].source
    thick = (ast.FunctionDef, ast.ClassDef, ast.For, ast.While, ast.ListComp, ast.Lambda)
    for cell in code:
        assert not [n for n in ast.walk(ast.parse(cell.source)) if isinstance(n, thick)]

    # Run the cells in-process with papermill-style injected parameters (no kernel: fast).
    _write_bundle(tmp_path)
    _freeze_fake(tmp_path)
    pricing = Pricing(offers_file, "h100-test", 7, lots=1)
    monkeypatch.setitem(
        sys.modules, "gpubench_nb.protocol.experiment", _fake_experiment_module(pricing)
    )
    shown: list[Any] = []
    namespace: dict[str, Any] = {"display": lambda *objs: shown.extend(objs)}
    exec(code[0].source, namespace)
    namespace.update(experiment="exp.yaml", bundle_dir=str(tmp_path))
    for cell in code[1:]:
        exec(cell.source, namespace)
    assert [table["offer_id"].iloc[0] for table in shown] == ["h100-test", "b200-test"]
    assert json.loads((tmp_path / "economics.json").read_text(encoding="utf-8"))["offers"]

"""calcul-forfaits CLI: whole package totals, cost per accepted corpus, one-line errors (R5)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench_nb.economics.calcul_forfaits import main

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


@pytest.fixture
def offers(tmp_path: Path) -> str:
    path = tmp_path / "offers.yaml"
    path.write_text(OFFERS_YAML, encoding="utf-8")
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_b200_seven_days_two_lots_json(offers: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "--offers", offers, "--offer", "b200", "--days", "7", "--lots", "2",
        "--format", "json",
    )  # fmt: skip
    assert (code, err) == (0, "")
    data = json.loads(out)
    # 198765 cents per lot (2 GPUs, R5.2) x 2 lots = 397530 cents (R5.1).
    assert data["offer_id"] == "b200-test" and data["package_total_usd_minor"] == 397_530
    assert data["accepted_results"] is None and data["cost_per_accepted_usd_minor"] is None


def test_gpus_instead_of_lots(offers: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "--offers", offers, "--offer", "b200-test", "--days", "3", "--gpus", "3",
        "--format", "json",
    )  # fmt: skip
    data = json.loads(out)
    # ceil(3 GPUs / 2 per lot) = 2 lots x 90000 = 180000 cents; the note says so.
    assert code == 0 and (data["lots"], data["package_total_usd_minor"]) == (2, 180_000)
    assert "lots = ceil(3 / 2 GPUs per lot) = 2" in data["note"]


def test_h100_thirty_days_with_and_without_accepted_results_csv(
    offers: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--offers", offers, "--offer", "h100-test", "--days", "30", "--lots", "1"]
    code, out, _ = run(capsys, *base, "--accepted-results", "6", "--format", "csv")
    (row,) = list(csv.DictReader(io.StringIO(out)))
    # 250000 / 6 = 41666.67 -> 41667 cents (nearest cent, halves up).
    assert code == 0 and row["package_total_usd_minor"] == "250000"
    assert (row["accepted_results"], row["cost_per_accepted_usd_minor"]) == ("6", "41667")

    for extra in ([], ["--accepted-results", "0"]):
        code, out, _ = run(capsys, *base, *extra, "--format", "csv")
        (row,) = list(csv.DictReader(io.StringIO(out)))
        assert code == 0 and row["package_total_usd_minor"] == "250000"
        assert row["cost_per_accepted_usd_minor"] == ""  # empty, never 0 (R4.3, R5.5)


def test_table_format_shows_dollars_and_an_empty_cost(
    offers: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "--offers", offers, "--offer", "b200", "--days", "7", "--lots", "2")
    assert code == 0
    assert "397530 (USD 3,975.30)" in out
    assert "(empty: no measured accepted result, R5.5)" in out
    code, out, _ = run(
        capsys, "--offers", offers, "--offer", "h100", "--days", "7", "--lots", "1",
        "--accepted-results", "3",
    )  # fmt: skip
    assert "21667 (USD 216.67)" in out  # 65000 / 3 = 21666.67 -> 21667


def test_no_cost_per_result_without_accepted_results(
    offers: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for offer in ("h100-test", "b200-test"):
        for days in ("3", "7", "30"):
            for lots in ("1", "5"):
                code, out, _ = run(
                    capsys, "--offers", offers, "--offer", offer, "--days", days,
                    "--lots", lots, "--format", "json",
                )  # fmt: skip
                data = json.loads(out)
                assert code == 0 and data["package_total_usd_minor"] > 0
                assert data["cost_per_accepted_usd_minor"] is None  # R5.5


BAD_ARGUMENTS = [
    (["--days", "5", "--lots", "1"], "--days", "3, 7, 30"),
    (["--days", "seven", "--lots", "1"], "--days", "3, 7, 30"),
    (["--days", "7", "--lots", "0"], "--lots", ">= 1"),
    (["--days", "7", "--lots", "-2"], "--lots", ">= 1"),
    (["--days", "7", "--lots", "1.5"], "--lots", ">= 1"),
    (["--days", "7", "--gpus", "0"], "--gpus", ">= 1"),
    (["--days", "7", "--lots", "1", "--accepted-results", "-1"], "--accepted-results", ">= 0"),
    (["--days", "7", "--lots", "1", "--accepted-results", "2.5"], "--accepted-results", ">= 0"),
    (["--days", "7", "--lots", "1", "--gpus", "2"], "--gpus", "not allowed with argument --lots"),
    (["--days", "7"], "--lots --gpus", "required"),
    (["--days", "7", "--lots", "1", "--format", "xml"], "--format", "'table', 'csv', 'json'"),
]


@pytest.mark.parametrize(("args", "argument", "valid"), BAD_ARGUMENTS)
def test_bad_arguments_give_one_line_and_exit_2(
    offers: str, capsys: pytest.CaptureFixture[str], args: list[str], argument: str, valid: str
) -> None:
    code, out, err = run(capsys, "--offers", offers, "--offer", "h100-test", *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("calcul-forfaits: error: ")
    assert argument in err and valid in err


def test_unknown_offer_and_bad_table_name_the_argument(
    offers: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "--offers", offers, "--offer", "a100", "--days", "7", "--lots", "1")
    assert code == 2 and err.count("\n") == 1
    said = (
        f"argument --offer: R5.1: unknown offer 'a100' in {offers}; valid values: h100-test, b200"
    )
    assert said in err  # where the offer was looked for: the table's path
    bad = tmp_path / "bad.yaml"
    bad.write_text(OFFERS_YAML.replace("7: 65000", "7: 650.5"), encoding="utf-8")
    code, _, err = run(
        capsys, "--offers", str(bad), "--offer", "h100", "--days", "7", "--lots", "1"
    )
    assert code == 2 and err.count("\n") == 1
    assert "argument --offers:" in err and "package_price_usd_minor.7'" in err
    code, _, err = run(capsys, "--offers", str(tmp_path / "none.yaml"), "--offer", "h100",
                       "--days", "7", "--lots", "1")  # fmt: skip
    assert code == 2 and "argument --offers:" in err and "cannot read" in err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "--accepted-results" in out


def test_runs_as_a_module_with_the_shipped_table() -> None:
    # The issue's own command line, on the shipped example table.
    args = ["--offers", "parameters/offers.yaml", "--offer", "b200", "--days", "7", "--lots", "1"]
    command = [
        sys.executable,
        "-m",
        "gpubench_nb.economics.calcul_forfaits",
        *args,
        "--format",
        "json",
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["offer_id"] == "b200-example" and data["gpus_per_lot"] == 2
    assert data["cost_per_accepted_usd_minor"] is None
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpubench_nb.economics.calcul_forfaits",
            *args[:5],
            "30",
            "--lots",
            "0",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "argument --lots" in done.stderr


def test_a_zero_price_is_refused_as_the_csv_schema_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 11.5: calcul-forfaits and the CSV schema agree that 0 cents is not a price (R5.1).
    from gpubench_nb.protocol.results_schema import check_row, empty_row

    zero = tmp_path / "zero.yaml"
    zero.write_text(OFFERS_YAML.replace("7: 65000", "7: 0"), encoding="utf-8")
    code, out, err = run(
        capsys, "--offers", str(zero), "--offer", "h100-test", "--days", "7", "--lots", "1"
    )
    assert (code, out) == (2, "")
    assert "package_price_usd_minor.7" in err and "0 is not a price" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    row = dict(empty_row(), package_total_usd_minor=0)
    assert [column for column, _ in check_row(row)] == ["package_total_usd_minor"]


def test_placeholder_offer_is_marked_in_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 24 §3: example prices (``placeholder: true``) are never printed as bare prices."""
    example = tmp_path / "example.yaml"
    example.write_text(
        OFFERS_YAML.replace("gpus_per_lot: 1", "gpus_per_lot: 1\n    placeholder: true", 1),
        encoding="utf-8",
    )
    args = ["--offers", str(example), "--offer", "h100", "--days", "7"]
    code, out, _ = run(capsys, *args, "--lots", "1", "--accepted-results", "2")
    assert code == 0
    assert "65000 (USD 650.00 [PLACEHOLDER, not a quote])" in out
    assert "32500 (USD 325.00 [PLACEHOLDER, not a quote])" in out
    assert "remove 'placeholder: true'" in out  # how to enter a real quote
    code, out, _ = run(capsys, *args, "--lots", "1", "--format", "json")
    assert json.loads(out)["placeholder"] is True
    code, out, _ = run(capsys, *args, "--lots", "1", "--format", "csv")
    assert next(csv.DictReader(io.StringIO(out)))["placeholder"] == "True"
    real = tmp_path / "real.yaml"
    real.write_text(OFFERS_YAML, encoding="utf-8")  # no placeholder field: a real quote
    code, out, _ = run(
        capsys, "--offers", str(real), "--offer", "h100", "--days", "7", "--lots", "1"
    )
    assert code == 0 and "PLACEHOLDER" not in out and "(USD 650.00)" in out


def test_a_placeholder_field_that_is_not_a_boolean_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "offers.yaml"
    text = OFFERS_YAML.replace("gpus_per_lot: 1", "gpus_per_lot: 1\n    placeholder: yes please", 1)
    bad.write_text(text, encoding="utf-8")
    code, _, err = run(
        capsys, "--offers", str(bad), "--offer", "h100", "--days", "7", "--lots", "1"
    )
    assert code == 2
    assert "placeholder': expected true or false" in err and "R5.1" in err

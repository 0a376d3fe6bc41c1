"""A bundle made by main before issue 21 still verifies and reports (typed records are tolerant).

``tests/fixtures/main-bundle/`` was made by ``gpubench-nb run`` at main 3d427b6 (the bow
preset on 20 Debian texts, variants b1 and b4, one cold and one warm run each, CPU), and is
kept byte for byte: its manifest seals it (R5.6). Every reader of today must accept it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpubench_nb.cli import main as cli_main
from gpubench_nb.protocol.audit import check_bundle
from gpubench_nb.protocol.bundle import run_dir
from gpubench_nb.protocol.quality import variant_acceptance
from gpubench_nb.protocol.records import (
    MEASURED_PHASES,
    read_economics,
    read_environment,
    read_run,
)
from gpubench_nb.protocol.results import read_rows
from gpubench_nb.report.bundles import load_bundles
from gpubench_nb.report.decision import decision_view_of
from gpubench_nb.report.economics import economics_table

FIXTURE = Path(__file__).parent / "fixtures" / "main-bundle"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """A copy: nothing a test does can touch the committed fixture."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "main-bundle"))


def test_check_bundle_verifies_the_bundle_made_by_main(bundle: Path) -> None:
    assert check_bundle(bundle) == []
    assert cli_main(["check-bundle", str(bundle)]) == 0


def test_every_record_of_main_reads_as_a_typed_record(bundle: Path) -> None:
    rows = read_rows(bundle / "resultats-bruts.csv")
    measured = [r for r in rows if r["phase"] in MEASURED_PHASES]
    assert len(measured) == 4
    for row in measured:
        record = read_run(run_dir(bundle, row["variant_id"], row["phase"], row["run_index"]))
        assert record is not None
        assert (record.variant_id, record.phase, record.run_index) == (
            row["variant_id"],
            row["phase"],
            row["run_index"],
        )
        assert record.elapsed_seconds == pytest.approx(row["elapsed_seconds"])
        assert record.started_utc and record.finished_utc
    environment = read_environment(bundle)
    assert environment.gpu_count == 0 and environment.device == "cpu"
    assert environment.code_revision and environment.code_revision.startswith("git:3d427b6")
    economics = read_economics(bundle)
    assert economics is not None and economics.declared_offer is not None
    assert economics.declared_offer.offer_id == "h100-example"


def test_the_rules_agree_on_the_bundle_made_by_main(bundle: Path) -> None:
    """The verdict economics.json recorded is the one rule's verdict over the CSV, and the
    decision table shows it; a CPU bundle earns no cost on an H100 offer (R5.7)."""
    rows = read_rows(bundle / "resultats-bruts.csv")
    rule = {v: a.verdict for v, a in variant_acceptance(rows).items()}
    loaded = load_bundles([bundle])
    assert {v.variant_id: v.verdict for v in read_economics(bundle).variants} == rule
    options = decision_view_of(loaded).options
    assert {o.variant_id: o.accepted for o in options} == rule
    assert all(o.cost_per_accepted_usd_minor is None for o in options)
    table = economics_table(loaded)
    assert table is not None
    h100 = table.loc[(loaded[0].label, "h100-example")]
    assert h100["package total (USD)"] == "USD 420.00"
    assert h100["measured on this hardware?"].startswith("not measured on this hardware")


@pytest.mark.slow
def test_report_renders_from_the_bundle_made_by_main(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert cli_main(["report", str(bundle), "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert 'id="decision-table"' in text and "main-bow-fixture" in text
    # the options as a frontier: the plot with its alt text, the table with answers changed
    assert 'alt="The options as a frontier: each bundle and variant placed by' in text
    assert 'id="frontier-table"' in text and "<td>0 of 20 vs b1</td>" in text
    assert check_bundle(bundle) == []  # reading never writes into the bundle

"""Typed records (issue 21): validated once when read, written by one writer, Phase as str."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpubench_nb.errors import BundleError
from gpubench_nb.protocol.clock import utc_now, utc_text
from gpubench_nb.protocol.records import (
    FORMAT_VERSION,
    MEASURED_PHASES,
    PHASES,
    EconomicsRecord,
    EnvironmentRecord,
    Phase,
    RunRecord,
    read_economics,
    read_environment,
    read_run,
    write_economics,
    write_environment,
    write_run,
)
from gpubench_nb.protocol.results import format_row
from gpubench_nb.protocol.results_schema import empty_row

RUN = {
    "experiment_id": "e",
    "variant_id": "b4",
    "phase": "warm",
    "run_index": 2,
    "pid": 4242,
    "status": "finished",
    "started_utc": "2026-12-02T10:00:00Z",
    "finished_utc": "2026-12-02T10:00:30Z",
    "elapsed_seconds": 0.5,
    "load_seconds": 1,
    "error": None,
    "precision": "fp32",
    "batch": 4,
    "context": 128,
    "environment": {"gpu_model": None, "gpu_count": 0, "device": "cpu"},
    "backend": {"name": "bow", "padding": "right"},  # a key the record does not type: kept
}


def test_phase_is_a_str_written_as_its_value() -> None:
    assert Phase.COLD == "cold" and f"{Phase.WARM}" == "warm" and str(Phase.LOAD) == "load"
    assert json.dumps({"phase": Phase.COLD}) == '{"phase": "cold"}'
    assert PHASES == ("load", "cold", "warm") and MEASURED_PHASES == ("cold", "warm")
    # A CSV row with the enum is byte-identical to one with the plain text (R4).
    as_text = format_row({**empty_row(), "phase": "warm", "run_index": 1})
    assert format_row({**empty_row(), "phase": Phase.WARM, "run_index": 1}) == as_text


def test_run_record_round_trips_and_keeps_unknown_keys(tmp_path: Path) -> None:
    record = write_run(tmp_path, RUN)
    assert (record.phase, record.run_index, record.load_seconds) == (Phase.WARM, 2, 1.0)
    assert read_run(tmp_path) == record
    written = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert written == {**RUN, "format_version": FORMAT_VERSION}  # unknown "backend" kept
    assert read_run(tmp_path / "elsewhere") is None  # no record: a kernel that died first


@pytest.mark.parametrize(
    ("change", "key", "problem"),
    [
        ({"run_index": "2"}, "'run_index'", "expected an integer, got '2'"),
        ({"run_index": True}, "'run_index'", "expected an integer, got True"),
        ({"phase": "hot"}, "'phase'", "must be one of load, cold, warm, got 'hot'"),
        ({"elapsed_seconds": "0.5"}, "'elapsed_seconds'", "expected a number"),
        ({"environment": {"gpu_uuids": "GPU-1"}}, "'environment.gpu_uuids'", "expected a list"),
    ],
)
def test_a_bad_run_record_names_the_file_and_the_key(
    tmp_path: Path, change: dict, key: str, problem: str
) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({**RUN, **change}), encoding="utf-8")
    with pytest.raises(BundleError) as caught:
        read_run(tmp_path)
    message = str(caught.value)
    assert str(path) in message and key in message and problem in message
    assert "fix:" in message
    with pytest.raises(BundleError, match=key):  # the writer refuses it too: nothing written
        write_run(tmp_path / "new", {**RUN, **change})
    assert not (tmp_path / "new" / "run.json").exists()


def test_unreadable_json_is_a_bundle_error(tmp_path: Path) -> None:
    (tmp_path / "environment.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(BundleError, match=r"environment\.json: unreadable JSON"):
        read_environment(tmp_path)


def test_environment_record_and_an_absent_file(tmp_path: Path) -> None:
    assert read_environment(tmp_path) == EnvironmentRecord()  # no environment.json
    data = {"hostname": "node", "gpu_uuids": ["GPU-1"], "gpu_count": 1, "cpu_model": "x"}
    written = write_environment(tmp_path, data)
    assert read_environment(tmp_path) == written
    assert (written.hostname, written.gpu_uuids) == ("node", ("GPU-1",))
    assert written.to_dict() == {**data, "format_version": FORMAT_VERSION}


ECONOMICS = {
    "unit_of_work": "one corpus",
    "note": "n",
    "variants": [
        {"variant_id": "b1", "status": "accepted", "accepted": True, "reason": None},
        {"variant_id": "b8", "status": "acceptance not recorded", "accepted": False},
    ],
    "offers": [
        {
            "offer_id": "h100",
            "gpu_model": "NVIDIA H100 80GB",
            "gpus_per_lot": 1,
            "days": 7,
            "lots": 1,
            "package_total_usd_minor": 42000,
            "declared": True,
            "variants": [
                {"variant_id": "b1", "accepted_results": 1, "cost_per_accepted_usd_minor": 42000}
            ],
        }
    ],
    "break_even": {"pairs": [], "reason": "no other offer"},
}


def test_economics_record_reads_what_the_report_needs(tmp_path: Path) -> None:
    record = write_economics(tmp_path, ECONOMICS)
    assert read_economics(tmp_path) == record
    assert [v.verdict for v in record.variants] == [True, None]  # unknown is not "no" (R4.3)
    offer = record.declared_offer
    assert offer is not None and offer.attribution is None  # written before attribution
    assert offer.cell("b1").cost_per_accepted_usd_minor == 42000
    assert record.break_even_reason == "no other offer"
    assert read_economics(tmp_path / "none") is None


def test_a_bad_economics_cell_names_its_key_path() -> None:
    bad = json.loads(json.dumps(ECONOMICS))
    bad["offers"][0]["variants"][0]["cost_per_accepted_usd_minor"] = 420.5
    with pytest.raises(BundleError) as caught:
        EconomicsRecord.from_dict(bad, "b/economics.json")
    assert "b/economics.json: key 'offers[0].variants[0].cost_per_accepted_usd_minor'" in str(
        caught.value
    )
    assert "R5.6" in str(caught.value)


def test_run_record_requires_an_object() -> None:
    with pytest.raises(BundleError, match="expected a JSON object, got list"):
        RunRecord.from_dict([], "x/run.json")


def test_clock_writes_utc_to_the_second() -> None:
    from datetime import datetime, timedelta, timezone

    paris = timezone(timedelta(hours=1))
    assert utc_text(datetime(2026, 12, 4, 20, 0, 5, tzinfo=paris)) == "2026-12-04T19:00:05Z"
    assert utc_text(datetime(2026, 12, 4, 19, 0, 5)) == "2026-12-04T19:00:05Z"  # naive = UTC
    assert len(utc_now()) == 20 and utc_now().endswith("Z")


def test_issue_23_run_and_environment_fields_are_typed(tmp_path: Path) -> None:
    """import/fingerprint/context seconds, residency, the GPU telemetry of the pass and the
    effective CUDA_MODULE_LOADING are read as typed fields; a record without them (made before
    issue 23) still reads, with None."""
    data = {
        "variant_id": "b1",
        "phase": "cold",
        "run_index": 1,
        "import_seconds": 8.3,
        "fingerprint_seconds": 0.2,
        "cuda_context_seconds": 0.4,
        "weight_residency_at_load_start": {"observable": True, "resident_fraction": 1.0},
        "gpu_telemetry": {
            "observable": True,
            "energy_joules": 12.5,
            "throttled": False,
            "low_clock": True,
            "flags": ["low clock: median SM clock 1507 MHz is below 85% of the maximum 1980 MHz"],
        },
        "environment": {"numerics": {"cuda_module_loading": {"effective": "LAZY"}}},
    }
    run = RunRecord.from_dict(data, "run.json")
    assert (run.import_seconds, run.fingerprint_seconds, run.cuda_context_seconds) == (
        8.3,
        0.2,
        0.4,
    )
    assert run.weight_residency_at_load_start["resident_fraction"] == 1.0
    assert run.gpu_telemetry.energy_joules == 12.5 and run.gpu_telemetry.low_clock is True
    assert run.gpu_telemetry.flags[0].startswith("low clock")
    assert EnvironmentRecord.from_dict(data["environment"]).cuda_module_loading == "LAZY"
    unobserved = dict(data, gpu_telemetry={"observable": False, "energy_joules": "not observable"})
    assert RunRecord.from_dict(unobserved).gpu_telemetry.joules is None
    old = RunRecord.from_dict({"variant_id": "b1", "phase": "warm", "run_index": 2})
    assert old.gpu_telemetry is None and old.import_seconds is None
    with pytest.raises(BundleError, match="gpu_telemetry.flags"):
        RunRecord.from_dict(dict(data, gpu_telemetry={"flags": "throttled"}), "run.json")

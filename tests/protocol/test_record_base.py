"""The record base: annotations are the schema, format_version, the upgrade map (R5.6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpubench_nb.errors import BundleError
from gpubench_nb.protocol.records import (
    FORMAT_VERSION,
    UPGRADES,
    EconomicsRecord,
    GpuTelemetry,
    Phase,
    RunRecord,
    read_economics,
    read_json,
    read_run,
    write_run,
)


def test_a_record_built_in_code_is_written_whole_and_reads_back_equal(tmp_path: Path) -> None:
    built = RunRecord(
        variant_id="b1",
        phase=Phase.COLD,
        run_index=1,
        elapsed_seconds=0.25,
        gpu_telemetry=GpuTelemetry(observable=True, flags=("low clock",), energy_joules=3.0),
        generation_config_folder_overridden=("top_p",),
    )
    written = write_run(tmp_path, built)
    on_disk = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert on_disk["format_version"] == FORMAT_VERSION and on_disk["phase"] == "cold"
    assert on_disk["error"] is None and "format_version" not in on_disk["gpu_telemetry"]
    assert on_disk["generation_config_folder_overridden"] == ["top_p"]
    assert read_run(tmp_path) == written == built
    assert written.gpu_telemetry.joules == 3.0


def test_a_version_1_economics_file_is_upgraded_through_the_map(tmp_path: Path) -> None:
    assert (EconomicsRecord.NAME, 1) in UPGRADES
    old = {"variants": [{"variant_id": "b1", "accepted": True}, {"variant_id": "b2"}]}
    (tmp_path / "economics.json").write_text(json.dumps(old), encoding="utf-8")
    record = read_economics(tmp_path)
    assert [v.status for v in record.variants] == ["accepted", "not accepted"]
    assert "status" not in old["variants"][0]  # the caller's object is left as it was


def test_a_newer_format_version_is_refused_naming_the_file() -> None:
    with pytest.raises(BundleError, match=r"x/run\.json: key 'format_version'"):
        RunRecord.from_dict({"format_version": FORMAT_VERSION + 1}, "x/run.json")


def test_a_required_field_names_its_key_path() -> None:
    with pytest.raises(BundleError, match=r"key 'offers\[0\]\.offer_id': missing"):
        EconomicsRecord.from_dict({"offers": [{"gpu_model": "H100"}]}, "economics.json")
    with pytest.raises(BundleError, match=r"key 'environment\.slurm\.job_id': must not be empty"):
        RunRecord.from_dict({"environment": {"slurm": {"job_id": None}}}, "run.json")


def test_read_json_is_the_one_reader(tmp_path: Path) -> None:
    assert read_json(tmp_path / "absent.json") is None
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(BundleError, match=r"bad\.json: unreadable JSON"):
        read_json(bad)
    assert read_json(bad, error=None) is None  # a cache the caller rebuilds

"""One format_version rule for every file the tool writes, and no key given twice (R5.6): each
case is a forger's edit of a finished bundle under a rewritten manifest, which check-bundle must
refuse; every file of a bundle made before versions were stamped still reads, as version 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpubench_nb.cli import main
from gpubench_nb.economics.reprice import verify_bundle
from gpubench_nb.errors import BundleError, ProtocolError
from gpubench_nb.protocol import bundle as layout
from gpubench_nb.protocol.acceptance import AcceptanceReport
from gpubench_nb.protocol.lock import LockRecord, lock_problems, read_lock
from gpubench_nb.protocol.records import (
    FORMAT_VERSION,
    EnvironmentRecord,
    ScheduleRecord,
    read_json,
)
from tests.support.sealed import MAIN_BUNDLE, resealed

B1_COLD = Path("runs/b1/cold-1")


def _versioned(name: str, version: object):
    def edit(bundle: Path) -> None:
        path = bundle / name
        data = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps({**data, "format_version": version}), encoding="utf-8")

    return edit


@pytest.mark.parametrize("version", [-1, 0, True, 2.0, "2", FORMAT_VERSION + 1])
def test_a_run_json_whose_version_is_not_a_known_one_is_refused(tmp_path, capsys, version):
    bundle = resealed(tmp_path, _versioned(str(B1_COLD / layout.RUN_NAME), version))
    problems = verify_bundle(bundle)
    assert any(
        "run.json: key 'format_version'" in p and json.dumps(version) in p for p in problems
    ), problems
    assert main(["check-bundle", str(bundle)]) == 1
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "name",
    [layout.SCHEDULE_NAME, str(B1_COLD / layout.CHECKS_NAME), layout.ENVIRONMENT_NAME],
)
def test_a_future_version_of_any_file_is_refused(tmp_path, name):
    problems = verify_bundle(resealed(tmp_path, _versioned(name, FORMAT_VERSION + 1)))
    assert any(
        f"{Path(name).name}: key 'format_version'" in p and "newer gpubench-nb" in p
        for p in problems
    ), problems


def test_a_lock_of_a_future_version_is_refused(tmp_path):
    bundle = resealed(tmp_path, _versioned(layout.LOCK_NAME, FORMAT_VERSION + 1))
    problems = verify_bundle(bundle)
    assert problems[-1].startswith(f"{layout.LOCK_NAME}:") and "format_version" in problems[-1]
    with pytest.raises(ProtocolError, match="format_version"):
        read_lock(bundle)


def test_a_run_json_that_gives_a_key_twice_is_refused_naming_the_file_and_key(tmp_path, capsys):
    def twice(bundle: Path) -> None:
        path = bundle / B1_COLD / layout.RUN_NAME
        data = json.loads(path.read_text(encoding="utf-8"))
        honest = data.pop("elapsed_seconds")
        text = json.dumps(data)[:-1] + f', "elapsed_seconds": {honest * 10}'
        path.write_text(text + f', "elapsed_seconds": {honest}}}', encoding="utf-8")

    bundle = resealed(tmp_path, twice)
    problems = verify_bundle(bundle)
    assert any(
        str(B1_COLD / layout.RUN_NAME) in p and "'elapsed_seconds' is given twice" in p
        for p in problems
    ), problems
    assert main(["check-bundle", str(bundle)]) == 1
    assert "Traceback" not in capsys.readouterr().err


def test_json_with_a_key_twice_at_any_depth_is_refused(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"a": {"b": 1, "b": 2}}', encoding="utf-8")
    with pytest.raises(BundleError, match=r"x\.json: .*'b' is given twice"):
        read_json(path)
    assert read_json(path, error=None) is None


def test_the_files_of_a_bundle_made_before_versions_read_as_version_1():
    """The kept fixture predates format_version in its lock, schedule and checks: each is read
    through its record, as it was written (the lock's checksums still hold)."""
    raw = json.loads((MAIN_BUNDLE / layout.LOCK_NAME).read_text(encoding="utf-8"))
    assert "format_version" not in raw
    lock = read_lock(MAIN_BUNDLE)
    assert lock.to_dict() == raw and lock_problems(lock) == []
    assert lock.corpus_revision == raw["fingerprints"]["corpus_revision"]
    schedule = ScheduleRecord.read(MAIN_BUNDLE)
    assert schedule is not None and schedule.runs_done == len(schedule.runs) == 4
    checks = AcceptanceReport.read(MAIN_BUNDLE / B1_COLD)
    assert checks is not None and checks.corpus_accepted in (True, False)
    assert "format_version" not in json.loads((MAIN_BUNDLE / B1_COLD / "checks.json").read_text())


def test_a_lock_written_today_carries_the_version_under_its_seal(tmp_path):
    from gpubench_nb.protocol.experiment import load_experiment
    from gpubench_nb.protocol.lock import freeze

    experiment = load_experiment(MAIN_BUNDLE / "protocol" / "experiment.yaml")
    lock = freeze(tmp_path, experiment, {"corpus_revision": "abc"})
    on_disk = json.loads((tmp_path / layout.LOCK_NAME).read_text(encoding="utf-8"))
    assert on_disk["format_version"] == FORMAT_VERSION and lock_problems(lock) == []
    on_disk["format_version"] = 1  # an edit the seal sees
    assert lock_problems(LockRecord.from_dict(on_disk))


def test_the_environment_record_declares_every_key_the_probe_writes():
    from gpubench_nb.engine.environment import capture_environment

    written = set(capture_environment("cpu"))
    declared = {name for name, *_ in EnvironmentRecord._declared()}
    assert written <= declared, sorted(written - declared)
    env = EnvironmentRecord.from_dict(capture_environment("cpu"))
    assert env.device == "cpu" and env.driver_version is None and env.python_version
    assert env.to_dict()["visible_gpu_count"] == env.visible_gpu_count  # read, not guessed

"""`gpubench-nb run` against edits, concurrency, re-runs and bad prices (issue 11: R1.3, R5.6).

The stage notebooks are run in this process (their library calls, as papermill would run them
in a fresh kernel) so that the orchestrator's guards are tested fast; the kernel path itself is
tested end to end in test_pipeline.py. Every test asserts through the files of the bundle.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpubench_nb.cli import main
from gpubench_nb.errors import BundleError, EconomicsError, ProtocolError
from gpubench_nb.pipeline import guard
from gpubench_nb.pipeline import orchestrate as orch
from gpubench_nb.protocol.audit import check_bundle
from gpubench_nb.protocol.bundle import manifest_entries, verify_manifest, write_manifest
from gpubench_nb.protocol.results import read_rows
from gpubench_nb.protocol.writer import holder_path, lock_path
from tests.support.experiments import make_experiment
from tests.support.in_process import fake_report
from tests.support.in_process import run_step as in_process

EXPERIMENT_ID = "guarded"


@pytest.fixture(autouse=True)
def _in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(orch, "execute_notebook", in_process)
    monkeypatch.setattr(orch, "_render_report", fake_report)
    monkeypatch.delenv("GPUBENCH_FAULT", raising=False)
    monkeypatch.delenv("GPUBENCH_WRITER_TOKEN", raising=False)


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> tuple[Path, Path]:
    """One finished, sealed bundle (2 variants x 2 repeats), copied by each test that edits."""
    root = tmp_path_factory.mktemp("guard")
    experiment = make_experiment(root / "exp", data_dir, EXPERIMENT_ID, repeats=1)
    mp = pytest.MonkeyPatch()
    mp.setattr(orch, "execute_notebook", in_process)
    mp.setattr(orch, "_render_report", fake_report)
    try:
        result = orch.run_experiment(experiment, output_dir=root / "outputs")
    finally:
        mp.undo()
    assert check_bundle(result.bundle_dir) == []
    return experiment, result.bundle_dir


def copy_of(sealed: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    experiment, bundle = sealed
    target = tmp_path / "outputs" / bundle.name
    shutil.copytree(bundle, target)
    return experiment, target


def snapshot(bundle: Path) -> dict[str, str]:
    return {**manifest_entries(bundle), "MANIFEST": (bundle / "MANIFEST.sha256").read_text()}


def with_yaml(experiment: Path, name: str, edit: Any) -> Path:
    declaration = yaml.safe_load(experiment.read_text(encoding="utf-8"))
    edit(declaration)
    path = experiment.with_name(name)
    path.write_text(yaml.safe_dump(declaration, sort_keys=False), encoding="utf-8")
    return path


# --- 11.2: never re-seal what was tampered with ---------------------------------------------


def test_rerun_over_a_forged_elapsed_time_is_refused_and_check_bundle_still_fails(
    sealed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    experiment, bundle = copy_of(sealed, tmp_path)
    csv_path = bundle / "resultats-bruts.csv"
    rows = csv_path.read_text(encoding="utf-8").splitlines()
    header = rows[0].split(",")
    column = header.index("elapsed_seconds")
    cells = rows[2].split(",")
    cells[column] = "0.001"  # the forged value
    rows[2] = ",".join(cells)
    csv_path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    forged = snapshot(bundle)
    code = main(["run", str(experiment), "--output-dir", str(bundle.parent)])
    err = capsys.readouterr().err
    assert code == 2
    assert "R5.6" in err and "resultats-bruts.csv: changed" in err and "--fresh" in err
    assert "Traceback" not in err
    assert snapshot(bundle) == forged  # nothing rewritten, the manifest not re-sealed
    assert any("resultats-bruts.csv: changed" in p for p in check_bundle(bundle))


def test_fresh_discards_the_tampered_bundle_explicitly(
    sealed: tuple[Path, Path], tmp_path: Path
) -> None:
    experiment, bundle = copy_of(sealed, tmp_path)
    (bundle / "economics.json").write_text("{}", encoding="utf-8")
    with pytest.raises(BundleError, match="economics.json: changed"):
        orch.run_experiment(experiment, output_dir=bundle.parent)
    result = orch.run_experiment(experiment, output_dir=bundle.parent, fresh=True)
    assert check_bundle(result.bundle_dir) == []
    aside = [p.name for p in bundle.parent.iterdir() if ".discarded-" in p.name]
    assert len(aside) == 1  # set aside, not deleted


def test_added_dot_file_is_in_the_manifest_check(sealed: tuple[Path, Path], tmp_path: Path) -> None:
    experiment, bundle = copy_of(sealed, tmp_path)
    (bundle / "runs" / ".hidden-extra.jsonl").write_text("{}\n", encoding="utf-8")
    assert "runs/.hidden-extra.jsonl: present but not in the manifest" in check_bundle(bundle)[0]
    with pytest.raises(BundleError, match="hidden-extra"):
        orch.run_experiment(experiment, output_dir=bundle.parent)


def test_symlink_inside_a_bundle_is_reported_and_never_sealed(
    sealed: tuple[Path, Path], tmp_path: Path
) -> None:
    _, bundle = copy_of(sealed, tmp_path)
    outside = tmp_path / "elsewhere.csv"
    outside.write_text("x\n", encoding="utf-8")
    (bundle / "runs" / "link.csv").symlink_to(outside)
    problems = verify_manifest(bundle)
    assert any("runs/link.csv: not a regular file" in p for p in problems), problems
    with pytest.raises(BundleError, match="not regular files inside the bundle: runs/link.csv"):
        write_manifest(bundle)


# --- 11.3: one writer per bundle --------------------------------------------------------------

HOLD = """
import sys
from gpubench_nb.protocol.writer import bundle_writer
with bundle_writer(sys.argv[1], "test holder"):
    print("held", flush=True)
    sys.stdin.read()
"""


def _holder(bundle: Path) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(bundle)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


def _kill(process: subprocess.Popen) -> None:
    """kill -9: the holder gets no chance to clean up (its sidecar stays, stale)."""
    process.send_signal(signal.SIGKILL)
    process.wait()
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            pipe.close()


def test_second_writer_is_refused_with_the_holders_pid_and_host(
    sealed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    experiment, _ = sealed
    outputs = tmp_path / "outputs"
    holder = _holder(outputs / EXPERIMENT_ID)
    try:
        code = main(["run", str(experiment), "--output-dir", str(outputs)])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err
        assert f"PID {holder.pid} on host {socket.gethostname()!r}" in err
        assert not (outputs / EXPERIMENT_ID).exists()  # refused before anything was written
    finally:
        _kill(holder)
    # The holder was killed (kill -9): its OS lock went with it; its sidecar is stale and must
    # not block. The next writer runs, and leaves no sidecar behind.
    assert json.loads(holder_path(outputs / EXPERIMENT_ID).read_text())["pid"] == holder.pid
    result = orch.run_experiment(experiment, output_dir=outputs)
    assert check_bundle(result.bundle_dir) == []
    assert not holder_path(result.bundle_dir).exists()
    assert lock_path(result.bundle_dir).parent == outputs  # beside the bundle, not inside


def test_fresh_never_sets_aside_a_bundle_another_writer_holds(
    sealed: tuple[Path, Path], tmp_path: Path
) -> None:
    experiment, bundle = copy_of(sealed, tmp_path)
    before = snapshot(bundle)
    holder = _holder(bundle)
    try:
        with pytest.raises(BundleError, match=f"PID {holder.pid}"):
            orch.run_experiment(experiment, output_dir=bundle.parent, fresh=True)
    finally:
        _kill(holder)
    assert snapshot(bundle) == before
    assert [p.name for p in bundle.parent.iterdir() if "discarded" in p.name] == []


def test_a_kernel_step_alone_is_refused_while_a_run_holds_the_bundle(
    sealed: tuple[Path, Path], tmp_path: Path
) -> None:
    from gpubench_nb.steps.quality import step as quality_step

    experiment, bundle = copy_of(sealed, tmp_path)
    (bundle / "MANIFEST.sha256").unlink()  # an unfinished bundle, being written by a run
    holder = _holder(bundle)
    try:
        with pytest.raises(BundleError, match=f"PID {holder.pid}"):
            quality_step(experiment, bundle)
    finally:
        _kill(holder)


def test_a_kernel_step_alone_never_writes_into_a_finished_bundle(
    sealed: tuple[Path, Path], tmp_path: Path
) -> None:
    from gpubench_nb.economics.reprice import economics_notebook

    experiment, bundle = copy_of(sealed, tmp_path)
    before = snapshot(bundle)
    with pytest.raises(BundleError, match="finished bundle"):
        economics_notebook(experiment, bundle)
    assert snapshot(bundle) == before


def test_output_dir_inside_a_bundle_is_refused(sealed: tuple[Path, Path]) -> None:
    experiment, bundle = sealed
    with pytest.raises(BundleError, match="is (inside )?the (finished )?bundle"):
        orch.run_experiment(experiment, output_dir=bundle / "runs")
    with pytest.raises(BundleError, match="is (inside )?the (finished )?bundle"):
        orch.run_experiment(experiment, output_dir=bundle)
    assert not (bundle / "runs" / EXPERIMENT_ID).exists()


def test_a_lone_copied_lock_does_not_make_its_folder_a_bundle(tmp_path: Path) -> None:
    """The manual route of a campaign copies protocol.lock.json beside the experiment files
    (`run --protocol`): outputs/ below that folder is not "inside a bundle"; a folder that also
    holds what freezing writes (expected IDs, the kept protocol) is one (R5.6)."""
    from gpubench_nb.protocol.bundle import bundle_holding

    box = tmp_path / "box"
    box.mkdir()
    (box / "protocol.lock.json").write_text("{}", encoding="utf-8")
    assert bundle_holding(box / "outputs" / EXPERIMENT_ID) is None
    (box / "expected_ids.txt").write_text("a\n", encoding="utf-8")
    assert bundle_holding(box / "outputs" / EXPERIMENT_ID) == box.resolve()


# --- 11.5: failures are transactional ---------------------------------------------------------


def _zero_price_offers(tmp_path: Path, repo_root: Path) -> Path:
    text = (repo_root / "parameters" / "offers.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    data["offers"][0]["package_price_usd_minor"][30] = 0
    path = tmp_path / "zero-offers.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_repricing_with_a_zero_price_is_refused_and_leaves_the_bundle_untouched(
    sealed: tuple[Path, Path], tmp_path: Path, repo_root: Path, capsys: pytest.CaptureFixture
) -> None:
    experiment, bundle = copy_of(sealed, tmp_path)
    offers = _zero_price_offers(tmp_path, repo_root)

    def edit(d: dict) -> None:
        d["pricing"].update(offers=str(offers), days=30)

    repriced = with_yaml(experiment, "zero.yaml", edit)
    before = snapshot(bundle)
    code = main(["run", str(repriced), "--output-dir", str(bundle.parent)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "package_price_usd_minor.30" in err and "0 is not a price" in err
    assert snapshot(bundle) == before and check_bundle(bundle) == []


def test_a_failure_while_repricing_restores_the_finished_bundle(
    sealed: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    experiment, bundle = copy_of(sealed, tmp_path)
    repriced = with_yaml(experiment, "thirty.yaml", lambda d: d["pricing"].update(days=30))
    before = snapshot(bundle)

    def failing(name: str, output: Path, parameters: dict, timeout: int) -> None:
        in_process(name, output, parameters, timeout)  # it writes, then something fails
        if name == "30_economics.ipynb":
            raise EconomicsError("simulated failure after the economics step wrote its files")

    monkeypatch.setattr(orch, "execute_notebook", failing)
    with pytest.raises(EconomicsError, match="was left as it was"):
        orch.run_experiment(repriced, output_dir=bundle.parent)
    assert snapshot(bundle) == before and check_bundle(bundle) == []
    assert sorted(p.name for p in bundle.parent.iterdir() if not p.name.startswith(".")) == [
        bundle.name
    ]
    monkeypatch.setattr(orch, "execute_notebook", in_process)
    orch.run_experiment(repriced, output_dir=bundle.parent)  # the same re-pricing, now whole
    assert {r["duration_days"] for r in read_rows(bundle / "resultats-bruts.csv")} == {30}
    assert check_bundle(bundle) == []


def test_an_interrupted_repricing_is_rolled_back_on_the_next_run(
    sealed: tuple[Path, Path], tmp_path: Path
) -> None:
    experiment, bundle = copy_of(sealed, tmp_path)
    before = snapshot(bundle)
    # As a kill -9 mid-re-pricing leaves it: the sealed copy beside, the bundle half rewritten.
    shutil.copytree(bundle, guard.backup_path(bundle))
    (bundle / "economics.json").write_text("{half", encoding="utf-8")
    (bundle / "MANIFEST.sha256").unlink()
    orch.run_experiment(experiment, output_dir=bundle.parent)
    assert not guard.backup_path(bundle).exists()
    assert check_bundle(bundle) == []
    assert manifest_entries(bundle)["economics.json"] == before["economics.json"]


# --- 11.1: the frozen protocol, enforced in every kernel --------------------------------------


def test_yaml_edited_mid_run_stops_the_run_and_no_row_says_otherwise(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    experiment = make_experiment(tmp_path / "exp", data_dir, "edited", repeats=1)
    text = experiment.read_text(encoding="utf-8")
    measured: list[str] = []

    def editing(name: str, output: Path, parameters: dict, timeout: int) -> None:
        if name == "10_measure.ipynb":
            measured.append(parameters["variant_id"])
            if len(measured) == 2:  # the user edits the YAML while the schedule runs
                experiment.write_text(text.replace("context: 64", "context: 8"), "utf-8")
        in_process(name, output, parameters, timeout)

    monkeypatch.setattr(orch, "execute_notebook", editing)
    with pytest.raises(ProtocolError, match=r"fixed\.context: 64 -> 8"):
        orch.run_experiment(experiment, output_dir=tmp_path / "outputs")
    bundle = tmp_path / "outputs" / "edited"
    rows = read_rows(bundle / "resultats-bruts.csv")
    assert {r["context"] for r in rows} == {64} and len(rows) == 2  # the first run only
    experiment.write_text(text, encoding="utf-8")  # back as frozen: the run resumes
    monkeypatch.setattr(orch, "execute_notebook", in_process)
    result = orch.run_experiment(experiment, output_dir=tmp_path / "outputs")
    assert {r["context"] for r in result.rows} == {64} and len(result.rows) == 6
    assert check_bundle(bundle) == []


def test_rows_carry_the_settings_the_run_applied_not_the_declaration(
    sealed: tuple[Path, Path],
) -> None:
    from gpubench_nb.pipeline.observations import rows_for_run
    from gpubench_nb.pipeline.schedule import draw_schedule
    from gpubench_nb.protocol.experiment import load_experiment
    from gpubench_nb.protocol.records import RunRecord

    experiment = load_experiment(sealed[0])
    run = next(r for r in draw_schedule(experiment) if r.phase == "cold")
    record = RunRecord(precision="fp32", batch=1, context=8, warmup_iterations=0)
    rows = rows_for_run(experiment, {}, run, record)
    assert {r["context"] for r in rows} == {8}  # as run.json says it ran, not 64 as declared
    empty = rows_for_run(experiment, {}, run, None, "kernel run failed: DeadKernelError")
    assert {(r["precision"], r["batch"], r["context"]) for r in empty} == {(None, None, None)}


@pytest.mark.parametrize("step", ["00_environment", "20_quality", "30_economics"])
def test_every_stage_kernel_refuses_an_edited_declaration(
    sealed: tuple[Path, Path], tmp_path: Path, step: str
) -> None:
    from gpubench_nb.economics.reprice import economics_notebook
    from gpubench_nb.steps.environment import step as environment_step
    from gpubench_nb.steps.quality import step as quality_step

    experiment, bundle = copy_of(sealed, tmp_path)
    (bundle / "MANIFEST.sha256").unlink()  # an unfinished bundle: the steps may write into it
    before = manifest_entries(bundle)
    edited = with_yaml(experiment, "ctx8.yaml", lambda d: d["fixed"].update(context=8))
    call = {
        "00_environment": environment_step,
        "20_quality": quality_step,
        "30_economics": economics_notebook,
    }[step]
    with pytest.raises(ProtocolError, match=rf"{step} refused(.|\n)*fixed\.context: 64 -> 8"):
        call(edited, bundle)
    assert manifest_entries(bundle) == before  # refused before anything was written
    repriced = with_yaml(experiment, "days30.yaml", lambda d: d["pricing"].update(days=30))
    call(repriced, bundle)  # pricing is not frozen (README: re-pricing a finished bundle)


def test_check_bundle_catches_a_forged_row_even_under_a_rewritten_manifest(
    sealed: tuple[Path, Path], tmp_path: Path
) -> None:
    from gpubench_nb.protocol.results import write_rows_atomic

    _, bundle = copy_of(sealed, tmp_path)
    csv_path = bundle / "resultats-bruts.csv"
    rows = read_rows(csv_path)
    warm = next(i for i, r in enumerate(rows) if r["phase"] == "warm")
    rows[warm]["elapsed_seconds"] = 0.001
    rows[0]["context"] = 8
    write_rows_atomic(csv_path, rows)
    write_manifest(bundle)  # as a forger re-sealing by hand would
    problems = check_bundle(bundle)
    assert any("elapsed_seconds=0.001 but run.json recorded" in p for p in problems), problems
    assert any("context=8 but the run applied 64" in p for p in problems), problems


def test_a_rerun_that_adds_runs_verifies_then_unseals_then_seals_again(
    tmp_path: Path, data_dir: Path
) -> None:
    experiment = make_experiment(tmp_path / "exp", data_dir, "grow", repeats=1)
    outputs = tmp_path / "outputs"
    first = orch.run_experiment(experiment, output_dir=outputs, variants=["b1"])
    assert {r["variant_id"] for r in first.rows} == {"b1"} and check_bundle(first.bundle_dir) == []
    (first.bundle_dir / "environment.json").write_text("{}", encoding="utf-8")
    with pytest.raises(BundleError, match="environment.json: changed"):
        orch.run_experiment(experiment, output_dir=outputs)  # adding runs verifies first, too
    shutil.rmtree(first.bundle_dir)
    orch.run_experiment(experiment, output_dir=outputs, variants=["b1"])
    result = orch.run_experiment(experiment, output_dir=outputs)
    assert {r["variant_id"] for r in result.rows} == {"b1", "b4"}
    assert check_bundle(result.bundle_dir) == []

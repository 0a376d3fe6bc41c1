"""A signal stops the schedule: no row for the run in progress, recorded, redone (R3.6, issue 26).

The kernel is stood in for by a fake ``execute_notebook`` (the real-Slurm test runs real
kernels): the first warm run receives SIGTERM while "measuring"; the schedule stops with no
row for it, the bundle records the interruption, and the rerun redoes that run only, with a
note saying why.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from gpubench_nb.pipeline import orchestrate
from gpubench_nb.pipeline.interrupt import (
    Interrupted,
    interruption_note,
    read_interruptions,
    stop_on_signals,
)
from gpubench_nb.protocol.results import read_rows
from tests.support.experiments import stop_experiment


def test_sigterm_becomes_interrupted_and_the_old_handlers_come_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as caught, stop_on_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises here, at once
    assert caught.value.signal_name == "SIGTERM" and caught.value.then is None
    assert signal.getsignal(signal.SIGTERM) is before


def test_usr2_is_handed_to_the_requeue_handler_after_the_record() -> None:
    called: list[int] = []
    previous = signal.signal(signal.SIGUSR2, lambda signum, frame: called.append(signum))
    try:
        with pytest.raises(Interrupted) as caught, stop_on_signals():
            os.kill(os.getpid(), signal.SIGUSR2)
            time.sleep(5)
        assert called == []  # not yet: the interruption is recorded first
        assert caught.value.then is not None
        caught.value.then()
        assert called == [signal.SIGUSR2]
    finally:
        signal.signal(signal.SIGUSR2, previous)


def _experiment(folder: Path, data_dir: Path) -> Path:
    """20 texts, one variant, one cold and one warm run."""
    quality = {"metric": "accuracy", "threshold": 0.0, "tolerance": 1.0}
    return stop_experiment(folder, data_dir, seed=3, quality=quality)


def _fake_kernels(monkeypatch: pytest.MonkeyPatch, interrupt_key: str | None) -> list[str]:
    """execute_notebook stand-in: 10_measure writes a plausible run.json; the run named
    ``interrupt_key`` gets SIGTERM mid-run instead; other notebooks do nothing."""
    calls: list[str] = []

    def fake(name: str, output: Path, parameters: dict[str, Any], timeout: int) -> None:
        bundle = Path(parameters["bundle_dir"])
        if name == "00_environment.ipynb":
            (bundle / "environment.json").write_text("{}", encoding="utf-8")
            return
        if name != "10_measure.ipynb":
            return
        key = f"{parameters['variant_id']}/{parameters['phase']}-{parameters['run_index']}"
        calls.append(key)
        folder = bundle / "runs" / parameters["variant_id"]
        folder = folder / f"{parameters['phase']}-{parameters['run_index']}"
        folder.mkdir(parents=True, exist_ok=True)
        record = {"pid": 4242, "status": "running", "error": "the process died"}
        (folder / "run.json").write_text(json.dumps(record), encoding="utf-8")
        if key == interrupt_key:
            os.kill(os.getpid(), signal.SIGTERM)  # scancel, as the job sees it
            time.sleep(5)
            raise AssertionError("SIGTERM did not stop the run")
        record.update(
            status="ok",
            error=None,
            elapsed_seconds=0.25,
            load_seconds=0.5,
            precision="fp32",
            batch=4,
            context=32,
            warmup_iterations=1 if parameters["phase"] == "warm" else 0,
        )
        (folder / "run.json").write_text(json.dumps(record), encoding="utf-8")

    monkeypatch.setattr(orchestrate, "execute_notebook", fake)
    monkeypatch.setattr(orchestrate, "_render_report", lambda bundle: None)
    return calls


def test_an_interrupted_run_is_no_row_is_recorded_and_is_redone_with_a_note(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    experiment = _experiment(tmp_path, data_dir)
    bundle = tmp_path / "out" / "stop"
    _fake_kernels(monkeypatch, interrupt_key="b4/warm-1")
    with pytest.raises(Interrupted), stop_on_signals():
        orchestrate.run_experiment(experiment, output_dir=tmp_path / "out")
    rows = read_rows(bundle / "resultats-bruts.csv")
    assert [r["phase"] for r in rows] == ["load", "cold"]  # no failed warm row (R3.6)
    [event] = read_interruptions(bundle)
    assert (event["run"], event["signal"]) == ("b4/warm-1", "SIGTERM")
    schedule = json.loads((bundle / "schedule.json").read_text(encoding="utf-8"))
    assert [(r["status"], r.get("interrupted")) for r in schedule["runs"]] == [
        ("done", None),
        ("pending", 1),
    ]
    assert not (bundle / "MANIFEST.sha256").exists()
    # resume: only the interrupted run is redone, and its row says why
    calls = _fake_kernels(monkeypatch, interrupt_key=None)
    orchestrate.run_experiment(experiment, output_dir=tmp_path / "out")
    assert calls == ["b4/warm-1"]
    rows = read_rows(bundle / "resultats-bruts.csv")
    assert [r["phase"] for r in rows] == ["load", "cold", "warm"]
    assert rows[2]["elapsed_seconds"] == 0.25
    assert interruption_note([event]) in rows[2]["notes"]
    assert "R3.6: 1 earlier attempt of this run interrupted by SIGTERM" in rows[2]["notes"]
    assert "R3.6" not in (rows[1]["notes"] or "")  # the cold run was never interrupted
    assert (bundle / "MANIFEST.sha256").exists()


def test_ctrl_c_in_a_plain_run_is_recorded_the_same_way(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 25: a KeyboardInterrupt (Ctrl-C, no signal handler of ours) left no record.
    experiment = _experiment(tmp_path, data_dir)
    bundle = tmp_path / "out" / "stop"
    _fake_kernels(monkeypatch, interrupt_key=None)
    real = orchestrate.execute_notebook

    def ctrl_c_in_warm(name: str, output: Path, parameters: dict[str, Any], timeout: int) -> None:
        if parameters.get("phase") == "warm":
            raise KeyboardInterrupt
        real(name, output, parameters, timeout)

    monkeypatch.setattr(orchestrate, "execute_notebook", ctrl_c_in_warm)
    with pytest.raises(Interrupted) as caught:
        orchestrate.run_experiment(experiment, output_dir=tmp_path / "out")
    [event] = read_interruptions(bundle)
    assert (event["run"], event["signal"]) == ("b4/warm-1", "SIGINT")
    assert (event["runs_done"], event["runs_total"]) == (["b4/cold-1"], 2)
    assert [r["phase"] for r in read_rows(bundle / "resultats-bruts.csv")] == ["load", "cold"]
    note = caught.value.note
    assert note is not None and "run b4/warm-1 was discarded" in note
    assert "1 of 2 runs are done and kept" in note
    assert str(bundle / "logs" / "interruptions.jsonl") in note and "run the same command" in note


@pytest.mark.slow
def test_a_real_sigint_to_gpubench_nb_run_is_recorded_and_says_how_to_resume(
    tmp_path: Path, data_dir: Path
) -> None:
    """Ctrl-C as a terminal sends it: SIGINT to the command's process group, while the second
    of two runs is in its kernel. No row for it, the event in the bundle, exit 130.

    The signal waits on an event, not a time: the warm run hangs in its measured pass
    (GPUBENCH_FAULT) and is interrupted once its kernel has written its run.json (R3.6), so a
    busy machine only makes the test slower."""
    import subprocess
    import sys

    experiment = _experiment(tmp_path, data_dir)
    script = Path(sys.executable).parent / "gpubench-nb"
    fault = {"GPUBENCH_FAULT": "hang@batch:1@phase:warm"}
    proc = subprocess.Popen(
        [str(script), "run", str(experiment), "--output-dir", "out"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell's foreground job
        env={**os.environ, "HF_HUB_OFFLINE": "1", **fault},
    )
    warm = tmp_path / "out" / "stop" / "runs" / "b4" / "warm-1" / "run.json"
    try:
        first = proc.stderr.readline()  # stderr is a pipe: one plain line per finished run
        assert first.startswith("[1/2] b4 cold 1  "), first
        deadline = time.monotonic() + 300
        while not warm.exists():  # the warm run's kernel has started it
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the warm run never started"
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    bundle = tmp_path / "out" / "stop"
    [event] = read_interruptions(bundle)
    assert (event["signal"], event["run"], event["runs_done"]) == (
        "SIGINT",
        "b4/warm-1",
        ["b4/cold-1"],
    )
    assert [r["phase"] for r in read_rows(bundle / "resultats-bruts.csv")] == ["load", "cold"]
    assert "interrupted by SIGINT: run b4/warm-1 was discarded" in err
    assert f"recorded in {bundle.resolve() / 'logs' / 'interruptions.jsonl'}" in err
    assert f"resume: gpubench-nb run {experiment} --output-dir out" in err
    assert "Traceback" not in err

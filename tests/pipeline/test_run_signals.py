"""`run` hears SIGTERM, SIGUSR2 and SIGHUP (a closed terminal) as it hears Ctrl-C (R3.6): a
message, an entry in logs/interruptions.jsonl, the run redone later, a non-zero exit, and no lock
holder file left; `report` refuses a bundle a `run` is still writing (R5.6)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpubench_nb.errors import BundleError
from gpubench_nb.pipeline.interrupt import read_interruptions
from gpubench_nb.protocol.writer import holder_path, refuse_if_written
from tests.support.experiments import stop_experiment

ROOT = Path(__file__).resolve().parents[2]

# The child: `gpubench-nb run` with kernels stood in for; the warm run signals its own process,
# as `kill PID` or a scheduler's warning does, while it "measures".
CHILD = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from pathlib import Path
    from gpubench_nb import cli
    from gpubench_nb.pipeline import orchestrate

    def fake(name, output, parameters, timeout):
        bundle = Path(parameters["bundle_dir"])
        if name == "00_environment.ipynb":
            (bundle / "environment.json").write_text("{}", encoding="utf-8")
        if name != "10_measure.ipynb":
            return
        folder = bundle / "runs" / parameters["variant_id"]
        folder = folder / f"{parameters['phase']}-{parameters['run_index']}"
        folder.mkdir(parents=True, exist_ok=True)
        if parameters["phase"] == "warm" and sys.argv[2] != "none":
            os.kill(os.getpid(), getattr(signal, sys.argv[2]))
            time.sleep(30)
        record = {"status": "ok", "elapsed_seconds": 0.25, "load_seconds": 0.5,
                  "precision": "fp32", "batch": 4, "context": 32}
        (folder / "run.json").write_text(json.dumps(record), encoding="utf-8")

    os.umask(int(sys.argv[3], 8))
    orchestrate.execute_notebook = fake
    orchestrate._render_report = lambda bundle: None
    sys.exit(cli.main(["run", sys.argv[1], "--output-dir", "out"]))
    """
)


def _experiment(folder: Path, data_dir: Path) -> Path:
    """One variant, one repeat."""
    return stop_experiment(folder, data_dir, timing={"repeats_reason": "unit test"})


@pytest.mark.parametrize("name", ["SIGTERM", "SIGUSR2", "SIGHUP"])
def test_a_signal_to_run_is_heard_like_ctrl_c(tmp_path: Path, data_dir: Path, name: str) -> None:
    experiment = _experiment(tmp_path, data_dir)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(experiment), name, "022"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 128 + getattr(signal, name), done.stderr
    assert f"interrupted by {name}: run b4/warm-1 was discarded" in done.stderr
    assert "resume: gpubench-nb run" in done.stderr and "Traceback" not in done.stderr
    bundle = tmp_path / "out" / "stop"
    [event] = read_interruptions(bundle)
    assert (event["signal"], event["run"]) == (name, "b4/warm-1")
    assert not holder_path(bundle).exists()  # the holder file does not outlive the run


def test_report_refuses_a_bundle_a_run_holds(tmp_path: Path) -> None:
    from gpubench_nb.report.render import render_comparison

    bundle = tmp_path / "out" / "b"
    bundle.mkdir(parents=True)
    hold = (
        "import sys, time\nfrom gpubench_nb.protocol.writer import bundle_writer\n"
        f"with bundle_writer({str(bundle)!r}, 'gpubench-nb run'):\n"
        "    print('held', flush=True)\n    time.sleep(60)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("GPUBENCH_WRITER_TOKEN", None)
    holder = subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE, env=env)
    try:
        assert holder.stdout.readline().strip() == b"held"
        with pytest.raises(BundleError, match=r"R5\.6: .*another writer holds this bundle"):
            render_comparison([bundle], tmp_path / "r.html")
        assert not (tmp_path / "r.html").exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        holder.stdout.close()
    refuse_if_written(bundle)  # the system released the lock with its holder: readable again


def test_under_umask_027_no_bundle_file_is_readable_by_others(
    tmp_path: Path, data_dir: Path
) -> None:
    experiment = _experiment(tmp_path, data_dir)
    for path in tmp_path.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)  # inputs as a checkout leaves them
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(experiment), "none", "027"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    bundle = tmp_path / "out" / "stop"
    assert (bundle / "MANIFEST.sha256").is_file()
    modes = {p.relative_to(bundle).as_posix(): p.stat().st_mode & 0o777 for p in bundle.rglob("*")}
    assert {name: oct(mode) for name, mode in modes.items() if mode & 0o007} == {}

"""Kernels the tool starts print no "running over TCP without encryption" line (issue 16 §3).

Each test starts real kernels (a few seconds each): papermill as `run` and `report` call it,
the same call without our kernel manager (the control: ipykernel does print the line here, so
the first test can fail), and the plain `papermill` CLI with the kernelspec `make` installs.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import types
from pathlib import Path

import nbformat
import pytest

from gpubench_nb.kernel import FAST_EXIT, TCP_WARNING, _keep, install

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import logging, sys\nprint(6 * 7)")]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, path)
    return path


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


@pytest.fixture
def plain_kernelspec(tmp_path: Path) -> dict[str, str]:
    """ipykernel's own `python3` kernelspec, first on JUPYTER_PATH: what is tested is the
    transport, not the filtering launcher that `make` installs in the venv (which would hide
    the control's line)."""
    prefix = tmp_path / "plain-prefix"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "ipykernel",
            "install",
            "--prefix",
            str(prefix),
            "--name",
            "python3",
        ],
        capture_output=True,
        check=True,
    )
    return {"JUPYTER_PATH": str(prefix / "share" / "jupyter")}


def _execute(
    notebook: Path, out: Path, ours: bool, kernels: dict[str, str]
) -> subprocess.CompletedProcess:
    options = "**papermill_options()" if ours else ""
    code = (
        "import papermill\nfrom gpubench_nb.kernel import papermill_options\n"
        f"papermill.execute_notebook({str(notebook)!r}, {str(out)!r}, kernel_name='python3', "
        f"progress_bar=False, {options})\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=_env(**kernels),
        check=False,
    )


def test_a_kernel_we_start_prints_no_tcp_warning(
    notebook: Path, tmp_path: Path, plain_kernelspec: dict[str, str]
) -> None:
    done = _execute(notebook, tmp_path / "ours.ipynb", ours=True, kernels=plain_kernelspec)
    assert done.returncode == 0, done.stderr[-2000:]
    assert TCP_WARNING not in done.stderr
    assert "42" in (tmp_path / "ours.ipynb").read_text(encoding="utf-8")
    control = _execute(notebook, tmp_path / "plain.ipynb", ours=False, kernels=plain_kernelspec)
    assert control.returncode == 0, control.stderr[-2000:]
    assert TCP_WARNING in control.stderr  # what users saw, and what the test would catch


def test_plain_papermill_with_the_installed_kernelspec_prints_no_tcp_warning(
    notebook: Path, tmp_path: Path
) -> None:
    folder = install(tmp_path / "prefix")
    assert (folder / "kernel.json").read_text().count("gpubench_nb.kernel") == 1
    papermill = Path(sys.executable).with_name("papermill")
    done = subprocess.run(
        [str(papermill), str(notebook), str(tmp_path / "out.ipynb")],
        capture_output=True,
        text=True,
        env=_env(JUPYTER_PATH=str(tmp_path / "prefix" / "share" / "jupyter")),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert TCP_WARNING not in done.stderr
    assert "42" in (tmp_path / "out.ipynb").read_text(encoding="utf-8")


def test_the_filter_drops_that_one_message_only() -> None:
    keep = _keep

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("IPKernelApp", logging.WARNING, __file__, 1, message, (), None)

    assert not keep(record(TCP_WARNING + ". All communication ..."))
    assert keep(record("Kernel is running out of memory"))
    assert keep(record("WARNING: something else"))


def test_our_kernels_drop_the_shutdown_interrupt_line_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SIGINT jupyter_client sends before shutdown_request made ipykernel log an ERROR
    into the bundle's kernel log now and then (issue 25): dropped, that line alone."""
    from gpubench_nb.kernel import SHUTDOWN_INTERRUPT

    keep = _keep

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("IPKernelApp", logging.ERROR, __file__, 1, message, (), None)

    monkeypatch.delenv(FAST_EXIT, raising=False)
    assert keep(record(SHUTDOWN_INTERRUPT + "."))  # another client's kernel: kept
    monkeypatch.setenv(FAST_EXIT, "1")
    assert not keep(record(SHUTDOWN_INTERRUPT + "."))  # the shell's line
    assert not keep(record(SHUTDOWN_INTERRUPT))  # the control thread's
    assert keep(record("Exception in message handler:"))
    assert keep(record("KeyboardInterrupt caught in kernel. Something else"))


_IMPORTS = """
import json, sys, time
start = time.perf_counter()
{how}
import nbformat
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
nbformat.validate(nb)  # the schema check papermill and nbconvert rely on still runs
try:
    nbformat.validate(nbformat.from_dict({{"cells": "not a list", "metadata": {{}}}}))
    refused = False
except nbformat.ValidationError:
    refused = True
print(json.dumps({{"grammar": "rfc3987_syntax.syntax_helpers" in sys.modules,
                  "refused": refused}}))
"""


@pytest.mark.parametrize(
    "how, grammar",
    [
        ("import papermill", True),  # what each `run` and `report` paid before issue 25
        ("from gpubench_nb.kernel import papermill_module; papermill_module()", False),
    ],
)
def test_papermill_module_skips_the_unused_iri_grammar(how: str, grammar: bool) -> None:
    # Issue 25: jsonschema (via nbformat) compiled rfc3987-syntax's Earley grammar, 1.1 s of a
    # `gpubench-nb report` on 2 cores, though no notebook schema has an "iri" format. Notebook
    # validation is unchanged: a valid notebook passes, an invalid one is still refused.
    pytest.importorskip("rfc3987_syntax")  # installed with jupyterlab; else nothing to skip
    code = _IMPORTS.format(how=how)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert json.loads(out.stdout) == {"grammar": grammar, "refused": True}


def test_papermill_module_leaves_an_already_imported_jsonschema_alone() -> None:
    # Once jsonschema has loaded the package, marking it absent would make two states.
    code = (
        "import sys, jsonschema\n"
        "from gpubench_nb.kernel import papermill_module\n"
        "had = sys.modules.get('rfc3987_syntax')\n"
        "papermill_module()\n"
        "print(sys.modules.get('rfc3987_syntax') is had)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "True"


_EXIT_CELL = """
import os
from pathlib import Path
Path({folder!r}, "fast-exit.txt").write_text(os.environ.get({name!r}, "unset"))
"""


@pytest.mark.parametrize("ours", [True, False])
def test_only_the_kernels_we_start_are_told_to_exit_fast(tmp_path: Path, ours: bool) -> None:
    """The kernel manager of `run` and `report` sets FAST_EXIT in its kernels' environment;
    the plain papermill CLI or Jupyter, with the same installed launcher, does not (issue 25)."""
    from gpubench_nb.kernel import FAST_EXIT

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(_EXIT_CELL.format(folder=str(tmp_path), name=FAST_EXIT))]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = tmp_path / "exit.ipynb"
    nbformat.write(nb, path)
    prefix = tmp_path / "prefix"
    install(prefix)  # our launcher in both cases: only the manager differs
    jupyter_path = {"JUPYTER_PATH": str(prefix / "share" / "jupyter")}
    done = _execute(path, tmp_path / "out.ipynb", ours=ours, kernels=jupyter_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "fast-exit.txt").read_text() == ("1" if ours else "unset")


_EXIT_SCRIPT = """
import atexit, sys, threading, time
from pathlib import Path
from gpubench_nb.kernel import exit_without_teardown
folder = Path(sys.argv[1])
atexit.register(lambda: (folder / "atexit-ran.txt").write_text("yes"))
def late():
    time.sleep(0.3)
    (folder / "thread-finished.txt").write_text("yes")
threading.Thread(target=late).start()  # non-daemon: joined before the process ends
class Teardown:
    def __del__(self):
        (folder / "teardown-ran.txt").write_text("yes")
keep = Teardown()  # a module global: only the interpreter's teardown deletes it
print("buffered, no newline", end="")  # stdout is a pipe: block-buffered
if sys.argv[2] == "fast":
    exit_without_teardown()
"""


@pytest.mark.parametrize("how", ["fast", "usual"])
def test_exit_without_teardown_keeps_what_matters(tmp_path: Path, how: str) -> None:
    """exit_without_teardown joins non-daemon threads, runs atexit handlers and flushes the
    streams, and skips only the teardown (the module global's __del__ never runs); the usual
    exit, the control, runs it."""
    env = {k: v for k, v in _env().items() if k != "PYTHONUNBUFFERED"}
    done = subprocess.run(
        [sys.executable, "-c", _EXIT_SCRIPT, str(tmp_path), how],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "buffered, no newline"
    assert (tmp_path / "atexit-ran.txt").is_file()
    assert (tmp_path / "thread-finished.txt").is_file()
    assert (tmp_path / "teardown-ran.txt").is_file() is (how == "usual")


def test_the_report_command_never_builds_the_iri_grammar(tmp_path: Path) -> None:
    # `gpubench-nb report` imports papermill and nbconvert (both import nbformat): whichever
    # comes first, the grammar stays unbuilt. The folder is refused (no bundle) after the
    # imports, before any kernel starts.
    pytest.importorskip("rfc3987_syntax")
    folder = tmp_path / "not-a-bundle"
    folder.mkdir()
    code = (
        "import json, sys\n"
        "from gpubench_nb.cli import main\n"
        f"code = main(['report', {str(folder)!r}])\n"
        "print(json.dumps([code, 'nbconvert' in sys.modules, "
        "'rfc3987_syntax.syntax_helpers' in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=tmp_path
    )
    assert json.loads(out.stdout.splitlines()[-1]) == [2, True, False], out.stderr


class _ControlThread(threading.Thread):
    """ipykernel's control thread as far as exit is concerned: a loop, a thread-safe stop()
    that ends it after the message in hand, and the order of what happened."""

    def __init__(self, events: list[str]) -> None:
        super().__init__(daemon=True)
        self.events, self._stop_requested = events, threading.Event()

    def run(self) -> None:
        self._stop_requested.wait(30)
        self.events.append("control: last message flushed, loop ended")

    def stop(self) -> None:
        self.events.append("control: stop requested")
        self._stop_requested.set()


def test_the_launcher_stops_the_control_thread_before_the_exit_handlers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 25: one kernel in 6-10 took 3.4 s more to stop (2 of 40 empty kernels here, 0 of 80
    # after the fix). At exit, atexit stopped IOPub first and then joined the control thread,
    # which could still be flushing the shutdown reply through IOPub: that flush waited out its
    # timeout, and the client sent SIGTERM after 2.5 s. The launcher now ends the control
    # thread while IOPub still runs, before any exit handler.
    from ipykernel import kernelapp

    from gpubench_nb import kernel

    events: list[str] = []
    control = _ControlThread(events)
    control.start()
    app = types.SimpleNamespace(control_thread=control)
    monkeypatch.setattr(kernelapp, "launch_new_instance", lambda: events.append("kernel ran"))
    monkeypatch.setattr(kernelapp.IPKernelApp, "instance", classmethod(lambda cls: app))
    monkeypatch.setattr(kernel, "exit_without_teardown", lambda: events.append("exit handlers"))
    monkeypatch.setenv(kernel.FAST_EXIT, "1")
    kernel.launch()
    assert not control.is_alive()
    assert events == [
        "kernel ran",
        "control: stop requested",
        "control: last message flushed, loop ended",
        "exit handlers",
    ]


def test_stopping_the_control_thread_tolerates_an_app_without_one() -> None:
    from gpubench_nb.kernel import stop_control_thread

    stop_control_thread(types.SimpleNamespace())  # an app that never started one
    ended = threading.Thread(target=lambda: None)
    ended.start()
    ended.join()
    stop_control_thread(types.SimpleNamespace(control_thread=ended))  # already stopped

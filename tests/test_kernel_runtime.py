"""Issue 22 §1: the kernels' connection files and IPC sockets live in a private runtime folder
of the process (0700), never in the kernels' working folder (the checkout or the package)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench_nb import kernel

REPO = Path(__file__).resolve().parents[1]


def test_connection_file_and_sockets_are_private_to_the_process() -> None:
    manager_class = kernel.kernel_manager_class()
    first, second = manager_class(kernel_name="python3"), manager_class(kernel_name="python3")
    if first.transport != "ipc":
        pytest.skip("no IPC transport in this ZeroMQ (Windows): TCP ports are unique already")
    folder = kernel.runtime_dir()
    # owner only; jupyter_client may add the sticky bit (0o1700) once a kernel has started
    assert stat.S_IMODE(folder.stat().st_mode) & 0o777 == 0o700
    assert Path(first.connection_file).parent == folder
    assert Path(first.ip).parent == folder  # sockets "<ip>-<port>" sit beside it
    assert first.ip != second.ip  # two kernels of one process never share a name
    assert not folder.resolve().is_relative_to(REPO)  # never the checkout or the package
    assert len(first.ip) + len("-65535") < 108  # a Unix socket path's limit


def test_two_processes_get_two_folders_removed_at_exit(tmp_path: Path) -> None:
    script = "from gpubench_nb import kernel; print(kernel.runtime_dir())"
    env = {**os.environ, "TMPDIR": "/tmp"}
    folders = [
        Path(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, check=True).stdout.strip())
        for _ in range(2)
    ]  # fmt: skip
    assert folders[0] != folders[1]
    assert not any(f.exists() for f in folders)  # removed when each process exited


def test_a_temporary_folder_too_long_for_sockets_falls_back(monkeypatch, tmp_path) -> None:
    deep = tmp_path / ("x" * 80)
    deep.mkdir()
    monkeypatch.setattr(kernel.tempfile, "gettempdir", lambda: str(deep))
    base = kernel._runtime_base()
    assert base != str(deep)
    assert len(base) + 1 + kernel._LONGEST_SOCKET_NAME <= kernel.MAX_SOCKET_PATH


def test_the_folder_of_a_killed_process_is_removed_by_the_next(tmp_path: Path) -> None:
    """A process killed with -9 runs no exit handler: the next one removes its folder."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    script = "import os; from gpubench_nb import kernel; print(kernel.runtime_dir()); os._exit(0)"
    run = [sys.executable, "-c", script]
    left = Path(subprocess.run(run, env=env, capture_output=True, text=True).stdout.strip())
    assert left.is_dir()  # os._exit: no atexit, as after kill -9
    mine = Path(subprocess.run(run, env=env, capture_output=True, text=True).stdout.strip())
    assert not left.exists() and mine.is_dir()  # the dead one's removed, the new one left

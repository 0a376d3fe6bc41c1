"""The shipped notebooks (package data, never written to: R5.6) and the kernels that run them:
over IPC in a private 0700 folder (no TCP warning, no socket shared between users), without the
interpreter's teardown; ``python -m gpubench_nb.kernel install`` writes a kernelspec for other
clients, whose launcher drops only the TCP warning."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import functools
import importlib.resources
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from gpubench_nb.errors import GpubenchError, disk_full, storage_error

NOTEBOOKS_PACKAGE = "gpubench_nb.notebooks"
# The notebook steps, asked here by every stage: "<step>.ipynb" shipped and kept, its writer (R5.6)
STEPS = ("00_environment", "10_measure", "20_quality", "30_economics", "90_report", "memory_mlp")
ENVIRONMENT_STEP, MEASURE_STEP, QUALITY_STEP, ECONOMICS_STEP, REPORT_STEP, MEMORY_STEP = STEPS
STAGE_NOTEBOOKS = tuple(f"{step}.ipynb" for step in STEPS)


def notebooks_dir() -> Path:
    """The folder holding the shipped notebooks (a real folder: papermill reads paths)."""
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "notebooks").is_dir():
        path = checkout / "notebooks"
    else:
        try:
            path = Path(str(importlib.resources.files(NOTEBOOKS_PACKAGE)))
        except ModuleNotFoundError:
            path = Path(NOTEBOOKS_PACKAGE.replace(".", "/"))  # named in the error below
    if not (path / STAGE_NOTEBOOKS[0]).is_file():
        raise GpubenchError(
            f"the notebooks of gpubench-nb are not in {path} (package data {NOTEBOOKS_PACKAGE}); "
            "reinstall the package (pip install .) from a checkout that has notebooks/"
        )
    return path


def notebook_path(name: str) -> Path:
    """The shipped notebook ``name`` (e.g. ``"10_measure.ipynb"``)."""
    if name not in STAGE_NOTEBOOKS:
        raise ValueError(f"unknown notebook {name!r}; shipped: {', '.join(STAGE_NOTEBOOKS)}")
    return notebooks_dir() / name


def copy_notebooks(target: Path) -> list[Path]:
    """Copy every shipped notebook into ``target``, all or nothing, never overwriting one."""
    source = notebooks_dir()
    existing = [target / name for name in STAGE_NOTEBOOKS if (target / name).exists()]
    if existing:
        raise GpubenchError(
            f"--copy {target}: {', '.join(p.name for p in existing)} already there; nothing "
            "copied (never overwritten); remove them or choose another folder"
        )
    created, copied = not target.exists(), []
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name in STAGE_NOTEBOOKS:
            # "x": never overwrite; the mode is a new file's, not a read-only install's 0444
            with (source / name).open("rb") as src, (target / name).open("xb") as dst:
                copied.append(target / name)
                shutil.copyfileobj(src, dst)
    except OSError as exc:
        for path in copied:
            path.unlink(missing_ok=True)
        if created:
            shutil.rmtree(target, ignore_errors=True)
        if disk_full(exc):
            raise storage_error(exc, exc.filename or target) from None
        raise GpubenchError(
            f"--copy {target}: cannot write there ({exc.strerror or exc}); nothing was copied. "
            "Fix: give a folder you can write to"
        ) from None
    return copied


TCP_WARNING = "Kernel is running over TCP without encryption"
_IRI_GRAMMAR = "rfc3987_syntax"  # optional to jsonschema; no notebook schema uses it
FAST_EXIT = "GPUBENCH_KERNEL_FAST_EXIT"
# ipykernel's line (kernelbase: with a final period on the shell path, without on control)
SHUTDOWN_INTERRUPT = "KeyboardInterrupt caught in kernel"


RUNTIME_PREFIX = "gpubench-nb-"
# A Unix socket path holds at most 107 bytes (104 on macOS)
MAX_SOCKET_PATH = 100
_LONGEST_SOCKET_NAME = len(RUNTIME_PREFIX) + 8 + 8 + len("/kernel-0123456789ab-ipc-65535")
_FOLDER = re.compile(re.escape(RUNTIME_PREFIX) + r"(\d+)-")


def _runtime_base() -> str:
    """TMPDIR, else XDG_RUNTIME_DIR, else /tmp: the first short enough for socket paths."""
    for base in (tempfile.gettempdir(), os.environ.get("XDG_RUNTIME_DIR"), "/tmp"):
        if (
            base
            and os.path.isdir(base)
            and os.access(base, os.W_OK | os.X_OK)
            and len(os.path.abspath(base)) + 1 + _LONGEST_SOCKET_NAME <= MAX_SOCKET_PATH
        ):
            return os.path.abspath(base)
    return tempfile.gettempdir()


@functools.cache
def runtime_dir() -> Path:
    """This process's private folder (0700) for kernel sockets, removed at exit."""
    base = _runtime_base()
    _remove_stale(Path(base))
    folder = Path(tempfile.mkdtemp(prefix=f"{RUNTIME_PREFIX}{os.getpid()}-", dir=base))
    os.chmod(folder, 0o700)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _remove_stale(base: Path) -> None:
    """Remove the runtime folders of this user's processes that are gone (killed: no atexit)."""
    for folder in base.glob(f"{RUNTIME_PREFIX}*"):
        match = _FOLDER.match(folder.name)
        try:
            if not match or folder.stat().st_uid != os.getuid():
                continue
            os.kill(int(match.group(1)), 0)  # still alive (or another user's): keep it
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except (OSError, ValueError):
            continue


@functools.cache
def kernel_manager_class() -> type:
    """An AsyncKernelManager over IPC (where ZeroMQ has it), its files in :func:`runtime_dir`."""
    import zmq
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    if not zmq.has("ipc"):  # Windows: TCP stays, and so does ipykernel's warning
        return AsyncKernelManager

    class IpcKernelManager(AsyncKernelManager):
        async def start_kernel(self, **kw: Any) -> None:
            env = dict(kw.pop("env", None) or os.environ)
            env[FAST_EXIT] = "1"
            await super().start_kernel(env=env, **kw)

        @default("transport")
        def _default_transport(self) -> str:
            return "ipc"

        @default("connection_file")
        def _default_connection_file(self) -> str:
            # the IPC sockets are named after it: unique, in a private folder
            return str(runtime_dir() / f"kernel-{uuid.uuid4().hex[:12]}.json")

    return IpcKernelManager


def papermill_module() -> ModuleType:
    """``papermill``, with jsonschema's optional ``iri`` grammar (a second to build, used by
    no notebook schema) marked absent before jsonschema's first import."""
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault(_IRI_GRAMMAR, None)  # type: ignore[assignment]
    import papermill

    return papermill


def papermill_options() -> dict[str, Any]:
    """Keyword arguments for ``papermill.execute_notebook`` that start the kernel over IPC."""
    return {"kernel_manager_class": kernel_manager_class()}


def _keep(record: logging.LogRecord) -> bool:
    """A log filter: drops ipykernel's TCP notice and, in kernels gpubench-nb starts, the ERROR
    "KeyboardInterrupt caught in kernel." of the SIGINT before each shutdown; nothing else."""
    text = str(record.msg)
    ours = os.environ.get(FAST_EXIT) == "1"
    return not text.startswith(TCP_WARNING) and not (
        ours and text.rstrip(".") == SHUTDOWN_INTERRUPT
    )


def launch() -> None:
    """Start an ipykernel (what ``ipykernel_launcher`` does) without the TCP notice."""
    if sys.path and sys.path[0] in ("", str(Path.cwd())):
        del sys.path[0]  # as ipykernel_launcher does; the kernel puts the cwd back itself
    logging.getLogger("IPKernelApp").addFilter(_keep)
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()
    stop_control_thread(kernelapp.IPKernelApp.instance())
    if os.environ.get(FAST_EXIT) == "1":
        exit_without_teardown()


def stop_control_thread(app: Any, timeout_seconds: float = 10.0) -> None:
    """Stop the control thread while IOPub still runs: atexit stops IOPub first, and a
    shutdown reply still flushing would wait out its 10 s timeout (then SIGTERM)."""
    control = getattr(app, "control_thread", None)
    if control is not None and control.is_alive():
        control.stop()  # thread-safe: its loop ends after the message in hand
        control.join(timeout_seconds)


def exit_without_teardown() -> None:
    """Exit as the interpreter would (threads joined, atexit run, streams flushed) minus the
    module teardown, slow with torch; only for ``FAST_EXIT`` kernels, whose writes are atomic."""
    import threading

    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # what Py_Finalize runs first; stable since Python 3.0
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(OSError, ValueError, AttributeError):  # closed, or None
            stream.flush()  # type: ignore[union-attr]
    os._exit(0)


def install(prefix: Path, name: str = "python3") -> Path:
    """Write the kernelspec ``name`` under ``prefix`` (e.g. a venv), launched by :func:`launch`."""
    from ipykernel.kernelspec import install as ipykernel_install

    folder = Path(ipykernel_install(kernel_name=name, prefix=str(prefix)))
    spec_path = folder / "kernel.json"
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    # ipykernel's own command (its flags kept) with its launcher swapped for ours
    argv = [a if a != "ipykernel_launcher" else "gpubench_nb.kernel" for a in spec["argv"]]
    if "gpubench_nb.kernel" not in argv:
        argv = [sys.executable, "-m", "gpubench_nb.kernel", "-f", "{connection_file}"]
    spec_path.write_text(json.dumps({**spec, "argv": argv}, indent=1) + "\n", encoding="utf-8")
    return folder


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gpubench_nb.kernel install [--prefix P]``; any other arguments start a kernel."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] != ["install"]:
        launch()
        return 0
    parser = argparse.ArgumentParser(prog="python -m gpubench_nb.kernel install")
    parser.add_argument("--prefix", default=sys.prefix, help="where to install (default: venv)")
    parser.add_argument("--name", default="python3")
    options = parser.parse_args(args[1:])
    print(f"kernelspec {options.name} installed in {install(Path(options.prefix), options.name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

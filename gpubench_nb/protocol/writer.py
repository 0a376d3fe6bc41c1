"""One writer per bundle (R5.6): an exclusive ``flock`` beside it, freed by the kernel when its
holder dies (no stale lock); the holder sidecar only names it in refusals."""

from __future__ import annotations

import fcntl
import os
import socket
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from gpubench_nb.errors import BundleError, GpubenchError
from gpubench_nb.protocol.bundle import MANIFEST_NAME
from gpubench_nb.protocol.clock import utc_now
from gpubench_nb.protocol.records import Record

TOKEN_ENV = "GPUBENCH_WRITER_TOKEN"


def lock_path(bundle_dir: Path | str, suffix: str = ".lock") -> Path:
    """``<output_dir>/.<id>.lock``, beside the bundle: outside what its manifest seals."""
    bundle_dir = Path(bundle_dir).resolve()
    return bundle_dir.parent / f".{bundle_dir.name}{suffix}"


def holder_path(bundle_dir: Path | str) -> Path:
    """The sidecar naming the lock's holder (informative only)."""
    return lock_path(bundle_dir, ".lock.holder.json")


@dataclass(frozen=True, kw_only=True)
class Holder(Record):
    """The holder sidecar: who holds a bundle's writer lock (R5.6), named in refusals only."""

    NAME = "writer holder"
    pid: int | None = None
    host: str | None = None
    command: str | None = None
    started_utc: str | None = None
    token: str | None = None


def _held_by_us(bundle_dir: Path) -> str | None:
    """The inherited token when this process runs under the holder's lock, else None."""
    inherited = os.environ.get(TOKEN_ENV)
    return inherited if inherited and read_holder(bundle_dir).token == inherited else None


def read_holder(bundle_dir: Path | str) -> Holder:
    """What the sidecar says about the holder; empty when absent or unreadable (a hint)."""
    try:
        return Holder.load(holder_path(bundle_dir)) or Holder()
    except GpubenchError:
        return Holder()


def _refusal(bundle_dir: Path) -> BundleError:
    holder = read_holder(bundle_dir)
    who = "a process that has not recorded its PID yet"
    if holder.pid is not None:
        who = (
            f"PID {holder.pid} on host {holder.host!r} "
            f"(since {holder.started_utc}: {holder.command})"
        )
    return BundleError(
        f"{bundle_dir}: another writer holds this bundle: {who}. Only one writer per bundle: "
        f"wait for it to finish (or stop it), then rerun; its lock is {lock_path(bundle_dir)}, "
        "released by the system when that process ends, so never delete it by hand",
        rule="R5.6",
    )


def refuse_if_written(bundle_dir: Path | str) -> None:
    """Refuse (exit 2) to read a bundle whose writer lock another process holds: a `run` still
    writing it would be read half-made (R5.6). The holder's own steps (its token) read on."""
    bundle_dir = Path(bundle_dir).resolve()
    if _held_by_us(bundle_dir):
        return
    try:
        fd = os.open(lock_path(bundle_dir), os.O_RDONLY)
    except OSError:  # no lock file: no writer ever held it here
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # shared: never blocks another reader
    except BlockingIOError:
        raise _refusal(bundle_dir) from None
    finally:
        os.close(fd)


@contextmanager
def bundle_writer(
    bundle_dir: Path | str, command: str | None = None, *, step: bool = False
) -> Iterator[str]:
    """Hold the bundle's writer lock for the block, yielding its token; a second writer is refused
    (exit 2); a lone step never writes into a finished bundle."""
    bundle_dir = Path(bundle_dir).resolve()
    if inherited := _held_by_us(bundle_dir):
        yield inherited
        return
    bundle_dir.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_path(bundle_dir)))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise _refusal(bundle_dir) from None
    except OSError as exc:  # e.g. the lock path is a folder, or the folder is read-only
        raise BundleError(
            f"{lock_path(bundle_dir)}: cannot take the bundle's writer lock ({exc.strerror}); "
            "fix: make the output folder writable and remove anything else at that path",
            rule="R5.6",
        ) from None
    if step and (bundle_dir / MANIFEST_NAME).exists():
        lock.release()
        raise BundleError(
            f"{bundle_dir} is a finished bundle (sealed by {MANIFEST_NAME}); {command} would "
            "change it behind its manifest. Fix: run the step on a copy without the manifest "
            "(cp -r, then delete MANIFEST.sha256 in the copy), or rerun `gpubench-nb run`, "
            "which verifies the manifest before it rewrites anything",
            rule="R5.6",
        )
    token = uuid.uuid4().hex
    saved = os.environ.get(TOKEN_ENV)
    try:
        # A sidecar left by a killed holder is simply overwritten: the OS lock decided.
        Holder.save(
            holder_path(bundle_dir),
            Holder(
                pid=os.getpid(),
                host=socket.gethostname(),
                command=command or " ".join(sys.argv),
                started_utc=utc_now(),
                token=token,
            ),
        )
        os.environ[TOKEN_ENV] = token
        yield token
    finally:
        if saved is None:
            os.environ.pop(TOKEN_ENV, None)
        else:
            os.environ[TOKEN_ENV] = saved
        if read_holder(bundle_dir).token == token:
            holder_path(bundle_dir).unlink(missing_ok=True)
        lock.release()

"""One writer per bundle (R5.6): the lock beside the bundle, its holder's sidecar, stale locks."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from gpubench_nb.errors import BundleError
from gpubench_nb.protocol.writer import (
    TOKEN_ENV,
    bundle_writer,
    holder_path,
    lock_path,
    read_holder,
)


@pytest.fixture(autouse=True)
def _no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)


def _enter(bundle: Path, command: str, *, step: bool = False) -> None:
    with bundle_writer(bundle, command, step=step):
        pass


def test_lock_and_sidecar_lie_beside_the_bundle_not_inside(tmp_path: Path) -> None:
    bundle = tmp_path / "outputs" / "exp"
    assert lock_path(bundle) == tmp_path / "outputs" / ".exp.lock"
    assert holder_path(bundle) == tmp_path / "outputs" / ".exp.lock.holder.json"


def test_second_writer_is_refused_naming_the_holder(tmp_path: Path) -> None:
    bundle = tmp_path / "exp"
    with bundle_writer(bundle, "first run") as token:
        holder = read_holder(bundle)
        assert holder.pid == os.getpid() and holder.host == socket.gethostname()
        assert holder.token == token == os.environ[TOKEN_ENV]
        os.environ.pop(TOKEN_ENV)  # a writer that is not the holder's kernel
        with pytest.raises(BundleError, match=rf"R5\.6.*PID {os.getpid()} on host") as info:
            _enter(bundle, "second run")
        assert "first run" in str(info.value) and "never delete it by hand" in str(info.value)
        os.environ[TOKEN_ENV] = token
    assert not holder_path(bundle).exists()  # released: the sidecar goes with the lock
    assert TOKEN_ENV not in os.environ


def test_a_kernel_of_the_holder_proceeds_under_its_lock(tmp_path: Path) -> None:
    bundle = tmp_path / "exp"
    with bundle_writer(bundle, "run"), bundle_writer(bundle, "10_measure", step=True) as inner:
        assert inner == read_holder(bundle).token  # same token: no second lock taken


def test_a_stale_sidecar_never_blocks(tmp_path: Path) -> None:
    bundle = tmp_path / "exp"
    # As a holder killed with kill -9 leaves it: its OS lock is gone, its sidecar stays.
    holder_path(bundle).write_text(
        json.dumps({"pid": 999999, "host": "elsewhere", "token": "old"}), encoding="utf-8"
    )
    with bundle_writer(bundle, "next run"):
        assert read_holder(bundle).pid == os.getpid()
    holder_path(bundle).write_text("not json", encoding="utf-8")
    with bundle_writer(bundle, "next run"):
        pass


def test_a_step_alone_refuses_a_finished_bundle(tmp_path: Path) -> None:
    bundle = tmp_path / "exp"
    bundle.mkdir()
    (bundle / "MANIFEST.sha256").write_text("", encoding="utf-8")
    with pytest.raises(BundleError, match="finished bundle"):
        _enter(bundle, "30_economics", step=True)
    with bundle_writer(bundle, "gpubench-nb run"):  # the run verifies the manifest itself
        pass

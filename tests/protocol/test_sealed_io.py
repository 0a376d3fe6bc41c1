"""One output rule for every writer, and inputs that are regular files (R5.6, R1.1, R1.3).

Each case is one a hostile sweep reproduced: an output path that is a device, a FIFO or a
symlink (renamed over, it is destroyed); `notebooks --copy` into a sealed bundle, directly or
through a symlink, on a full disk, into an unwritable folder or a dangling symlink; a FIFO as
the corpus or the experiment file (the read blocked forever).
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench_nb import kernel
from gpubench_nb.cli import main
from gpubench_nb.errors import BundleError
from gpubench_nb.protocol import bundle as layout
from gpubench_nb.protocol.outputs import check_output, check_output_folder

ROOT = Path(__file__).resolve().parents[2]


def sealed(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / layout.LOCK_NAME).write_text("{}", encoding="utf-8")
    (folder / layout.EXPECTED_IDS_NAME).write_text("a\n", encoding="utf-8")
    layout.write_manifest(folder)
    return folder


@pytest.fixture
def demo(tmp_path: Path, data_dir: Path) -> Path:
    (tmp_path / "parameters").mkdir()
    for name in ("demo.yaml", "offers.yaml"):
        shutil.copy(ROOT / "parameters" / name, tmp_path / "parameters" / name)
    shutil.copytree(data_dir, tmp_path / "data" / "debian-sections")
    return tmp_path / "parameters" / "demo.yaml"


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """The command in its own process: a read that blocks fails the test instead of hanging."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "gpubench_nb.cli", *argv],
        capture_output=True, text=True, timeout=120, cwd=cwd, env=env,
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["fifo", "symlink", "dangling", "socket"])
def test_an_output_that_is_not_a_regular_file_is_refused_and_kept(tmp_path: Path, kind) -> None:
    target, out = tmp_path / "target.txt", tmp_path / "out.html"
    target.write_text("keep me\n", encoding="utf-8")
    if kind == "fifo":
        os.mkfifo(out)
    elif kind == "symlink":
        out.symlink_to(target)
    elif kind == "dangling":
        out.symlink_to(tmp_path / "nowhere")
    else:
        import socket

        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(out))
        sock.close()
    with pytest.raises(BundleError, match=r"R5\.6: --out .* is a (FIFO|symlink|socket)"):
        check_output(out, option="--out", instead="write elsewhere")
    assert out.is_symlink() or not out.is_file()  # still what it was, not a renamed file
    assert target.read_text(encoding="utf-8") == "keep me\n"


def test_cli_writers_refuse_a_fifo_and_leave_it(demo: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"id": "x", "label": "y"}\n', encoding="utf-8")
    offers = str(demo.parent / "offers.yaml")
    for argv in (
        ["accept", str(demo), str(preds), "--checks", str(fifo)],
        ["ledger", "--offers", offers, "--offer", "h100-example", "--days", "7", "--lots",
         "1", "--start", "2026-01-01", str(tmp_path), "--out", str(fifo)],
        ["report", str(tmp_path), "--out", str(fifo)],
    ):  # fmt: skip
        done = _cli(*argv, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "is a FIFO" in done.stderr and "Traceback" not in done.stderr
        assert fifo.exists() and not fifo.is_file()


@pytest.mark.parametrize("via", ["inside", "symlink"])
def test_notebooks_copy_never_writes_into_a_bundle(tmp_path: Path, capsys, via: str) -> None:
    bundle = sealed(tmp_path / "b")
    target = bundle / "sub"
    if via == "symlink":
        (tmp_path / "link").symlink_to(bundle)
        target = tmp_path / "link" / "sub"
    assert main(["notebooks", "--copy", str(target)]) == 2
    err = capsys.readouterr().err
    assert "R5.6" in err and "bundle" in err and "Traceback" not in err
    assert layout.verify_manifest(bundle) == [] and not (bundle / "sub").exists()


def test_notebooks_copy_on_a_full_disk_leaves_no_partial_copy(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    calls = []

    def full(src, dst, *args):
        calls.append(dst)
        if len(calls) == 3:
            dst.write(b"half")
            raise OSError(errno.ENOSPC, "No space left on device")
        dst.write(src.read())

    monkeypatch.setattr(kernel.shutil, "copyfileobj", full)
    target = tmp_path / "nb"
    assert main(["notebooks", "--copy", str(target)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "space" in err.lower()
    assert not target.exists()


def test_notebooks_copy_unwritable_or_dangling_is_one_line(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    dangling = tmp_path / "gone"
    dangling.symlink_to(tmp_path / "nowhere")
    assert main(["notebooks", "--copy", str(dangling)]) == 2
    err = capsys.readouterr().err
    assert "symlink to the missing" in err and "Traceback" not in err

    def denied(self, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", denied)
    assert main(["notebooks", "--copy", str(tmp_path / "ro" / "nb")]) == 2
    err = capsys.readouterr().err
    assert "cannot write there (Permission denied)" in err and "Traceback" not in err


def test_a_folder_output_that_is_a_fifo_names_its_kind(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p")
    with pytest.raises(BundleError, match="is a FIFO"):
        check_output_folder(tmp_path / "p", option="--output-dir")


@pytest.mark.parametrize("command", ["validate", "run", "accept"])
def test_a_fifo_corpus_is_refused_with_its_kind(demo: Path, tmp_path: Path, command) -> None:
    corpus = demo.parent.parent / "data" / "debian-sections" / "eval.jsonl"
    preds = tmp_path / "p.jsonl"
    preds.write_text(corpus.read_text(encoding="utf-8"), encoding="utf-8")
    corpus.unlink()
    os.mkfifo(corpus)
    argv = {
        "validate": ["validate", str(demo)],
        "run": ["run", str(demo), "--output-dir", str(tmp_path / "out")],
        "accept": ["accept", str(demo), str(preds), "--checks", str(tmp_path / "c.json")],
    }[command]
    done = _cli(*argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "is a FIFO (named pipe), not a regular file" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out" / "demo").exists()


def test_a_fifo_experiment_file_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "exp.yaml")
    done = _cli("validate", str(tmp_path / "exp.yaml"), cwd=tmp_path)
    assert done.returncode == 2 and "is a FIFO" in done.stderr and "Traceback" not in done.stderr

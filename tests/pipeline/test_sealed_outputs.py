"""Issue 22 §1, §2, §5, §7: one output guard for every command, unique classify folders, the
campaign file through the one YAML reader, numeric options, and a full disk (R1.3, R5.6)."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
import yaml

from gpubench_nb.cli import main as cli_main
from gpubench_nb.errors import BundleError, ProtocolError
from gpubench_nb.pipeline import classify as classify_module
from gpubench_nb.protocol import bundle as layout
from gpubench_nb.protocol.outputs import check_output, check_output_folder
from tests.support.experiments import subset, write_yaml

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "parameters" / "demo.yaml"
OFFERS = REPO / "parameters" / "offers.yaml"


def sealed_bundle(folder: Path) -> Path:
    """A finished bundle as the guard sees one: a lock, expected IDs and a manifest."""
    folder.mkdir(parents=True)
    (folder / "protocol.lock.json").write_text("{}", encoding="utf-8")
    (folder / layout.EXPECTED_IDS_NAME).write_text("a\n", encoding="utf-8")
    layout.write_manifest(folder)
    return folder


def unfinished_bundle(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "protocol.lock.json").write_text("{}", encoding="utf-8")
    (folder / "protocol").mkdir()
    return folder


def snapshot(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# --- the one guard ------------------------------------------------------------------------------


def test_the_one_guard_refuses_every_place_inside_a_bundle(tmp_path: Path) -> None:
    done = sealed_bundle(tmp_path / "done")
    busy = unfinished_bundle(tmp_path / "busy")
    offers = tmp_path / "offers.yaml"
    offers.write_text("offers: []\n", encoding="utf-8")
    fix = "write elsewhere"
    refused_files = [
        done / "ledger.json",
        done / "protocol.lock.json",
        done / "runs" / "x" / "new.json",
        busy / "report.html",
        offers,  # the command's own input
    ]
    for out in refused_files:
        with pytest.raises(BundleError, match="Fix: write elsewhere"):
            check_output(out, option="--out", instead=fix, inputs=[offers])
    for folder in (done, done / "sub", busy, busy / "runs"):
        with pytest.raises(BundleError, match=r"R5\.6: --output-dir .* is (inside )?the .*bundle"):
            check_output_folder(folder, option="--output-dir")
    with pytest.raises(BundleError, match="is the input"):  # a folder given as an input file
        check_output_folder(offers, option="--output-dir", inputs=[offers])
    assert check_output_folder(tmp_path, option="--output-dir", inputs=[offers])  # holds it: ok
    assert check_output(tmp_path / "fresh.json", option="--out", instead=fix) == (
        tmp_path / "fresh.json"
    )
    assert check_output_folder(tmp_path / "outputs", option="--output-dir")
    assert not (tmp_path / "outputs").exists()  # the guard creates nothing


def test_the_suggested_folder_lies_outside_every_bundle(tmp_path: Path) -> None:
    done = sealed_bundle(tmp_path / "outputs" / "done")
    with pytest.raises(BundleError) as caught:
        check_output_folder(done / "runs", option="--output-dir")
    assert f"e.g. {tmp_path / 'outputs'}" in str(caught.value)


# --- classify -----------------------------------------------------------------------------------


def test_classify_into_a_finished_bundle_is_refused_and_adds_nothing(
    tmp_path: Path, capsys
) -> None:
    """Was: `classify --output-dir` pointing into a finished bundle added 11 files inside it."""
    done = sealed_bundle(tmp_path / "done")
    before = snapshot(done)
    code = cli_main(["classify", str(DEMO), "--variant", "b1", "--output-dir", str(done)])
    err = capsys.readouterr().err
    assert code == 2 and "R5.6" in err and "Fix:" in err and "Traceback" not in err
    assert snapshot(done) == before


def test_classify_with_a_missing_reference_bundle_leaves_nothing(tmp_path: Path, capsys) -> None:
    """Was: a classify with a missing --reference-bundle left a bundle folder behind."""
    out = tmp_path / "out"
    argv = ["classify", str(DEMO), "--variant", "b4", "--output-dir", str(out),
            "--reference-bundle", str(tmp_path / "nowhere")]  # fmt: skip
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert "--reference-bundle" in err and "no such bundle folder" in err
    assert not out.exists() or list(out.iterdir()) == []


def test_two_classify_in_the_same_second_get_distinct_folders(tmp_path: Path) -> None:
    """Was: two classify of one variant in the same second collided (FileExistsError)."""
    first = classify_module._reserve_bundle_dir(tmp_path, "exp", "b1")
    second = classify_module._reserve_bundle_dir(tmp_path, "exp", "b1")
    assert first != second and first.is_dir() and second.is_dir()
    assert second.name.startswith(first.name)  # same stamp, a number after it


# --- campaign -----------------------------------------------------------------------------------


def _campaign(folder: Path, campaign_id: str = "offers") -> Path:
    data = {
        "campaign_id": campaign_id,
        "experiment": str(DEMO),
        "offers": str(OFFERS),
        "targets": [
            {"id": "here", "offer": {"id": "h100-example", "days": 7, "lots": 1},
             "local": {"gpus": 0}},
        ],
    }  # fmt: skip
    path = folder / "campaign.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_campaign_run_never_writes_into_a_bundle(tmp_path: Path, capsys) -> None:
    """Was: `campaign run --output-dir` inside a bundle, or a campaign_id equal to an existing
    bundle's folder, wrote into that bundle."""
    pytest.importorskip("submitit", reason="campaigns need submitit")
    campaign = _campaign(tmp_path)
    outputs = tmp_path / "outputs"
    done = sealed_bundle(outputs / "offers")  # the campaign_id names this bundle
    other = sealed_bundle(outputs / "other")
    before = snapshot(outputs)
    code = cli_main(["campaign", "run", str(campaign), "--output-dir", str(outputs)])
    err = capsys.readouterr().err
    assert code == 2 and "campaign_id 'offers'," in err and "declare a campaign_id" in err
    code = cli_main(["campaign", "run", str(campaign), "--output-dir", str(other / "runs")])
    err = capsys.readouterr().err
    assert code == 2 and f"inside the finished bundle {other}" in err
    assert snapshot(outputs) == before
    assert sorted(p.name for p in outputs.iterdir()) == sorted([done.name, other.name])


@pytest.mark.parametrize("key", ["experiment", "offer"])
def test_a_campaign_key_given_twice_is_refused(tmp_path: Path, key: str) -> None:
    """Was: `offer:` or `experiment:` given twice was accepted, the last one winning (R1.3)."""
    pytest.importorskip("submitit", reason="campaigns need submitit")
    from gpubench_nb.pipeline.campaign.file import load_campaign

    path = _campaign(tmp_path)
    text = path.read_text(encoding="utf-8")
    if key == "experiment":
        text = text.replace("experiment:", f"experiment: {DEMO}\nexperiment:", 1)
    else:
        text = text.replace("  offer:", "  offer: {id: b200-example, days: 3, lots: 1}\n  offer:")
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ProtocolError, match=rf"key '{key}' is given twice"):
        load_campaign(path)


def test_a_campaign_file_has_the_experiment_files_size_limit(tmp_path: Path) -> None:
    pytest.importorskip("submitit", reason="campaigns need submitit")
    from gpubench_nb.pipeline.campaign.file import load_campaign

    path = _campaign(tmp_path)
    path.write_text(path.read_text(encoding="utf-8") + "#" * 1_100_000 + "\n", encoding="utf-8")
    with pytest.raises(ProtocolError, match="larger than 1,000,000"):
        load_campaign(path)


@pytest.mark.parametrize(
    "argv",
    [
        ["campaign", "run", "c.yaml", "--run-timeout", "-5"],
        ["campaign", "run", "c.yaml", "--run-timeout", "0"],
        ["ledger", "b", "--offer", "h", "--days", "-7", "--lots", "1", "--start", "2026-12-01"],
        ["ledger", "b", "--offer", "h", "--days", "7", "--lots", "0", "--start", "2026-12-01"],
    ],
)
def test_numeric_options_are_validated(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as caught:
        cli_main(argv)
    assert caught.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err


# --- §7: a full disk ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    from gpubench_nb.engine.backends import build_model
    from gpubench_nb.protocol.experiment import load_experiment

    root = tmp_path_factory.mktemp("sealed")
    subset(data_dir / "eval.jsonl", root / "eval.jsonl", 40)
    subset(data_dir / "train.jsonl", root / "train.jsonl", 400)
    subset(data_dir / "tune.jsonl", root / "tune.jsonl", 100)
    write_yaml(root, "experiment.yaml")
    build_model(load_experiment(root / "experiment.yaml"))
    return root


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EFBIG])
@pytest.mark.parametrize("command", ["classify", "run"])
def test_a_full_disk_is_one_line_and_leaves_no_half_made_bundle(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, code, command
) -> None:
    from gpubench_nb import atomic

    calls = []
    real = atomic.os.fsync

    def full(fd: int) -> None:
        calls.append(fd)
        if command == "run" and len(calls) == 1:
            return real(fd)  # the writer's holder file beside the bundle; then the lock fails
        raise OSError(code, "No space left on device" if code == errno.ENOSPC else "File too large")

    monkeypatch.setattr(atomic.os, "fsync", full)
    out = tmp_path / "out"
    argv = [command, str(workspace / "experiment.yaml"), "--output-dir", str(out)]
    if command == "classify":
        argv += ["--variant", "b1"]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "cannot write" in err and "protocol.lock.json" in err and "Fix: free space" in err
    left = [p for p in out.rglob("*")] if out.exists() else []
    assert not any(layout.is_bundle(p) for p in [out, *left] if p.is_dir())
    assert not any(p.name.endswith(".tmp") for p in left)
    assert not any(p.is_dir() and p.name.startswith("run-test") for p in left)  # none half-made


def test_reference_bundle_edited_is_refused_after_verifying_it(
    workspace: Path, tmp_path: Path
) -> None:
    """Was: a classify --reference-bundle whose reference was edited was used as the base."""
    reference = classify_module.classify(
        workspace / "experiment.yaml", "b1", output_dir=tmp_path / "ref"
    ).bundle_dir
    csv_path = reference / layout.CSV_NAME
    csv_path.write_text(csv_path.read_text(encoding="utf-8").replace(",true,", ",false,", 1))
    out = tmp_path / "out"
    with pytest.raises(ProtocolError, match="fails check-bundle"):
        classify_module.classify(
            workspace / "experiment.yaml", "b4", output_dir=out, reference_bundle=reference
        )
    assert not out.exists() or list(out.iterdir()) == []
    assert json.loads((reference / "protocol.lock.json").read_text(encoding="utf-8"))


def test_a_full_disk_inside_a_kernel_stops_the_run_instead_of_a_failed_row() -> None:
    """Was (tried on a 100 KB tmpfs): a run whose kernel hit ENOSPC became a failed row, so the
    rerun after freeing space never redid it. Now it is a refusal (no row): the rerun does it."""
    from gpubench_nb.errors import StorageError
    from gpubench_nb.pipeline.orchestrate import refusal_from_kernel

    class KernelError(Exception):
        ename = "OSError"
        evalue = "[Errno 28] No space left on device: '/o/run-test/runs/b4/cold-1/run.json'"

    refused = refusal_from_kernel(KernelError())
    assert isinstance(refused, StorageError)
    assert "cannot write /o/run-test/runs/b4/cold-1/run.json" in str(refused)
    KernelError.ename, KernelError.evalue = "ValueError", "[Errno 28] not an OSError"
    assert refusal_from_kernel(KernelError()) is None  # any other failure stays an observation

"""`gpubench-nb`: exit codes and messages of the commands that need no model (R1.5, R4)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpubench_nb.cli import main


def _gold(data_dir: Path) -> list[dict]:
    lines = (data_dir / "eval.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _write_predictions(path: Path, items: list[dict]) -> Path:
    text = "".join(json.dumps({"id": i["id"], "label": i["label"]}) + "\n" for i in items)
    path.write_text(text, encoding="utf-8")
    return path


def test_validate_prints_the_summary(repo_root: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["validate", str(repo_root / "parameters" / "demo.yaml")]) == 0
    out = capsys.readouterr().out
    assert "classes     10: admin, games" in out
    assert "corpus      1000 items, revision " in out
    assert "b1 (batch=1), b4 (batch=4), b8 (batch=8)" in out
    assert "macro_f1 >= 0.7, drop <= 0.01 vs b1" in out


def test_validate_says_what_it_checks_before_the_seconds_torch_takes(
    repo_root: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compile example sat silent for 74 s while torch started for the machine check: the
    line saying so is printed (and flushed) before that check begins; the demo needs none."""
    from gpubench_nb.pipeline import validate

    seen: list[str] = []
    monkeypatch.setattr(
        validate, "refuse_unrunnable", lambda exp: seen.append(capsys.readouterr().out)
    )
    assert main(["validate", str(repo_root / "parameters" / "bow-compile.yaml")]) == 0
    assert seen and seen[0].splitlines()[-1].startswith("machine     checking it can run them")
    assert main(["validate", str(repo_root / "parameters" / "demo.yaml")]) == 0
    assert "machine     checking" not in seen[-1] + capsys.readouterr().out


def test_validate_bad_yaml_exits_2_with_the_field(
    tmp_path: Path, repo_root: Path, capsys: pytest.CaptureFixture
) -> None:
    text = (repo_root / "parameters" / "demo.yaml").read_text(encoding="utf-8")
    bad = tmp_path / "parameters" / "bad.yaml"
    bad.parent.mkdir()
    bad.write_text(text.replace("warmup_iterations:", "warmup_iteration:"), encoding="utf-8")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "timing.warmup_iteration: unknown key" in err and "warmup_iterations" in err


def test_accept_exit_codes(
    tmp_path: Path, repo_root: Path, data_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    demo = str(repo_root / "parameters" / "demo.yaml")
    gold = _gold(data_dir)
    perfect = _write_predictions(tmp_path / "perfect.jsonl", gold)
    assert main(["accept", demo, str(perfect)]) == 0  # gold labels: macro-F1 1.0
    checks = json.loads((tmp_path / "checks.json").read_text())
    assert checks["corpus_accepted"] is True and checks["quality_value"] == 1.0
    # R1.6: 1,000 lines, but one ID duplicated and one missing: never accepted.
    swapped = _write_predictions(tmp_path / "dup.jsonl", [*gold[:-1], gold[0]])
    assert main(["accept", demo, str(swapped)]) == 1
    checks = json.loads((tmp_path / "checks.json").read_text())
    assert checks["missing_ids"] == [gold[-1]["id"]]
    assert checks["duplicated_ids"] == {gold[0]["id"]: [1, 1000]}
    # Far below the reference value: outside the tolerance (R1.3). (A reference above 1 is no
    # value of the metric: refused, exit 2, tests/test_cli_inputs.py.)
    labels = sorted({g["label"] for g in gold})
    worse = [
        {**g, "label": labels[(labels.index(g["label"]) + 1) % len(labels)]} if i < 50 else g
        for i, g in enumerate(gold)
    ]
    worse_path = _write_predictions(tmp_path / "worse.jsonl", worse)
    assert main(["accept", demo, str(worse_path), "--reference-value", "1.0"]) == 1
    checks = json.loads((tmp_path / "checks.json").read_text())
    assert checks["meets_threshold"] is True and checks["within_tolerance"] is False
    capsys.readouterr()
    assert main(["accept", demo, str(tmp_path / "absent.jsonl")]) == 2


def test_csv_check_template_and_bad_header(
    tmp_path: Path, repo_root: Path, capsys: pytest.CaptureFixture
) -> None:
    template = repo_root / "resultats-bruts.csv"
    assert main(["csv-check", str(template)]) == 0
    bad = tmp_path / "resultats-bruts.csv"
    shutil.copy(template, bad)
    bad.write_text(bad.read_text().replace("elapsed_seconds", "elapsed_ms"), encoding="utf-8")
    assert main(["csv-check", str(bad)]) == 2
    assert "elapsed_ms" in capsys.readouterr().err


def test_run_refused_part_way_closes_progress_at_the_real_count(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # issue 16.4: 1 of 3 runs finished, then a refusal: the bar ends at 1/3, not 100 %, and
    # the refusal is printed after it.
    from gpubench_nb.errors import ProtocolError
    from gpubench_nb.pipeline import orchestrate
    from gpubench_nb.pipeline.schedule import ScheduledRun

    def refused_part_way(*args, on_progress, **kwargs):
        run = ScheduledRun(1, "b1", "cold", 1)
        on_progress(run, 1, 3)
        on_progress(run, 2, 3)  # the first run is finished
        on_progress(ScheduledRun(2, "b4", "cold", 1), 2, 3)
        raise ProtocolError("10_measure refused: fixed.context: 128 -> 8", rule="R1.3")

    monkeypatch.setattr(orchestrate, "run_experiment", refused_part_way)
    assert main(["run", "parameters/demo.yaml"]) == 2
    err = capsys.readouterr().err
    bar, _, message = err.rpartition("gpubench-nb run: R1.3: 10_measure refused")
    assert bar and message.startswith(": fixed.context: 128 -> 8")
    # stderr is not a terminal here: one plain line per finished run (issue 25)
    assert bar.splitlines() == [bar.splitlines()[0]] and bar.startswith("[1/3] b1 cold 1  ")
    assert "100%" not in bar and "3/3" not in bar


def test_campaign_run_prints_each_state_and_exits_1_when_a_target_failed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    # The CLI makes one call (run_campaign) and shows its outcome: one line per target, the
    # resume hint on stderr and exit 1 when any target failed.
    from gpubench_nb.pipeline.campaign import run as campaign_run

    calls = []

    def fake(path, **kwargs):
        calls.append((path, kwargs))
        states = {"t1": "completed", "t2": "failed"}
        return campaign_run.CampaignResult(tmp_path, states, None)

    monkeypatch.setattr(campaign_run, "run_campaign", fake)
    assert main(["campaign", "run", "c.yaml", "--no-wait", "--targets", "t1", "t2"]) == 1
    out, err = capsys.readouterr()
    # Issue 25: each target's bundle, as an absolute path.
    assert out == f"t1: completed  bundle {tmp_path / 't1'}\nt2: failed  bundle {tmp_path / 't2'}\n"
    assert "some targets failed" in err and "campaign run` again" in err
    assert calls == [
        (
            "c.yaml",
            {
                "output_dir": "outputs",
                "targets": ["t1", "t2"],
                "resubmit": None,
                "local_executor": "local",
                "wait": False,
                "run_timeout_seconds": 1800,
            },
        )
    ]

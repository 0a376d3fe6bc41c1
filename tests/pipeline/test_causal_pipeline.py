"""The whole pipeline on parameters/llm-prompted.yaml with a tiny causal LM substituted for the
user's folder: generation options in the lock, run.json and every row's notes (R2.5); loglik
gives an accepted bundle, off-label generations a clearly rejected one. generate runs in real
papermill kernels (the causal_lm backend end to end); loglik makes the same steps' calls in this
process (tests/support/in_process.py), its report's token table read from the report module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpubench_nb.pipeline.orchestrate import run_experiment
from gpubench_nb.protocol.audit import check_bundle
from gpubench_nb.protocol.results import read_rows
from gpubench_nb.report.bundles import load_bundles, summary_of
from gpubench_nb.report.render import token_table
from scripts.tiny_decoders import tiny_causal_lm
from tests.support.in_process import steps_in_process

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
ITEMS = 12


def _experiment(root: Path, data_dir: Path, decision: str) -> Path:
    """The example declaration, small: 12 texts, one variant, one repeat, fp32 on CPU."""
    declaration = yaml.safe_load((ROOT / "parameters" / "llm-prompted.yaml").read_text("utf-8"))
    lines = (data_dir / "eval.jsonl").read_text(encoding="utf-8").splitlines()[::80][:ITEMS]
    (root / "eval.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    folder = tiny_causal_lm(root / "lm", "llama")
    declaration.update(experiment_id=f"tiny-{decision}", variants=[{"id": "b4", "batch": 4}])
    declaration["corpus"]["path"] = "eval.jsonl"
    declaration["model"]["path"] = declaration["tokenizer"]["path"] = str(folder)
    declaration["fixed"].update(precision="fp32", device="cpu", context=64)
    declaration["quality"].update(threshold=0.0, tolerance=1.0, reference_variant="b4")
    declaration["timing"].update(
        warmup_iterations=1, repeats=1, repeats_reason="a pipeline test, not a study"
    )
    declaration["pricing"]["offers"] = str(ROOT / "parameters" / "offers.yaml")
    prompt = declaration["model"]["prompt"]
    if decision == "generate":
        del prompt["length_normalisation"]
        prompt.update(decision="generate", max_new_tokens=2, stop=["."], normalise=["strip"])
    path = root / "experiment.yaml"
    path.write_text(yaml.safe_dump(declaration, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize(("decision", "kernels"), [("loglik", False), ("generate", True)])
def test_a_tiny_causal_lm_runs_the_whole_pipeline(tmp_path, data_dir, decision, kernels) -> None:
    experiment = _experiment(tmp_path, data_dir, decision)
    if kernels:
        bundle = run_experiment(experiment, output_dir=tmp_path / "o").bundle_dir
        html = (bundle / "report.html").read_text(encoding="utf-8")
        # the token table (report/render.py token_table) under its readable label
        assert "tokens/s (median)" in html
    else:
        with steps_in_process():
            bundle = run_experiment(experiment, output_dir=tmp_path / "o").bundle_dir
        tokens = token_table(summary_of(load_bundles([bundle])))
        assert tokens["tokens/s (median)"].notna().all(), tokens
    lock = json.loads((bundle / "protocol.lock.json").read_text(encoding="utf-8"))
    frozen = lock["declaration"]["model"]["prompt"]
    assert frozen["decision"] == decision and len(frozen["template_sha256"]) == 64
    rows = read_rows(bundle / "resultats-bruts.csv")
    measured = [r for r in rows if r["phase"] in ("cold", "warm")]
    assert len(measured) == 2 and all(r["elapsed_seconds"] for r in measured)
    for row in rows:
        assert f"R2.5 generation options: decision={decision}" in row["notes"]
        assert frozen["template_sha256"] in row["notes"]
    run = json.loads((bundle / "runs/b4/warm-1/run.json").read_text(encoding="utf-8"))
    assert run["generation"]["decision"] == decision and run["tokens_processed"] > ITEMS
    assert check_bundle(bundle) == []
    if decision == "loglik":
        assert all(r["corpus_accepted"] and r["format_valid"] for r in measured)
        assert run["off_label_answers"] == 0
    else:  # random weights answer off-label: the corpus is rejected, never mapped to a class
        assert run["off_label_answers"] > 0
        assert all(not r["format_valid"] and not r["corpus_accepted"] for r in measured)
        assert "generated answers are outside the declared classes" in measured[0]["notes"]
        checks = json.loads((bundle / "runs/b4/warm-1/checks.json").read_text("utf-8"))
        assert len(checks["malformed_lines"]) == run["off_label_answers"]

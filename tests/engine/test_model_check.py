"""`validate` on parameters/llm-prompted.yaml: what is missing until a model folder is given,
then how the declared prompt tokenises with a (tiny) model substituted for it (R1.1, R2.3)."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpubench_nb.cli import main
from scripts.tiny_decoders import tiny_causal_lm

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "parameters" / "llm-prompted.yaml"


def _substituted(tmp_path: Path, folder: Path) -> Path:
    text = EXAMPLE.read_text(encoding="utf-8")
    declaration = yaml.safe_load(text)
    declaration["corpus"]["path"] = str(ROOT / "data" / "debian-sections" / "eval.jsonl")
    declaration["pricing"]["offers"] = str(ROOT / "parameters" / "offers.yaml")
    declaration["model"]["path"] = str(folder)
    declaration["tokenizer"]["path"] = str(folder)
    path = tmp_path / "llm-prompted.yaml"
    path.write_text(yaml.safe_dump(declaration, sort_keys=False), encoding="utf-8")
    return path


def test_validate_says_the_model_folder_is_missing(capsys) -> None:
    assert main(["validate", str(EXAMPLE)]) == 2
    err = capsys.readouterr().err
    assert "R1.1" in err and "model.path /path/to/local/causal-lm-folder is not an existing" in err
    assert "tokenizer.path" in err and "huggingface-cli download" in err


def test_validate_lists_the_files_a_partial_folder_lacks(tmp_path, capsys) -> None:
    folder = tmp_path / "partial"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    assert main(["validate", str(_substituted(tmp_path, folder))]) == 2
    err = capsys.readouterr().err
    assert "holds no weights" in err and "holds no tokenizer file" in err
    assert "no config.json" not in err


def test_validate_checks_the_example_against_a_tiny_model(tmp_path, capsys) -> None:
    folder = tiny_causal_lm(tmp_path / "lm", "llama", positions=1024)
    assert main(["validate", str(_substituted(tmp_path, folder))]) == 0
    out = capsys.readouterr().out
    assert "decision    loglik (fast path" in out
    assert "chat template off" in out and "fits the model's 1024 positions" in out


def test_validate_refuses_a_context_the_model_cannot_hold(tmp_path, capsys) -> None:
    folder = tiny_causal_lm(tmp_path / "lm", "gpt2", positions=256)
    assert main(["validate", str(_substituted(tmp_path, folder))]) == 2
    assert "R2.3" in capsys.readouterr().err

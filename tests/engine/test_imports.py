"""import_backend_modules: after it, loading a model imports no module (issue 23 §1, R3.2).

Checked in a fresh process per backend (this test process has imported everything already):
the modules in ``sys.modules`` before and after ``load_backend`` must be the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.tiny_decoders import tiny_causal_lm, tiny_classifier

PROBE = r"""
import json, sys
from pathlib import Path
from types import SimpleNamespace
from gpubench_nb.engine.backends import load_backend
from gpubench_nb.engine.backends.imports import import_backend_modules
from gpubench_nb.protocol.prompting import PromptSpec

backend, folder = sys.argv[1], Path(sys.argv[2])
prompt = PromptSpec(template="text : {text} section :", chat_template=True,
    verbalisations=(" games", " net"), decision="generate", length_normalisation="none",
    max_new_tokens=3, stop=(), normalise=("strip",)) if backend == "causal_lm" else None
model = SimpleNamespace(backend=backend, path=folder, build={}, prompt=prompt)
tokenizer = SimpleNamespace(path=folder)
import_backend_modules(model, tokenizer)
before = set(sys.modules)
load_backend(model, tokenizer, classes=("games", "net"), device="cpu", precision="fp32")
print(json.dumps(sorted(set(sys.modules) - before)))
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["hf", "causal_lm"])
def test_a_load_after_the_imports_imports_nothing(backend, tmp_path: Path) -> None:
    """hf (a decoder classifier) and causal_lm with a chat template: before issue 23 their
    load imported transformers' model and tokenizer modules inside the load clock."""
    if backend == "hf":
        folder = tiny_classifier(tmp_path / "m", "llama", ("games", "net"), pad_token_id=0)
    else:
        folder = tiny_causal_lm(tmp_path / "m", "llama", chat_template=True)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, backend, str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []

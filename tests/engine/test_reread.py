"""end_to_end reads the corpus again inside the timer, the way it was declared (R3.1, R1.1)."""

from __future__ import annotations

import json
from pathlib import Path

from gpubench_nb.engine.measure import _default_reader
from gpubench_nb.protocol.corpus import load_corpus


def test_the_default_reader_reads_with_the_declared_fields(tmp_path: Path) -> None:
    path = tmp_path / "eval.jsonl"
    rows = [{"doc": f"d{i}", "body": f"text {i}", "y": "a" if i % 2 else "b"} for i in range(4)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    corpus = load_corpus(
        path, id_field="doc", text_field="body", label_field="y", classes=["a", "b"]
    )
    again = _default_reader(corpus)()  # with load_corpus's defaults: no field 'id', refused
    assert again.revision == corpus.revision and again.ids == corpus.ids

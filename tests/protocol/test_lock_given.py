"""`run --protocol`: a lock frozen elsewhere is kept as is, or refused with each change (R1.3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpubench_nb.errors import ProtocolError
from gpubench_nb.protocol.experiment import load_experiment
from gpubench_nb.protocol.lock import (
    LOCK_NAME,
    build_lock,
    canonical_sha256,
    freeze,
    read_given_lock,
    seal_lock,
)

DEMO = Path(__file__).resolve().parents[2] / "parameters" / "demo.yaml"
PRINTS = {"corpus_revision": "c" * 64, "model_revision": "m" * 64, "tokenizer_revision": "t" * 64}


def _given(tmp_path: Path, **changes: object) -> Path:
    lock = build_lock(load_experiment(DEMO), {**PRINTS, **changes})
    lock = seal_lock({**lock, "created_utc": "2020-01-01T00:00:00Z"})  # frozen elsewhere, earlier
    path = tmp_path / "given" / LOCK_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(lock), encoding="utf-8")
    return path


def test_a_matching_machine_keeps_the_given_lock_verbatim(tmp_path: Path) -> None:
    given_path = _given(tmp_path)
    given = read_given_lock(given_path.parent)  # a folder holding the lock works too
    frozen = freeze(tmp_path / "bundle", load_experiment(DEMO), dict(PRINTS), given=given)
    kept = json.loads((tmp_path / "bundle" / LOCK_NAME).read_text(encoding="utf-8"))
    assert kept == frozen.to_dict() == json.loads(given_path.read_text(encoding="utf-8"))
    assert kept["created_utc"] == "2020-01-01T00:00:00Z"
    # resuming the same bundle with the same lock is accepted
    freeze(tmp_path / "bundle", load_experiment(DEMO), dict(PRINTS), given=given)


def test_a_different_machine_is_refused_with_every_difference(tmp_path: Path) -> None:
    given = read_given_lock(_given(tmp_path))
    text = DEMO.read_text(encoding="utf-8").replace("repeats: 5", "repeats: 6")
    changed = tmp_path / "parameters" / "demo.yaml"  # the same relative paths, elsewhere
    changed.parent.mkdir()
    changed.write_text(text, encoding="utf-8")
    experiment = load_experiment(changed)
    prints = {**PRINTS, "model_revision": "n" * 64}
    with pytest.raises(ProtocolError) as caught:
        freeze(tmp_path / "bundle", experiment, prints, given=given)
    message = str(caught.value)
    assert message.startswith("R1.3: ")
    assert "declaration.timing.repeats: 5 -> 6" in message
    assert f"fingerprints.model_revision: '{'m' * 64}' -> '{'n' * 64}'" in message
    assert not (tmp_path / "bundle" / LOCK_NAME).exists()  # nothing frozen on refusal


def test_a_bundle_frozen_under_another_lock_is_not_rebound(tmp_path: Path) -> None:
    freeze(tmp_path / "bundle", load_experiment(DEMO), {**PRINTS, "corpus_revision": "d" * 64})
    given = read_given_lock(_given(tmp_path))
    with pytest.raises(ProtocolError, match="changed since this bundle was frozen"):
        freeze(tmp_path / "bundle", load_experiment(DEMO), dict(PRINTS), given=given)


def test_an_edited_or_missing_lock_is_refused(tmp_path: Path) -> None:
    path = _given(tmp_path)
    lock = json.loads(path.read_text(encoding="utf-8"))
    lock["declaration"]["timing"]["repeats"] = 1  # edited by hand, sha256 left as it was
    path.write_text(json.dumps(lock), encoding="utf-8")
    with pytest.raises(ProtocolError, match="sha256 does not match"):
        read_given_lock(path)
    frozen = {"declaration": lock["declaration"], "fingerprints": lock["fingerprints"]}
    lock["sha256"] = canonical_sha256(frozen)  # a consistent lock of another protocol reads
    path.write_text(json.dumps(seal_lock(lock)), encoding="utf-8")
    assert read_given_lock(path).declared("timing", "repeats") == 1
    with pytest.raises(ProtocolError, match="protocol lock not found"):
        read_given_lock(tmp_path / "nowhere.json")
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ProtocolError, match=r"unreadable JSON .*Fix: copy it again, unchanged"):
        read_given_lock(path)


@pytest.mark.parametrize(
    ("field", "edited"),
    [("experiment_id", "someone-else"), ("created_utc", "2019-06-01T00:00:00Z")],
)
def test_an_edited_unhashed_field_of_a_given_lock_is_refused(
    tmp_path: Path, field: str, edited: str
) -> None:
    """Issue 22 §5: `run --protocol` with a lock whose experiment_id or created_utc was edited
    froze the bundle with the edited values (neither was under the sha256). lock_sha256 now
    covers them: the edit is refused, R1.3, and nothing is frozen."""
    path = _given(tmp_path)
    lock = json.loads(path.read_text(encoding="utf-8"))
    lock[field] = edited
    path.write_text(json.dumps(lock), encoding="utf-8")
    with pytest.raises(ProtocolError, match=r"R1\.3: .*lock_sha256 does not match"):
        read_given_lock(path)


def test_a_given_lock_without_a_seal_is_refused(tmp_path: Path) -> None:
    """A lock without lock_sha256 (or with it deleted) leaves experiment_id and created_utc
    unprotected: refused with the fix, never frozen as it stands (issue 22 §5)."""
    path = _given(tmp_path)
    lock = json.loads(path.read_text(encoding="utf-8"))
    del lock["lock_sha256"]
    lock["experiment_id"] = "someone-else"
    path.write_text(json.dumps(lock), encoding="utf-8")
    with pytest.raises(ProtocolError, match="has no lock_sha256"):
        read_given_lock(path)

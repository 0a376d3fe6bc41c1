"""The protocol lock (R1.1, R1.3): declaration and fingerprints frozen before any measurement."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench_nb.atomic import write_json_atomic
from gpubench_nb.errors import ProtocolError
from gpubench_nb.protocol.bundle import CAMPAIGN_FROZEN_DIR, LOCK_NAME
from gpubench_nb.protocol.clock import utc_now
from gpubench_nb.protocol.experiment_spec import Experiment
from gpubench_nb.protocol.records import FORMAT_VERSION, Record

# ``sha256`` covers FROZEN (compared between runs and machines); LOCK_SEAL covers every field,
# so an edit of experiment_id, created_utc, notes or corpus_identity is seen too (R1.3).
FROZEN = ("declaration", "fingerprints")
LOCK_SEAL = "lock_sha256"
# Present in every sealed format: a lock with it and no seal had its seal removed.
SEALED_FORMAT_KEY = "corpus_identity"


@dataclass(frozen=True, kw_only=True)
class LockRecord(Record):
    """``protocol.lock.json``: the declaration and fingerprints frozen before any measurement
    (R1.1, R1.3). ``data`` is the file as written, which both checksums cover; a lock written
    before ``format_version`` was stamped reads as version 1, its fields as they were."""

    NAME = LOCK_NAME
    RULE = "R1.3"
    ERROR = ProtocolError
    FIX = "restore it or use --fresh"
    experiment_id: str | None = None
    declaration: Mapping[str, Any] | None = None
    fingerprints: Mapping[str, Any] | None = None
    sha256: str | None = None
    notes: str | None = None
    created_utc: str | None = None
    corpus_identity: str | None = None  # R5.3; absent in locks frozen before it was kept
    lock_sha256: str | None = None

    def declared(self, *keys: str) -> Any:
        """A value of the frozen declaration by key path, or None (absent or older)."""
        node: Any = self.declaration or {}
        for key in keys:
            node = node.get(key) if isinstance(node, Mapping) else None
        return node

    @property
    def corpus_revision(self) -> str | None:
        return (self.fingerprints or {}).get("corpus_revision")


def canonical_sha256(data: Any) -> str:
    """SHA-256 of the canonical JSON form (sorted keys, no spaces, UTF-8)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def frozen_part(lock: LockRecord | dict[str, Any]) -> dict[str, Any]:
    """The part of ``lock`` its ``sha256`` covers and runs are compared on (FROZEN)."""
    return {key: _written(lock).get(key) for key in FROZEN}


def _written(lock: LockRecord | Mapping[str, Any]) -> dict[str, Any]:
    """The lock's fields as written: the checksums cover them exactly."""
    return dict(lock.to_dict() if isinstance(lock, LockRecord) else lock)


def _sealed_body(lock: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in lock.items() if k != LOCK_SEAL}


def build_lock(
    experiment: Experiment, fingerprints: dict[str, str], corpus_identity: str | None = None
) -> dict[str, Any]:
    """The lock's content: normalised declaration, fingerprints and their joint SHA-256, then
    the corpus identity (R5.3) and ``lock_sha256``, which seals every other field of the lock."""
    frozen = {
        "declaration": experiment.normalised(),
        "fingerprints": dict(sorted(fingerprints.items())),
    }
    lock = {
        "format_version": FORMAT_VERSION,  # sealed with the rest (R1.3)
        "experiment_id": experiment.experiment_id,
        **frozen,
        "sha256": canonical_sha256(frozen),
        "notes": experiment.notes,
        "created_utc": utc_now(),
    }
    if corpus_identity is not None:
        lock[SEALED_FORMAT_KEY] = corpus_identity
    return seal_lock(lock)


def seal_lock(lock: dict[str, Any]) -> dict[str, Any]:
    """``lock`` with ``lock_sha256``: the SHA-256 of every other field. ``sha256`` stays as it
    was, so bundles frozen before the seal keep verifying."""
    body = _sealed_body(lock)
    return {**body, LOCK_SEAL: canonical_sha256(body)}


def lock_problems(record: LockRecord | dict[str, Any]) -> list[str]:
    """Why ``lock`` cannot be trusted, or []: the one check of both checksums (R1.3); an unsealed
    lock passes only in the pre-seal format with the declared id."""
    lock = _written(record)
    found = []
    if canonical_sha256(frozen_part(lock)) != lock.get("sha256"):
        found.append(f"{LOCK_NAME}: its sha256 does not match its content (edited, R1.3)")
    if LOCK_SEAL in lock:
        if canonical_sha256(_sealed_body(lock)) != lock[LOCK_SEAL]:
            found.append(
                f"{LOCK_NAME}: its {LOCK_SEAL} does not match its fields (experiment_id, "
                "created_utc, notes or corpus_identity edited after freezing, R1.3)"
            )
    elif SEALED_FORMAT_KEY in lock:
        found.append(
            f"{LOCK_NAME}: it has no {LOCK_SEAL}, yet it records {SEALED_FORMAT_KEY}, which only "
            "versions that seal every lock write: the seal was removed (R1.3)"
        )
    else:
        declared = (lock.get("declaration") or {}).get("experiment_id")
        if declared is not None and lock.get("experiment_id") != declared:
            found.append(
                f"{LOCK_NAME}: experiment_id {lock.get('experiment_id')!r} is not the "
                f"declaration's {declared!r} (edited after freezing, R1.3)"
            )
    return found


def differences(old: Any, new: Any, where: str = "") -> list[str]:
    """Human-readable list of what changed between two JSON values, by dotted path."""
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[str] = []
        for key in sorted(set(old) | set(new)):
            path = f"{where}.{key}" if where else str(key)
            if key not in old:
                found.append(f"{path}: added ({new[key]!r})")
            elif key not in new:
                found.append(f"{path}: removed (was {old[key]!r})")
            else:
                found.extend(differences(old[key], new[key], path))
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        found = []  # item by item, so a changed variant setting reads `variants[0].context`
        for index, (before, after) in enumerate(zip(old, new, strict=True)):
            found.extend(differences(before, after, f"{where}[{index}]"))
        return found
    return [] if old == new else [f"{where}: {old!r} -> {new!r}"]


def _read(path: Path, missing: str, fix: str) -> LockRecord:
    """The lock at ``path``, read through its record; ProtocolError naming ``fix`` (R1.3)."""
    lock = LockRecord.load(path, fix)
    if lock is None:
        raise ProtocolError(f"{path}: {missing}", rule="R1.3")
    return lock


def read_lock(bundle_dir: Path | str) -> LockRecord:
    """The bundle's lock; ProtocolError when absent, unreadable or not an object."""
    path = Path(bundle_dir) / LOCK_NAME
    return _read(
        path, "no protocol lock; run `gpubench-nb run` first", "fix: restore it or use --fresh"
    )


def read_given_lock(path: str | Path) -> LockRecord:
    """A lock handed to ``run --protocol`` (the file, or a folder holding one); one edited after
    it was frozen (a checksum that does not match) is refused (R1.3)."""
    path = Path(path)
    if path.is_dir():
        path = path / LOCK_NAME
    missing = (
        f"protocol lock not found. Fix: copy the campaign's {LOCK_NAME} (outputs/<campaign>/"
        f"{CAMPAIGN_FROZEN_DIR}/{LOCK_NAME}) to this machine and pass its path"
    )
    lock = _read(path, missing, "Fix: copy it again, unchanged")
    if lock.lock_sha256 is None:
        raise ProtocolError(
            f"{path}: the lock has no {LOCK_SEAL}, so its experiment_id and created_utc are not "
            "covered by any hash and would be frozen as they stand (R1.3). Fix: freeze the "
            "campaign with this version of gpubench-nb (a new campaign_id) and copy that lock",
            rule="R1.3",
        )
    broken = lock_problems(lock)
    if broken:
        raise ProtocolError(
            f"{path}: {broken[0]}. Fix: copy it again, unchanged, from where it was frozen",
            rule="R1.3",
        )
    return lock


def _refuse_changes(changed: list[str], head: str, fix: str) -> None:
    """Refuse, listing every difference one per line, when there is any (R1.3)."""
    if changed:
        listing = "\n  ".join(changed)
        raise ProtocolError(f"{head}:\n  {listing}\nFix: {fix}", rule="R1.3")


def freeze(
    bundle_dir: Path,
    experiment: Experiment,
    fingerprints: dict[str, str],
    given: LockRecord | None = None,
    corpus_identity: str | None = None,
) -> LockRecord:
    """Write the lock, or check the existing one: a changed protocol is refused (R1.3). With
    ``given`` (a lock frozen elsewhere), this machine's must equal it, and ``given`` is kept."""
    path = Path(bundle_dir) / LOCK_NAME
    lock = build_lock(experiment, fingerprints, corpus_identity)
    if given is not None:
        _refuse_changes(
            differences(frozen_part(given), frozen_part(lock)),
            "this machine's experiment differs from the protocol lock given with --protocol "
            "(lock value -> this machine's value)",
            "run the same experiment YAML with the same corpus, model and tokenizer files as "
            "where the lock was frozen (copy them with it), or freeze a new campaign",
        )
        if corpus_identity is not None and given.corpus_identity != corpus_identity:
            raise ProtocolError(
                f"the protocol lock given with --protocol records corpus identity "
                f"{str(given.corpus_identity)[:12]}, this machine's corpus is "
                f"{corpus_identity[:12]}. Fix: copy the corpus with the lock",
                rule="R5.3",
            )
        lock = _written(given)  # kept as frozen there, byte for byte in its fields
    if not path.exists():
        write_json_atomic(path, lock)  # sealed as built: the seal covers its format_version
        return LockRecord.from_dict(lock, str(path))
    old = read_lock(bundle_dir)
    broken = lock_problems(old)  # never resumed, never sealed again: check-bundle refuses it
    if broken:
        raise ProtocolError(
            f"{path}: {'; '.join(broken)}. Fix: restore the bundle's lock from a copy, or pass "
            "--fresh to set this bundle aside and measure anew",
            rule="R1.3",
        )
    _refuse_changes(
        differences(frozen_part(old), frozen_part(lock)),
        f"{path}: the protocol changed since this bundle was frozen",
        "restore the declaration, model and corpus, or give the experiment a new "
        "experiment_id (or pass --fresh to discard this bundle)",
    )
    return old


def require_frozen(
    bundle_dir: Path | str,
    experiment: Experiment,
    fingerprints: dict[str, str] | None = None,
    *,
    step: str,
) -> LockRecord:
    """Refuse unless ``experiment`` and the read files' fingerprints equal the lock (R1.3, R1.1);
    kernels call it first, so later YAML edits cannot reach them."""
    lock = read_lock(Path(bundle_dir))
    path = Path(bundle_dir) / LOCK_NAME
    changed = differences(_written(lock).get("declaration"), experiment.normalised(), "declaration")
    kept = lock.fingerprints or {}
    changed += [  # the files this step read, said short
        f"fingerprints.{name}: {str(kept.get(name))[:12]} -> {str(value)[:12]} (the file read now)"
        for name, value in sorted((fingerprints or {}).items())
        if kept.get(name) != value
    ]
    _refuse_changes(
        lock_problems(lock) + changed,
        f"{step} refused: {experiment.source} or the files it names differ from the frozen "
        f"protocol {path}",
        "restore the declaration and files as frozen (the frozen copy is "
        "protocol/experiment.yaml in the bundle), or start a new experiment_id; nothing was "
        "measured with these differences",
    )
    return lock

"""Reading a predictions file (R1.5): one pass, a fast path per well-formed line, and a
diagnosis in words for every line that is not ``{"id": str, "label": <declared class>}``."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, NamedTuple

from gpubench_nb.errors import PredictionsError
from gpubench_nb.protocol.corpus_file import (
    BOM,
    DuplicateKeyError,
    encodable,
    strict_json_line,
    strict_json_loads,
)
from gpubench_nb.protocol.outputs import regular_input

PREDICTION_KEYS = frozenset({"id", "label"})


class PredictionLines(NamedTuple):
    """What one pass over a predictions file found."""

    ids: list[str]  # every record's ID, in file order, duplicates included
    labels: list[int]  # label index per record; -1 where the label is unusable (also malformed)
    skipped: list[int]  # line numbers that gave no record
    malformed: list[dict[str, Any]]  # {"line": n, "error": "..."}, in line order
    bom: bool  # the file started with a UTF-8 BOM (tolerated)


def _diagnose(raw: str, class_index: dict[str, int]) -> tuple[str | None, int, str]:
    """Slow path for a line the fast path did not take: (id or None, label index, error)."""
    if not raw.strip():
        return None, -1, "blank line; remove it (one JSON object per line)"
    if not encodable(raw):
        return None, -1, "bytes that are not UTF-8; write the predictions as UTF-8"
    try:
        obj = strict_json_loads(raw)
    except DuplicateKeyError as exc:
        return None, -1, f"{exc}; write 'id' and 'label' once each"
    except (ValueError, RecursionError) as exc:
        return None, -1, f"not valid JSON ({exc})"
    if not isinstance(obj, dict):
        return None, -1, f'a JSON {type(obj).__name__}, not an object {{"id": ..., "label": ...}}'
    errors = []
    for key, value in ((key, obj.get(key)) for key in ("id", "label")):
        if key not in obj:
            errors.append(f"field '{key}' is missing")
        elif not isinstance(value, str):
            errors.append(f"'{key}' is a {type(value).__name__} ({value!r}), not a string")
    item_id, label = obj.get("id"), obj.get("label")
    if isinstance(label, str) and label not in class_index:
        errors.append(f"label {label!r} is not one of the declared classes (R1.3)")
    label_index = class_index.get(label, -1) if isinstance(label, str) else -1
    item_id = item_id if isinstance(item_id, str) else None
    extra = sorted(set(obj) - PREDICTION_KEYS)
    if extra:
        errors.append(f"extra field(s) {extra}; only 'id' and 'label' are allowed")
    return item_id, label_index, "; ".join(errors)


def read_predictions(path: Path, class_index: dict[str, int]) -> PredictionLines:
    """One pass, cheap type checks on the fast path; label index -1 marks a record whose label
    is unusable (also in ``malformed``); an unreadable file raises ``PredictionsError`` (R1.5)."""
    regular_input(path, "predictions file", PredictionsError, "R1.5")
    try:
        with open(path, "rb") as probe:
            bom = probe.read(len(BOM)) == BOM
        handle = open(  # noqa: SIM115 - closed by the with below
            path, encoding="utf-8-sig" if bom else "utf-8", errors="surrogateescape"
        )
    except OSError as exc:
        raise PredictionsError(
            f"cannot read predictions file {path} ({exc.strerror or exc}); check that the run "
            "wrote it",
            rule="R1.5",
        ) from exc
    ids: list[str] = []
    labels: list[int] = []
    skipped: list[int] = []
    malformed: list[dict[str, Any]] = []
    add_id, add_label, class_of = ids.append, labels.append, class_index.get
    loads = strict_json_line  # a key given twice is refused, not "last one wins"
    with handle:
        try:
            for raw in handle:
                try:
                    obj = loads(raw)
                except (ValueError, RecursionError):  # a label nested 100,000 deep: malformed
                    obj = None
                if type(obj) is dict and len(obj) == 2:
                    item_id = obj.get("id")
                    label = obj.get("label")
                    if type(item_id) is str and type(label) is str:
                        index = class_of(label)
                        if index is not None:
                            add_id(item_id)
                            add_label(index)
                            continue
                # Slow path: the line number is the count of lines consumed so far.
                line = len(ids) + len(skipped) + 1
                item_id, index, error = _diagnose(raw, class_index)
                if item_id is None:
                    skipped.append(line)
                else:
                    add_id(item_id)
                    add_label(index)
                if error:
                    malformed.append({"line": line, "error": error})
        except OSError as exc:
            raise PredictionsError(
                f"cannot read predictions file {path} ({exc}); check the file", rule="R1.5"
            ) from exc
    return PredictionLines(ids, labels, skipped, malformed, bom)


def lines_of_records(count: int, skipped: list[int]) -> list[int]:
    """Line number of each record, given the lines that produced no record."""
    skip = set(skipped)
    return list(itertools.islice((n for n in itertools.count(1) if n not in skip), count))

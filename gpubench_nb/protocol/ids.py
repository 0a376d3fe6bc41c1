"""Item IDs as canonical text (R1.2, R1.5), and JSON objects whose keys are each given once.

An ID round-trips through a line-based file (no control or line-separator character, no
surrounding whitespace), and two IDs equal after Unicode NFC normalisation are the same ID.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

# Categories that break a line-based file (controls Cc, separators Zl/Zp: str.splitlines splits
# on them) or make two IDs look the same (invisible format characters Cf: U+200B, U+FEFF, bidi).
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Zl", "Zp", "Cf"})


def id_key(item_id: str) -> str:
    """The form in which two IDs are compared: NFC (ASCII IDs, the usual case, are their own)."""
    return item_id if item_id.isascii() else unicodedata.normalize("NFC", item_id)


def id_problem(item_id: str) -> str | None:
    """Why ``item_id`` is not a canonical ID, or None when it is one."""
    if not item_id:
        return "is empty"
    if not (item_id.isascii() and item_id.isprintable()):  # the usual case skips the loop
        for position, char in enumerate(item_id, start=1):
            if unicodedata.category(char) in _FORBIDDEN_CATEGORIES:
                return (
                    f"holds the control, line-separator or invisible character "
                    f"U+{ord(char):04X} at position {position}"
                )
    if item_id != item_id.strip():
        return "is whitespace-padded (surrounding whitespace)"
    return None


class DuplicateKeyError(ValueError):
    """A JSON object names the same key twice (``json`` keeps the last one silently)."""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise DuplicateKeyError(f"key {twice!r} is given twice in one object")
    return obj


# One decoder, built once: json.loads(..., object_pairs_hook=...) would build one per call and
# cost about twice as much on a million lines; this one costs about what plain json.loads does.
_STRICT = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys)
strict_json_loads = _STRICT.decode
_scan_once = _STRICT.scan_once


def strict_json_line(line: str) -> Any:
    """``strict_json_loads`` of one line: the C scanner alone on a well-formed line; anything
    else (leading whitespace, trailing data, an error to explain) goes the full way."""
    try:
        obj, end = _scan_once(line, 0)
    except (StopIteration, ValueError):
        return strict_json_loads(line)
    if end == len(line) or line[end:].isspace():  # e.g. the line's own "\n" or "\r\n"
        return obj
    return strict_json_loads(line)

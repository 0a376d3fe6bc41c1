"""Item IDs as canonical text (R1.2, R1.5).

An ID round-trips through a line-based file (no control or line-separator character, no
surrounding whitespace), and two IDs equal after Unicode NFC normalisation are the same ID.
"""

from __future__ import annotations

import unicodedata

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

"""Problems grouped by kind: the same failure on many lines, rows, runs or files is said once,
with its count and where, by every checker (corpus, csv-check, check-bundle)."""

from __future__ import annotations

import itertools
import re

SHOWN_PLACES = 6  # places (or runs of consecutive numbers) named before "..."
MAX_LISTED = 20  # kinds said in one exception; the count is always complete
_VALUES = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|-?\d+(?:\.\d+)?")


def failure_kind(message: str) -> str:
    """``message`` with its values (quoted strings, numbers) blanked: two messages of one kind
    differ only in their values (``'x' is not an integer`` and ``'y' is not an integer``)."""
    return _VALUES.sub("…", message)


def listed(kinds: list[str], count: int) -> str:
    """``count`` problems said as ``kinds`` group them: at most MAX_LISTED, then how many more."""
    more = f"; ... and {len(kinds) - MAX_LISTED} more kind(s)" if len(kinds) > MAX_LISTED else ""
    return f"{count} problem(s): " + "; ".join(kinds[:MAX_LISTED]) + more


def places_text(places: list[int] | list[str]) -> str:
    """``1-45``; ``2, 5-9, 12``; ``b1/cold-1, b1/warm-1, ...``: consecutive numbers as one
    range, at most SHOWN_PLACES pieces, then "..."."""
    pieces = [str(p) for p in dict.fromkeys(places)]
    if all(isinstance(p, int) for p in places):
        numbers = enumerate(sorted(set(places)))  # type: ignore[type-var]
        runs = [[n for _, n in run] for _, run in itertools.groupby(numbers, lambda p: p[1] - p[0])]
        pieces = [str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs]
    more = ", ..." if len(pieces) > SHOWN_PLACES else ""
    return ", ".join(pieces[:SHOWN_PLACES]) + more


class Problems:
    """Problems found by one check, grouped by kind in the order first met: a kind met more than
    once is said once, its first message then ``; the same in 45 rows (rows 1-45)``."""

    def __init__(self, unit: str = "line") -> None:
        self.unit = unit  # what a place is: "line", "row", "run", "file"
        self.kinds: dict[str, tuple[str, list]] = {}  # kind -> (first message, places)

    def add(self, kind: str, place: int | str, message: str) -> None:
        """Record ``message`` (already naming ``place``) as one occurrence of ``kind``."""
        self.kinds.setdefault(kind, (message, []))[1].append(place)

    def __len__(self) -> int:
        return sum(len(places) for _, places in self.kinds.values())

    def lines(self) -> list[str]:
        """One sentence per kind; a repeated kind says in how many places, and which."""
        out = []
        for message, places in self.kinds.values():
            if len(places) > 1:
                unit = f"{self.unit}s"
                message += f"; the same in {len(places)} {unit} ({unit} {places_text(places)})"
            out.append(message)
        return out

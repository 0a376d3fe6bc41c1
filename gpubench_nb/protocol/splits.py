"""R1.4: training, tuning and evaluation data stay separate: no shared ID, no identical text."""

from __future__ import annotations

import itertools
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from gpubench_nb.errors import CorpusError
from gpubench_nb.protocol.ids import id_key


class Split(Protocol):
    """What R1.4 reads of a loaded split: a ``corpus.Corpus`` (typed here by its shape, since
    ``corpus.load_declared_corpora`` calls ``check_disjoint``: no import back)."""

    path: Path
    items: Sequence[Any]  # corpus.CorpusItem: .id, .text

    @property
    def ids(self) -> Sequence[str]: ...


def normalise_text(text: str) -> str:
    """NFKC, casefold and collapse whitespace: the form in which two texts count as identical
    (a composed or decomposed "é", a full-width "Ａ" never pass as two texts, R1.4)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(unicodedata.normalize("NFKC", folded).split())


def _overlap(a: Split, b: Split) -> tuple[list[str], list[tuple[str, str]]]:
    b_ids = set(map(id_key, b.ids))
    shared_ids = [item_id for item_id in a.ids if id_key(item_id) in b_ids]
    b_texts: dict[str, str] = {}
    for item in b.items:
        b_texts.setdefault(normalise_text(item.text), item.id)
    shared_texts = [
        (item.id, b_texts[key]) for item in a.items if (key := normalise_text(item.text)) in b_texts
    ]
    return shared_ids, shared_texts


def check_disjoint(eval: Split, others: Mapping[str, Split]) -> None:
    """Refuse any shared ID or identical normalised text between any two splits (R1.4): a
    tune set that holds training items tunes on what was fitted."""
    pairs = [("eval", eval, name, corpus) for name, corpus in others.items()]
    pairs += [(x, others[x], y, others[y]) for x, y in itertools.combinations(others, 2)]
    problems = []
    for a_name, a, b_name, b in pairs:
        shared_ids, shared_texts = _overlap(a, b)
        if shared_ids:
            problems.append(
                f"{len(shared_ids)} ID(s) in both {a_name} ({a.path.name}) and {b_name} "
                f"({b.path.name}), e.g. {shared_ids[:5]}"
            )
        if shared_texts:
            examples = [f"{a_name}:{x} = {b_name}:{y}" for x, y in shared_texts[:5]]
            problems.append(
                f"{len(shared_texts)} text(s) identical after Unicode normalisation, casefolding "
                f"and whitespace collapsing in both {a_name} and {b_name}, e.g. {examples}"
            )
    if problems:
        raise CorpusError(
            "training, tuning and evaluation data overlap: "
            + "; ".join(problems)
            + "; remove the shared items from the training or tuning split",
            rule="R1.4",
        )

"""economics.json ``offers[].attribution`` is a typed record (records.Record): written as the rule
gave it, read back the same, and a malformed one is refused naming its key (R5.6, R5.7)."""

from __future__ import annotations

import pytest

from gpubench_nb.economics.attribution import Attribution, Hardware, attribute
from gpubench_nb.errors import BundleError
from tests.support.ledger import make_offer

B200 = make_offer("b200", "NVIDIA B200 180GB", 2, (1, 2, 3))


def test_an_attribution_reads_back_as_it_was_written() -> None:
    owner = attribute(B200, 1, Hardware(("NVIDIA B200",), 1), None)
    written = owner.to_dict()
    assert written == {
        "offer_id": "b200",
        "attributable": True,
        "basis": "gpu model",
        "reason": "accepted on NVIDIA B200 × 1, the offer's GPU (NVIDIA B200 180GB)",
        "gpus_used": 1,
        "gpus_billed": 2,
        "lot_note": owner.lot_note,
    }
    assert owner.lot_note.startswith("2 GPUs billed (1 lot(s) of 2), 1 used")  # R2.5
    read = Attribution.from_dict(written, "economics.json", "offers[0].attribution")
    assert (read.attributable, read.gpus_billed, read.lot_note) == (True, 2, owner.lot_note)


def test_a_malformed_attribution_is_refused_naming_its_key() -> None:
    edited = {"offer_id": "b200", "attributable": "yes", "gpus_billed": 2}
    with pytest.raises(BundleError, match=r"offers\[0\]\.attribution\.attributable.*true or false"):
        Attribution.from_dict(edited, "economics.json", "offers[0].attribution")

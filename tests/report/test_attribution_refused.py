"""A malformed attribution in economics.json is refused naming the file, the offer and the key
(R5.6): the report never guesses who earned a cost per accepted corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench_nb.errors import BundleError
from gpubench_nb.protocol.lock import LockRecord
from gpubench_nb.protocol.records import EnvironmentRecord, OfferEconomics
from gpubench_nb.report.bundles import Bundle


def test_a_malformed_attribution_names_the_file_the_offer_and_the_key() -> None:
    bundle = Bundle(
        path=Path("b"),
        label="b",
        lock=LockRecord(),
        environment=EnvironmentRecord(),
        economics=None,
        rows=[],
    )
    offer = OfferEconomics(offer_id="h100", attribution={"attributable": "yes"})
    with pytest.raises(BundleError) as caught:
        bundle.attribution(offer)
    message = str(caught.value)
    assert "b/economics.json: key 'offers[h100].attribution.attributable'" in message
    assert "R5.6" in message
